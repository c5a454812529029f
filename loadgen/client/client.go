// Package client is the load generator's HTTP client for OpenAI-compatible Chat Completions
// endpoints: it sends one request, reads the answer (an SSE stream or a JSON body) while
// timing it, and classifies the result into the contract's outcome classes (see Outcome).
//
// Measurement rules (DESIGN.md "Metric definitions"; research/stormlog.md §2.5):
//   - Every timestamp is time.Now() (wall clock with a monotonic reading), so differences
//     between a Result's times are monotonic durations.
//   - An event is timed when the read that completed it returned, before it is parsed:
//     parsing cost never delays a timestamp. On Linux the time is the kernel's receive
//     timestamp of the newest segment behind that read (SO_TIMESTAMPNS, via recvmsg), so the
//     delay before a goroutine gets to read a ready connection — several streams becoming
//     readable in one burst queue behind each other on a small host — is not measured as
//     latency; such a time keeps a monotonic reading shifted by the same amount.
//   - First chunk = the first SSE data event ([DONE] excluded); TTFT (FirstToken) = the first
//     event with non-empty content or reasoning text, never a role-only chunk; FirstAnswer =
//     the first event with non-empty (non-reasoning) content; End = [DONE], else the end of
//     the body, else the failure.
//
// Connection handling: HTTP/1.1 only (one request per connection, so a reset concerns
// exactly one request), keep-alive reuse with an idle pool sized to the load, proxies from
// the environment ignored, redirects never followed, no transparent compression.
// Outcomes are decided from net/http/httptrace connection phases and context state, never
// by matching error strings.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/loadgen/sse"
)

// Defaults for Options fields left zero.
const (
	// DefaultMaxConnsPerHost sizes the idle pool when Options.MaxConnsPerHost is 0: the
	// contract's default --max-in-flight.
	DefaultMaxConnsPerHost = 128
	// DefaultMaxLineBytes bounds one SSE line or event, and a JSON body: 16 MiB.
	DefaultMaxLineBytes = 16 << 20
	// DefaultMaxTextBytes bounds Result.Text: 1 MiB.
	DefaultMaxTextBytes = 1 << 20
	// DefaultIdleConnTimeout closes a connection idle this long (4 s): shorter than the
	// 5 s keep-alive timeout of uvicorn (vLLM's server), so the client retires an idle
	// connection before the server does, instead of racing the server's close with a new
	// request (which would read as delivery_unknown).
	DefaultIdleConnTimeout = 4 * time.Second
	// MaxErrorMessageBytes bounds Result.ErrorMessage (cut at a UTF-8 boundary).
	MaxErrorMessageBytes = 1024
	// maxErrorBody is how much of a non-2xx body is read for its message.
	maxErrorBody = 64 << 10
	// drainLimit and drainGrace bound reading past [DONE] (or an in-stream error) to the
	// body's end, which lets the connection be reused.
	drainLimit     = 64 << 10
	drainGrace     = time.Second
	readBufferSize = 32 << 10
)

// Options configures a Client. The zero value is usable.
type Options struct {
	// MaxConnsPerHost is the most requests the caller keeps in flight to one host at once
	// (its --concurrency or --max-in-flight); 0 means DefaultMaxConnsPerHost. It sizes the
	// idle-connection pool so every connection is kept for reuse (Go's default keeps 2 per
	// host and closes the rest, so any higher load would keep opening connections). It does
	// not cap connections: the caller's in-flight limit does, and a cap here would hide a
	// wait for a connection inside the measured latency.
	MaxConnsPerHost int
	// Timeout is the per-call timeout used when Call.Timeout is 0; 0 means none. It covers
	// the whole call: connect, send, and reading the full response.
	Timeout time.Duration
	// MaxLineBytes bounds one SSE line, one SSE event's data, and a JSON response body;
	// 0 means DefaultMaxLineBytes (16 MiB). A longer one fails that request (error,
	// ErrTypeLineTooLong / ErrTypeBodyTooLarge).
	MaxLineBytes int
	// MaxTextBytes bounds Result.Text; 0 means DefaultMaxTextBytes.
	MaxTextBytes int
	// IdleConnTimeout closes idle connections after this long; 0 means DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// DialContext, when set, opens connections (e.g. to pin name resolution); nil uses a
	// net.Dialer with TCP keep-alive. Its failures are Unreachable.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig is used for https endpoints; nil means Go's defaults.
	TLSClientConfig *tls.Config
}

