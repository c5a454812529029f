package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

// ErrAborted is wrapped by Client.WaitStart when the coordinator aborted the run.
var ErrAborted = errors.New("the coordinator aborted the run")

// Client is a shard's side of the coordinator API. Base is the coordinator's URL
// (http://host:port); HTTP and Clock default to a plain client and the real clock; Probes is
// the number of offset probes (default 8).
type Client struct {
	Base   string
	HTTP   *http.Client
	Clock  clockwork.Clock
	Probes int
	// RegisterRetry is how long Register retries an unreachable coordinator (0:
	// RegisterRetry, the constant).
	RegisterRetry time.Duration
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}
}

func (c *Client) clock() clockwork.Clock {
	if c.Clock != nil {
		return c.Clock
	}
	return clockwork.NewRealClock()
}

// call does one request and decodes a JSON answer into out; it returns the status.
func (c *Client) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, rd)
	if err != nil {
		return 0, fmt.Errorf("coordinator %s: %w", artifact.EchoURL(c.Base), err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, fmt.Errorf("coordinator %s: %w", artifact.EchoURL(c.Base), err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("coordinator %s: %s %s answered %d without a JSON body: %w", artifact.EchoURL(c.Base), method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

type answer struct {
	Status    string `json:"status"`
	Error     string `json:"error"`
	StartAtNS *int64 `json:"start_at_ns"`
}

// RegisterRetry is how long Register keeps retrying (by default) an unreachable coordinator (it may start
// after its shards: pods of one Job start in any order), every RegisterPoll.
const (
	RegisterRetry = 60 * time.Second
	RegisterPoll  = 250 * time.Millisecond
)

// Register registers the shard, retrying an unreachable coordinator for RegisterRetry.
// Errors: the coordinator still unreachable, its refusal (a duplicate index, another run,
// workload or shard count) with its reason and status, or ctx's.
func (c *Client) Register(ctx context.Context, r Registration) error {
	retry := c.RegisterRetry
	if retry <= 0 {
		retry = RegisterRetry
	}
	deadline := c.clock().Now().Add(retry)
	for {
		var a answer
		status, err := c.call(ctx, http.MethodPost, "/v1/register", r, &a)
		if err == nil && status != http.StatusOK {
			return fmt.Errorf("the coordinator refused shard %d (HTTP %d): %s", r.Shard, status, a.Error)
		}
		if err == nil || status != 0 || !c.clock().Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock().After(RegisterPoll):
		}
	}
}

// WaitStart polls until the coordinator announces the start (its clock). Errors: ctx's,
// the coordinator unreachable, or the run aborted (wrapping ErrAborted, with the reason).
func (c *Client) WaitStart(ctx context.Context, shard int) (time.Time, error) {
	for {
		var a answer
		status, err := c.call(ctx, http.MethodGet, fmt.Sprintf("/v1/start?shard=%d", shard), nil, &a)
		switch {
		case err != nil:
			return time.Time{}, err
		case status == http.StatusOK && a.StartAtNS != nil:
			return time.Unix(0, *a.StartAtNS), nil
		case status == http.StatusGone:
			return time.Time{}, fmt.Errorf("%w: %s", ErrAborted, a.Error)
		case status != http.StatusAccepted:
			return time.Time{}, fmt.Errorf("coordinator %s: start poll answered %d %s", artifact.EchoURL(c.Base), status, a.Error)
		}
	}
}

// Offset is a clock offset estimate: coordinator time ≈ shard time + OffsetNS, within
// ±UncertaintyNS (half the probe's round trip); RTTNS is that probe's round trip less the
// coordinator's own time, Probes how many probes were taken, Domain the coordinator's clock.
type Offset struct {
	OffsetNS, UncertaintyNS, RTTNS int64
	Probes                         int
	Domain                         string
}

// Probe is one timed exchange: t0 the shard's send, t1 the coordinator's receive, t2 its
// send, t3 the shard's receive (Unix ns).
type Probe struct{ T0, T1, T2, T3 int64 }

// MinRTT is the estimate from the probe with the smallest round trip (t3−t0)−(t2−t1):
// offset ((t1−t0)+(t2−t3))/2, uncertainty RTT/2. ok is false without any probe whose round
// trip is ≥ 0.
func MinRTT(probes []Probe) (Offset, bool) {
	best, found := Offset{}, false
	for _, p := range probes {
		rtt := (p.T3 - p.T0) - (p.T2 - p.T1)
		if rtt < 0 {
			continue
		}
		if !found || rtt < best.RTTNS {
			best = Offset{OffsetNS: ((p.T1 - p.T0) + (p.T2 - p.T3)) / 2, UncertaintyNS: (rtt + 1) / 2, RTTNS: rtt}
			found = true
		}
	}
	best.Probes = len(probes)
	return best, found
}

// Offset probes the coordinator's clock Probes times and returns MinRTT's estimate. Errors:
// a probe that fails, or no usable probe.
func (c *Client) Offset(ctx context.Context) (Offset, error) {
	n := c.Probes
	if n <= 0 {
		n = 8
	}
	var probes []Probe
	domain := ""
	for i := 0; i < n; i++ {
		var a struct {
			ReceiveNS *int64 `json:"receive_ns"`
			SendNS    *int64 `json:"send_ns"`
			Domain    string `json:"clock_domain"`
		}
		t0 := c.clock().Now().UnixNano()
		status, err := c.call(ctx, http.MethodGet, "/v1/time", nil, &a)
		t3 := c.clock().Now().UnixNano()
		if err != nil {
			return Offset{}, err
		}
		if status != http.StatusOK || a.ReceiveNS == nil || a.SendNS == nil {
			return Offset{}, fmt.Errorf("coordinator %s: time probe answered %d without receive_ns and send_ns", artifact.EchoURL(c.Base), status)
		}
		domain = a.Domain
		probes = append(probes, Probe{T0: t0, T1: *a.ReceiveNS, T2: *a.SendNS, T3: t3})
	}
	off, ok := MinRTT(probes)
	if !ok {
		return Offset{}, fmt.Errorf("coordinator %s: no time probe had a non-negative round trip", artifact.EchoURL(c.Base))
	}
	off.Domain = domain
	return off, nil
}

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }
