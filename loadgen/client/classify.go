package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// fail records a failure: its outcome, ErrorType and message (cut to MaxErrorMessageBytes).
func (r *Result) fail(o Outcome, typ, msg string) {
	r.Outcome, r.ErrorType, r.ErrorMessage = o, typ, boundMessage(msg)
}

// failNoContent turns a complete answer (OK) that carried no output — no content, legacy
// text, reasoning or tool call — into an Error of type ErrTypeNoContent, naming its
// finish_reason when it had one.
func (r *Result) failNoContent() {
	msg := "the answer completed without content, reasoning or tool calls"
	if r.FinishReason != "" {
		msg += " (finish_reason " + r.FinishReason + ")"
	}
	r.fail(Error, ErrTypeNoContent, msg)
}

// classifyStatus decides the outcome of a response whose status alone decides it: Rejected
// for 429 and 503, Error for a redirect (never followed; its Location named without
// credentials, query or fragment) and for any other status outside 2xx. It reports whether
// it decided; a 2xx answer is left to readAnswer.
func classifyStatus(resp *http.Response, r *Result) bool {
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		r.failServer(Rejected, ErrTypeRejected, "", errorBody(resp))
	case code >= 300 && code < 400:
		msg := fmt.Sprintf("redirect (HTTP %d) not followed", code)
		if loc := safeLocation(resp.Header.Get("Location")); loc != "" {
			msg += "; Location: " + loc
		}
		r.fail(Error, ErrTypeRedirect, msg)
		_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBody)
	case code < 200 || code >= 300:
		r.failServer(Error, ErrTypeHTTPStatus, "", errorBody(resp))
	default:
		return false
	}
	return true
}

// classifyNoResponse decides the outcome of a call that got no status line, from the
// context states and the traced connection phases.
func (c *Client) classifyNoResponse(parent, callCtx context.Context, timeout time.Duration, err error, r *Result) {
	switch {
	case parent.Err() != nil:
		r.fail(Cancelled, ErrTypeCancelled, "cancelled by the caller before a response: "+causeText(parent))
	case callCtx.Err() != nil && context.Cause(callCtx) == errCallTimeout:
		if !r.Connected {
			r.fail(Unreachable, ErrTypeConnectTimeout, fmt.Sprintf("no connection within the timeout of %v", timeout))
		} else {
			r.fail(Timeout, ErrTypeTimeout, fmt.Sprintf("no response within the timeout of %v", timeout))
		}
	case !r.Connected:
		r.fail(Unreachable, ErrTypeConnect, err.Error())
	case !r.FirstByte.IsZero():
		r.fail(Error, ErrTypeBadResponse, "the server's answer is not an HTTP/1.x response: "+err.Error())
	case !r.WroteRequest:
		r.fail(DeliveryUnknown, ErrTypeSendFailed, "sending the request failed: "+err.Error())
	default:
		r.fail(DeliveryUnknown, ErrTypeNoResponse, "the connection ended before a status line: "+err.Error())
	}
}

// classifyReadErr decides the outcome of a 2xx answer whose body could not be read to its
// end: Cancelled when the caller's context ended, Timeout when the per-call timeout fired,
// else a truncated Error.
func classifyReadErr(parent, callCtx context.Context, timeout time.Duration, err error, r *Result) {
	switch {
	case parent.Err() != nil:
		r.fail(Cancelled, ErrTypeCancelled, "cancelled by the caller while reading the answer: "+causeText(parent))
	case callCtx.Err() != nil && context.Cause(callCtx) == errCallTimeout:
		r.fail(Timeout, ErrTypeTimeout, fmt.Sprintf("the answer did not finish within the timeout of %v", timeout))
	default:
		r.fail(Error, ErrTypeTruncated, "the connection failed during the answer: "+err.Error())
	}
}

// causeText is the text of ctx's cause, or "context done".
func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "context done"
}

// errorBody reads (a bounded part of) a non-2xx body and returns the error it holds
// (parseServerError), its message "HTTP <status> with an empty body" when there is none.
func errorBody(resp *http.Response) serverError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	se, _ := parseServerError(b, true)
	if se.Message == "" {
		se.Message = fmt.Sprintf("HTTP %d with an empty body", resp.StatusCode)
	}
	return se
}

// boundMessage cuts s to MaxErrorMessageBytes at a UTF-8 boundary ("…" added).
func boundMessage(s string) string { return bound(s, MaxErrorMessageBytes) }

// bound cuts s to at most n bytes at a UTF-8 boundary, adding "…" when it cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// bearer returns the credential of an Authorization header, to keep it out of messages.
func bearer(h http.Header) string {
	v := h.Get("Authorization")
	if i := strings.IndexByte(v, ' '); i >= 0 {
		v = strings.TrimSpace(v[i+1:])
	}
	if len(v) < 4 {
		return ""
	}
	return v
}

// redact keeps the call's credential out of the texts a server may echo it in.
func (r *Result) redact(secret string) {
	r.ErrorMessage = redact(r.ErrorMessage, secret)
	r.ServerErrorType = redact(r.ServerErrorType, secret)
	r.ServerErrorCode = redact(r.ServerErrorCode, secret)
}

func redact(msg, secret string) string {
	if secret == "" || msg == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "[REDACTED]")
}

// safeLocation renders a redirect target without credentials, query or fragment.
func safeLocation(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return boundMessage(u.String())
}

// describeURLError describes a request-building error without echoing the URL, which may
// carry credentials.
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