// Client sends Chat Completions calls. It is safe for concurrent use.
type Client struct {
	tr      *http.Transport
	maxLine int
	maxText int
	timeout time.Duration
	states  sync.Pool // *stream
}

// New returns a Client whose http.Transport ignores environment proxies (Proxy nil), keeps
// MaxConnsPerHost idle connections per host for reuse, speaks HTTP/1.1 only, never asks for
// compression (DisableCompression, so no Accept-Encoding is added and nothing is decoded
// behind the caller's back), and is never wrapped in an http.Client, so redirects are never
// followed.
func New(o Options) *Client {
	idle := o.MaxConnsPerHost
	if idle <= 0 {
		idle = DefaultMaxConnsPerHost
	}
	idleTimeout := o.IdleConnTimeout
	if idleTimeout <= 0 {
		idleTimeout = DefaultIdleConnTimeout
	}
	primeRxTimestamps() // before any request: the first segments are stamped too
	base := o.DialContext
	if base == nil {
		base = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rxTimestamps(c), nil
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     o.TLSClientConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		MaxIdleConns:        0, // no total limit; the per-host one applies
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     idleTimeout,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      64 << 10,
		Protocols:           &protocols,
	}
	c := &Client{tr: tr, maxLine: o.MaxLineBytes, maxText: o.MaxTextBytes, timeout: o.Timeout}
	if c.maxLine <= 0 {
		c.maxLine = DefaultMaxLineBytes
	}
	if c.maxText <= 0 {
		c.maxText = DefaultMaxTextBytes
	}
	return c
}

// CloseIdle closes the connections that are idle now (in-flight ones are kept).
func (c *Client) CloseIdle() { c.tr.CloseIdleConnections() }

// proxyEnvNames are the variables through which HTTP clients commonly pick up proxies.
var proxyEnvNames = []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"}

// IgnoredProxyEnv returns the names (never the values, which may hold credentials) of the
// proxy variables set to a non-empty value in the environment, in the order HTTP_PROXY,
// http_proxy, HTTPS_PROXY, https_proxy, ALL_PROXY, all_proxy. A Client ignores all of them;
// callers record the list (config.environment_proxies).
func IgnoredProxyEnv() []string {
	var set []string
	for _, n := range proxyEnvNames {
		if os.Getenv(n) != "" {
			set = append(set, n)
		}
	}
	return set
}

// Call is one Chat Completions request.
type Call struct {
	// URL is the full endpoint URL (e.g. http://host:8000/v1/chat/completions). Credentials
	// in it are not sent and never appear in a Result.
	URL string
	// Header is sent as is (Authorization, X-Request-Id, traceparent…); it is only read.
	// Content-Type defaults to application/json.
	Header http.Header
	// Body is the JSON request body, sent with POST.
	Body []byte
	// Stream says the body asked for stream:true. The response is read as SSE when it is
	// text/event-stream, as JSON when it is application/json, and otherwise as Stream says.
	Stream bool
	// Timeout overrides Options.Timeout for this call when non-zero.
	Timeout time.Duration
}

