package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
)

// Cache reset answers (the contract's table).
const (
	ResetAcknowledged       = "acknowledged"        // the server answered success: true
	ResetRefused            = "refused"             // success: false (or any non-true value) until the timeout
	ResetAcceptedUnverified = "accepted_unverified" // a 2xx answer without a success field
)

// Run kinds: how a case was designed (never evidence about the cache).
const (
	RunColdStart   = "cold_start"
	RunSteadyState = "steady_state"
	RunUnspecified = "unspecified"
)

// resetRetryEvery is the pause between refused reset attempts.
const resetRetryEvery = 500 * time.Millisecond

// resetResult is the outcome of POSTing the cache-reset URL before a case.
type resetResult struct {
	At         time.Time // first attempt sent
	AnsweredAt time.Time // the recorded (last) answer came back; zero when none did
	Status     int       // HTTP status of the last answer; 0 when none
	Err        string    // transport error of the last attempt
	Success    *bool     // the answer's success field when it was a boolean
	Answer     string    // acknowledged | refused | accepted_unverified | "" (failed)
	Attempts   int
}

// failed reports whether the reset failed or was refused.
func (r *resetResult) failed() bool {
	return r.Answer != ResetAcknowledged && r.Answer != ResetAcceptedUnverified
}

// describe is the human reason recorded on infer.cache_state and printed in warnings.
func (r *resetResult) describe() string {
	switch {
	case r.Answer == ResetAcknowledged:
		return "the server acknowledged the reset, but it cannot be confirmed"
	case r.Answer == ResetAcceptedUnverified:
		return "the reset returned a 2xx without saying whether it succeeded"
	case r.Answer == ResetRefused:
		return fmt.Sprintf("the reset was refused (success: false) after %d attempts", r.Attempts)
	case r.Err != "":
		return fmt.Sprintf("the reset failed: %s", r.Err)
	default:
		return fmt.Sprintf("the reset failed (HTTP %d)", r.Status)
	}
}

// resetCache POSTs url with the API key, reading vLLM's {"success": bool} answer. A refused
// reset is retried every half second until timeout has passed since the first attempt (0: one
// try); no attempt starts after the timeout, though the last may take up to perTry. Times
// are read from clock.
func resetCache(ctx context.Context, clock clockwork.Clock, hc *http.Client, url, apiKey string, timeout, perTry time.Duration) resetResult {
	res := resetResult{At: clock.Now()}
	for {
		res.Attempts++
		res.Status, res.Err, res.Success, res.Answer = 0, "", nil, ""
		func() {
			cctx, cancel := context.WithTimeout(ctx, perTry)
			defer cancel()
			req, err := http.NewRequestWithContext(cctx, http.MethodPost, url, bytes.NewReader(nil))
			if err != nil {
				res.Err = err.Error()
				return
			}
			req.URL.User = nil // never send URL credentials (Validate refuses them too)
			if apiKey != "" {
				req.Header.Set("Authorization", "Bearer "+apiKey)
			}
			resp, err := hc.Do(req)
			if err != nil {
				res.Err = redactErr(err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			res.AnsweredAt = clock.Now()
			res.Status = resp.StatusCode
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				return
			}
			var ans map[string]json.RawMessage
			raw, has := json.RawMessage(nil), false
			if json.Unmarshal(body, &ans) == nil {
				raw, has = ans["success"]
			}
			if !has {
				res.Answer = ResetAcceptedUnverified
				return
			}
			var b bool
			if json.Unmarshal(raw, &b) == nil {
				res.Success = &b
			}
			if res.Success != nil && *res.Success {
				res.Answer = ResetAcknowledged
			} else {
				res.Answer = ResetRefused
			}
		}()
		if res.Answer != ResetRefused || ctx.Err() != nil {
			return res
		}
		next := clock.Now().Add(resetRetryEvery)
		if next.Sub(res.At) > timeout {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-clock.After(clock.Until(next)):
		}
	}
}

// redactErr returns err's text without the URL (which may carry credentials or a query).
func redactErr(err error) string {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap().Error()
	}
	return err.Error()
}