// Usage is the server-reported token usage (OpenAI "usage" object).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Result is what Do measured. Times are zero when the moment did not happen. Latencies are
// differences from Start (e.g. TTFT = FirstToken.Sub(Start)).
type Result struct {
	Outcome    Outcome
	HTTPStatus int // the response's status; 0 when no status line was received
	// ErrorType is one of the ErrType* constants ("" for OK); ErrorMessage is the detail
	// (the server's message when it sent one), at most MaxErrorMessageBytes, never holding
	// the bearer token of the call.
	ErrorType, ErrorMessage string

	Start time.Time // just before the request began to be sent (after it was built)
	// Connected: a connection was obtained (new, after any TLS handshake, or reused);
	// WroteRequest: the whole request was written to it. From httptrace GotConn and
	// WroteRequest, for the last attempt (the transport retries a request on a reused
	// connection only when nothing of it was written).
	Connected, WroteRequest bool
	ConnReused              bool      // the connection was reused from the idle pool
	GotConn                 time.Time // connection obtained (httptrace GotConn)
	WroteAt                 time.Time // request fully written (httptrace WroteRequest)
	FirstByte               time.Time // first response byte (httptrace GotFirstResponseByte)
	FirstChunk              time.Time // first SSE data event, [DONE] excluded (zero for JSON bodies)
	FirstToken              time.Time // first event with non-empty content or reasoning (TTFT)
	FirstAnswer             time.Time // first event with non-empty content, reasoning excluded
	// TokenChunks holds the arrival time of every data event that carried non-empty content
	// or reasoning, in order (chunk-level: an event may carry several tokens).
	TokenChunks []time.Time
	// ChunkCount counts SSE data events except [DONE] and whitespace-only data (role, content,
	// usage and error chunks); CommentCount counts SSE comment lines (keep-alives).
	ChunkCount, CommentCount int
	SawDone                  bool      // the stream carried data: [DONE]
	End                      time.Time // [DONE], else end of body, else the failure

	FinishReason string // the last non-empty finish_reason seen
	Usage        *Usage // nil when the server sent no usage
	// Text is the concatenated content and reasoning text (for fallback token counts), at
	// most Options.MaxTextBytes; TextTruncated says the cap cut it.
	Text          string
	TextTruncated bool
	// NoContent: the answer completed (OK) but carried no content or reasoning text at all.
	NoContent bool
}

// errCallTimeout is the cause of the per-call context when its timeout fired.
var errCallTimeout = errors.New("per-call timeout elapsed")

// tracer records connection phases. Its callbacks run on transport goroutines, so fields are
// atomic; times are nanoseconds since start (0 = not yet).
type tracer struct {
	start     time.Time
	connected atomic.Bool
	reused    atomic.Bool
	wrote     atomic.Bool
	gotConn   atomic.Int64
	wroteAt   atomic.Int64
	firstByte atomic.Int64
	conn      atomic.Value // connRef: the attempt's connection
}

// connRef holds a connection in an atomic.Value (whose stored type must never change).
type connRef struct{ c net.Conn }

// arrived returns the kernel receive time of the newest data read on the call's connection
// when that is known (Linux, SO_TIMESTAMPNS), not before the call started and not after
// now; otherwise now. The time is placed on the call's monotonic clock as start plus the
// wall-clock difference, so that equal kernel timestamps give equal times.
func (t *tracer) arrived(now time.Time) time.Time {
	ref, _ := t.conn.Load().(connRef)
	if ref.c == nil {
		return now
	}
	rx, start := lastRx(ref.c), t.start.UnixNano()
	if rx == 0 || rx < start || rx > now.UnixNano() {
		return now
	}
	return t.start.Add(time.Duration(rx - start))
}

func (t *tracer) since() int64 { return max(int64(time.Since(t.start)), 1) }

func (t *tracer) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) {
			// A new attempt (the transport may retry on another connection): phases restart.
			t.connected.Store(false)
			t.wrote.Store(false)
		},
		GotConn: func(info httptrace.GotConnInfo) {
			t.conn.Store(connRef{info.Conn})
			t.reused.Store(info.Reused)
			t.gotConn.Store(t.since())
			t.connected.Store(true)
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				t.wroteAt.Store(t.since())
				t.wrote.Store(true)
			}
		},
		GotFirstResponseByte: func() {
			// The first byte's read has completed: its arrival time, like every event's.
			t.firstByte.Store(max(int64(t.arrived(time.Now()).Sub(t.start)), 1))
		},
	}
}

func (t *tracer) at(v *atomic.Int64) time.Time {
	if n := v.Load(); n > 0 {
		return t.start.Add(time.Duration(n))
	}
	return time.Time{}
}

// fill copies the trace into r.
func (t *tracer) fill(r *Result) {
	r.Connected, r.WroteRequest, r.ConnReused = t.connected.Load(), t.wrote.Load(), t.reused.Load()
	r.GotConn, r.WroteAt, r.FirstByte = t.at(&t.gotConn), t.at(&t.wroteAt), t.at(&t.firstByte)
}

// Do sends call and returns what happened; it never returns an error: every failure is a
// Result with its Outcome. ctx cancellation (drain deadline, Ctrl+C) aborts the call and
// gives Cancelled; the per-call timeout gives Timeout (or Unreachable when it elapsed before
// a connection). Partial timings (FirstToken…) are kept on failures.
func (c *Client) Do(ctx context.Context, call Call) Result {
	var res Result
	timeout := call.Timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	var callCtx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	} else {
		callCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	tr := &tracer{}
	callCtx = httptrace.WithClientTrace(callCtx, tr.trace())
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, call.URL, bytes.NewReader(call.Body))
	if err != nil {
		res.Start = time.Now()
		res.End = res.Start
		res.fail(Error, ErrTypeInvalidRequest, "the request could not be built: "+describeURLError(err))
		return res
	}
	req.URL.User = nil // never send URL credentials
	req.Header = call.Header
	if req.Header.Get("Content-Type") == "" {
		req.Header = call.Header.Clone()
		if req.Header == nil {
			req.Header = make(http.Header, 1)
		}
		req.Header.Set("Content-Type", "application/json")
	}
	secret := bearer(call.Header)

	tr.start = time.Now()
	res.Start = tr.start
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		res.End = time.Now()
		tr.fill(&res)
		c.classifyNoResponse(ctx, callCtx, timeout, err, &res)
		res.ErrorMessage = redact(res.ErrorMessage, secret)
		return res
	}
	defer resp.Body.Close()
	res.HTTPStatus = resp.StatusCode
	tr.fill(&res)

	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		res.fail(Rejected, ErrTypeRejected, errorBodyMessage(resp))
	case code >= 300 && code < 400:
		msg := fmt.Sprintf("redirect (HTTP %d) not followed", code)
		if loc := safeLocation(resp.Header.Get("Location")); loc != "" {
			msg += "; Location: " + loc
		}
		res.fail(Error, ErrTypeRedirect, msg)
		_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBody)
	case code < 200 || code >= 300:
		res.fail(Error, ErrTypeHTTPStatus, errorBodyMessage(resp))
	default:
		c.readAnswer(ctx, callCtx, cancel, timeout, call.Stream, resp, &res, tr.arrived)
	}
	if res.End.IsZero() {
		res.End = time.Now()
	}
	tr.fill(&res) // WroteRequest may report after an early response
	res.ErrorMessage = redact(res.ErrorMessage, secret)
	return res
}

func (r *Result) fail(o Outcome, typ, msg string) {
	r.Outcome, r.ErrorType, r.ErrorMessage = o, typ, boundMessage(msg)
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

func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return "context done"
}

// readAnswer reads a 2xx answer as an SSE stream or a JSON body.
//
// arrived maps a read's time.Now() to the data's arrival time (tracer.arrived).
func (c *Client) readAnswer(parent, callCtx context.Context, cancel context.CancelFunc, timeout time.Duration, stream bool, resp *http.Response, r *Result, arrived func(time.Time) time.Time) {
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		r.fail(Error, ErrTypeEncoding, "the server sent a "+boundMessage(ce)+"-encoded body although none was asked for")
		return
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		stream = true
	case "application/json":
		stream = false
	}
	s := c.getStream()
	defer c.putStream(s)
	s.arrived = arrived
	s.contentType = resp.Header.Get("Content-Type")
	onReadErr := func(err error) {
		switch {
		case parent.Err() != nil:
			r.fail(Cancelled, ErrTypeCancelled, "cancelled by the caller while reading the answer: "+causeText(parent))
		case callCtx.Err() != nil && context.Cause(callCtx) == errCallTimeout:
			r.fail(Timeout, ErrTypeTimeout, fmt.Sprintf("the answer did not finish within the timeout of %v", timeout))
		default:
			r.fail(Error, ErrTypeTruncated, "the connection failed during the answer: "+err.Error())
		}
	}
	if stream {
		s.readStream(callCtx, resp.Body, r, cancel, onReadErr)
	} else {
		s.readJSON(resp.Body, r, onReadErr)
	}
}

// stream holds the per-call reading state; pooled.
type stream struct {
	c       *Client
	parser  *sse.Parser
	buf     []byte
	body    []byte
	w       wireChunk
	text    []byte
	res     *Result
	arrived func(time.Time) time.Time // nil: time.Now() as read
	// contentType is the answer's Content-Type (named when a "stream" held no event at all).
	contentType string
	stopped     bool // [DONE] or a failure: later events are ignored
	failed      bool
	// comments is the parser's comment count when the stream stopped (used once stopped):
	// comments after [DONE] or a failure are not counted, however the reads were cut.
	comments int
}

func (c *Client) getStream() *stream {
	if s, ok := c.states.Get().(*stream); ok {
		return s
	}
	return &stream{c: c, parser: sse.NewParser(c.maxLine), buf: make([]byte, readBufferSize)}
}

func (c *Client) putStream(s *stream) {
	s.parser.Reset()
	s.w.reset()
	if cap(s.text) > 64<<10 {
		s.text = nil
	}
	if cap(s.body) > 64<<10 {
		s.body = nil
	}
	s.text, s.body = s.text[:0], s.body[:0]
	s.res, s.stopped, s.failed, s.arrived, s.contentType = nil, false, false, nil, ""
	c.states.Put(s)
}

// readStream reads an SSE body to its end, timing each read before parsing it.
func (s *stream) readStream(callCtx context.Context, body io.Reader, r *Result, cancel context.CancelFunc, onReadErr func(error)) {
	s.res = r
	r.TokenChunks = make([]time.Time, 0, 32)
	drained := 0
	var drainTimer *time.Timer
	for {
		n, err := body.Read(s.buf)
		if n > 0 {
			now := time.Now()
			if s.arrived != nil {
				now = s.arrived(now)
			}
			if !s.stopped {
				perr := s.parser.Feed(s.buf[:n], func(e sse.Event) { s.event(e, now) })
				if perr != nil && !s.stopped {
					s.failAt(now, ErrTypeLineTooLong, fmt.Sprintf("an SSE line or event exceeds %d bytes", s.c.maxLine))
					s.finish()
					return // the rest is not read: the connection is not reused
				}
			} else {
				drained += n
			}
			if s.stopped {
				if drainTimer == nil {
					drainTimer = time.AfterFunc(drainGrace, cancel)
					defer drainTimer.Stop()
				}
				if drained > drainLimit {
					s.finish()
					return
				}
			}
		}
		if err == nil {
			continue
		}
		if s.stopped {
			s.finish() // [DONE] or failure already decided; EOF or a drain error changes nothing
			return
		}
		r.End = time.Now()
		if err != io.EOF {
			if r.FinishReason == "" || callCtx.Err() != nil {
				onReadErr(err)
				s.finish()
				return
			}
			// The connection failed after the answer was complete (finish_reason seen) and
			// only [DONE] was lost: OK, ending at the failure.
		} else if r.FinishReason == "" {
			msg := "the stream ended without finish_reason and without [DONE]"
			if s.parser.Pending() {
				msg += " (an unterminated event at the end was discarded)"
			}
			if r.ChunkCount == 0 && r.CommentCount == 0 && mediaType(s.contentType) != "text/event-stream" {
				// Not an event stream at all: likely a wrong URL answered by a web page or proxy.
				msg += fmt.Sprintf("; the body held no SSE event (Content-Type %q)", boundMessage(s.contentType))
			}
			r.fail(Error, ErrTypeTruncated, msg)
			s.finish()
			return
		}
		r.Outcome = OK
		s.finish()
		return
	}
}

// finish copies the accumulated state into the result.
func (s *stream) finish() {
	r := s.res
	r.CommentCount = s.parser.Comments()
	if s.stopped {
		r.CommentCount = s.comments
	}
	r.Text = string(s.text)
	if r.Outcome == "" && s.failed {
		r.Outcome = Error
	}
	if r.Outcome == OK && r.FirstToken.IsZero() {
		r.NoContent = true
	}
	if len(r.TokenChunks) == 0 {
		r.TokenChunks = nil
	}
}

func (s *stream) failAt(now time.Time, typ, msg string) {
	s.res.fail(Error, typ, msg)
	s.res.End = now
	s.stop()
	s.failed = true
}

// stop ends event handling: the answer is decided.
func (s *stream) stop() {
	s.stopped = true
	s.comments = s.parser.Comments()
}

var doneData = []byte("[DONE]")

// event handles one SSE event that arrived with the read that returned at now.
func (s *stream) event(e sse.Event, now time.Time) {
	if s.stopped {
		return
	}
	r := s.res
	if e.Type == "error" {
		s.failAt(now, ErrTypeStreamError, "error event in the stream: "+errorDataMessage(e.Data))
		return
	}
	if bytes.Equal(e.Data, doneData) {
		r.SawDone = true
		r.End = now
		r.Outcome = OK
		s.stop()
		return
	}
	if len(bytes.TrimSpace(e.Data)) == 0 {
		return // an empty data event carries nothing; not a chunk
	}
	r.ChunkCount++
	if r.FirstChunk.IsZero() {
		r.FirstChunk = now
	}
	s.w.reset()
	if err := decodeChunk(e.Data, &s.w); err != nil {
		s.failAt(now, ErrTypeInvalidJSON, "a data event is not valid JSON: "+err.Error())
		return
	}
	if msg, isErr := s.w.errorText(); isErr {
		s.failAt(now, ErrTypeStreamError, "error object in the stream: "+msg)
		return
	}
	answer, token := s.choices(true)
	if token {
		r.TokenChunks = append(r.TokenChunks, now)
		if r.FirstToken.IsZero() {
			r.FirstToken = now
		}
		if answer && r.FirstAnswer.IsZero() {
			r.FirstAnswer = now
		}
	}
	if s.w.Usage.set {
		if r.Usage == nil {
			r.Usage = new(Usage)
		}
		*r.Usage = s.w.Usage.u
	}
}

// choices reads the decoded choices (delta when streaming, message otherwise): it appends
// their text, notes finish_reason, and says whether content (answer) and content or
// reasoning (token) were non-empty.
func (s *stream) choices(delta bool) (answer, token bool) {
	for i := range s.w.Choices {
		ch := &s.w.Choices[i]
		m := &ch.Message
		if delta {
			m = &ch.Delta
		}
		if m.Content.isText() {
			answer = true
			s.appendText(m.Content)
		}
		if ch.Text.isText() {
			answer = true
			s.appendText(ch.Text)
		}
		// vLLM has sent both fields with the same text; count the text once.
		if m.ReasoningContent.isText() {
			token = true
			s.appendText(m.ReasoningContent)
		} else if m.Reasoning.isText() {
			token = true
			s.appendText(m.Reasoning)
		}
		if ch.FinishReason.isText() {
			s.res.FinishReason = finishReason(ch.FinishReason)
		}
	}
	return answer, token || answer
}

func (s *stream) appendText(v raw) {
	if s.res.TextTruncated {
		return
	}
	before := len(s.text)
	s.text = appendJSONString(s.text, v)
	if len(s.text) > s.c.maxText {
		cut := s.c.maxText
		for cut > before && !utf8.RuneStart(s.text[cut]) {
			cut--
		}
		s.text = s.text[:cut]
		s.res.TextTruncated = true
	}
}

// readJSON reads a non-streaming JSON answer (a chat.completion object).
func (s *stream) readJSON(body io.Reader, r *Result, onReadErr func(error)) {
	s.res = r
	limit := s.c.maxLine
	if cap(s.body) == 0 {
		s.body = make([]byte, 0, 4096)
	}
	for {
		if len(s.body) == cap(s.body) {
			s.body = append(s.body, 0)[:len(s.body)]
		}
		n, err := body.Read(s.body[len(s.body):cap(s.body)])
		s.body = s.body[:len(s.body)+n]
		if len(s.body) > limit {
			r.End = time.Now()
			r.fail(Error, ErrTypeBodyTooLarge, fmt.Sprintf("the JSON body exceeds %d bytes", limit))
			return
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			r.End = time.Now()
			onReadErr(err)
			return
		}
	}
	r.End = time.Now()
	s.w.reset()
	if err := decodeChunk(s.body, &s.w); err != nil {
		r.fail(Error, ErrTypeInvalidJSON, "the JSON body does not decode: "+err.Error())
		return
	}
	if msg, isErr := s.w.errorText(); isErr {
		r.fail(Error, ErrTypeResponseError, "error object in the answer: "+msg)
		return
	}
	if len(s.w.Choices) == 0 {
		r.fail(Error, ErrTypeInvalidResponse, "the JSON answer has no choices")
		return
	}
	_, token := s.choices(false)
	if s.w.Usage.set {
		u := s.w.Usage.u
		r.Usage = &u
	}
	r.Outcome = OK
	r.NoContent = !token
	r.Text = string(s.text)
}

// errorBodyMessage reads (a bounded part of) a non-2xx body and returns its message.
func errorBodyMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if msg := bodyMessage(b); msg != "" {
		return msg
	}
	return fmt.Sprintf("HTTP %d with an empty body", resp.StatusCode)
}

// bodyMessage extracts an error message from a body: {"error":{"message":…}},
// {"error":"…"}, {"message":"…"}, {"detail":…} (FastAPI), else the text itself.
func bodyMessage(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Error   raw `json:"error"`
			Message raw `json:"message"`
			Detail  raw `json:"detail"`
		}
		if json.Unmarshal(b, &o) == nil {
			switch {
			case o.Error.isSet():
				return messageOf(o.Error)
			case o.Message.isText():
				return jsonString(o.Message)
			case o.Detail.isSet():
				return messageOf(o.Detail)
			}
		}
	}
	return string(b)
}

// errorDataMessage returns the message of an "event: error" payload (JSON or text).
func errorDataMessage(d []byte) string {
	if msg := bodyMessage(d); msg != "" {
		return msg
	}
	return "(no message)"
}

// boundMessage cuts s to MaxErrorMessageBytes at a UTF-8 boundary.
func boundMessage(s string) string {
	if len(s) <= MaxErrorMessageBytes {
		return s
	}
	cut := MaxErrorMessageBytes
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

// mediaType returns the lower-cased media type of a Content-Type value, without parameters
// (no allocation for the usual lower-case values).
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "text/event-stream"):
		return "text/event-stream"
	case strings.EqualFold(ct, "application/json"):
		return "application/json"
	}
	return strings.ToLower(ct)
}
