// Package client is the load generator's HTTP client for OpenAI-compatible Chat Completions
// endpoints: it sends one request, reads the answer (an SSE stream or a JSON body) while
// timing it, and classifies the result into the contract's outcome classes (see Outcome).
//
// Measurement rules:
//   - Every timestamp is time.Now() (wall clock with a monotonic reading), so differences
//     between a Result's times are monotonic durations.
//   - An event is timed when the read that completed it returned, before it is parsed:
//     parsing cost never delays a timestamp. On Linux the time is the kernel's receive
//     timestamp of the newest segment behind that read (SO_TIMESTAMPNS, via recvmsg), so the
//     delay before a goroutine gets to read a ready connection — several streams becoming
//     readable in one burst queue behind each other on a small host — is not measured as
//     latency; such a time keeps a monotonic reading shifted by the same amount.
//   - First chunk = the first SSE data event ([DONE] excluded); TTFT (FirstToken) = the first
//     event with output: non-empty content or reasoning text, or a tool call (a non-empty
//     tool_calls array), never a role-only chunk; FirstAnswer = the first event with non-empty
//     (non-reasoning) content or a tool call; End = [DONE], else the end of the body, else
//     the failure.
//   - An answer succeeds (OK) only with output: a complete stream or JSON body without any
//     content, reasoning or tool call is an Error of type ErrTypeNoContent.
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
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"time"
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
	drainLimit = 64 << 10
	drainGrace = time.Second
	// readBufferSize sizes each connection's read buffer (one recvmsg reads at most this
	// much, ~20 typical SSE events) and a stream's buffer (one body read takes all that one
	// socket read brought); writeBufferSize each connection's write buffer (headers and a
	// typical body go out in one write; a larger body is written through after it). Neither
	// bounds a line: the SSE parser carries a partial line or event across reads, up to
	// MaxLineBytes. With thousands of streams in flight these buffers are most of the
	// client's memory: 4+4+4 KiB per stream, as net/http's defaults and a bufio.Scanner
	// give a minimal client (they were 16+4+16 KiB: 2,000 req/s with 300 ms between events
	// peaked ~20% higher in RSS, for no measured gain in CPU per request).
	readBufferSize  = 4 << 10
	writeBufferSize = 4 << 10
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
	// reads and stamped count the streamed reads of every finished call, and those dated
	// by the kernel's receive timestamp (ReceiveStamps).
	reads, stamped atomic.Int64
}

// ReceiveStamps returns how many reads of streamed answers this client has completed and
// how many of them were dated by the kernel's receive timestamp rather than by time.Now()
// after the read returned (counted when each call finishes; a read without a stamp is timed
// late by however long the reading goroutine waited to run).
func (c *Client) ReceiveStamps() (reads, stamped int64) {
	return c.reads.Load(), c.stamped.Load()
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
		WriteBufferSize:     writeBufferSize,
		ReadBufferSize:      readBufferSize,
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
	// ServerErrorType and ServerErrorCode are the "type" and "code" of the error object the
	// server sent — inside a 2xx stream or body, or as a non-2xx body (parseServerError
	// lists the shapes read) — "" when it sent none: a JSON string as sent, a number as its
	// literal (500 → "500"), another value as its compact JSON text; at most
	// MaxServerErrorFieldBytes each, never holding the bearer token of the call.
	ServerErrorType, ServerErrorCode string

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
	FirstToken              time.Time // first event with content, reasoning or a tool call (TTFT)
	FirstAnswer             time.Time // first event with content or a tool call, reasoning excluded
	// TokenChunks holds the arrival time of every data event that carried non-empty content,
	// reasoning or a tool call, in order (chunk-level: an event may carry several tokens).
	TokenChunks []time.Time
	// ChunkCount counts SSE data events except [DONE] and whitespace-only data (role, content,
	// usage and error chunks); CommentCount counts SSE comment lines (keep-alives).
	ChunkCount, CommentCount int
	SawDone                  bool      // the stream carried data: [DONE]
	End                      time.Time // [DONE], else end of body, else the failure

	FinishReason string // the last non-empty finish_reason seen
	Usage        *Usage // nil when the server sent no usage
	// Text is the concatenated content and reasoning text (for fallback token counts; tool
	// call arguments are not included), at most Options.MaxTextBytes; TextTruncated says the
	// cap cut it.
	Text          string
	TextTruncated bool
}

// errCallTimeout is the cause of the per-call context when its timeout fired.
var errCallTimeout = errors.New("per-call timeout elapsed")

// Do sends call and returns what happened; it never returns an error: every failure is a
// Result with its Outcome. ctx cancellation (drain deadline, Ctrl+C) aborts the call and
// gives Cancelled; the per-call timeout gives Timeout (or Unreachable when it elapsed before
// a connection). Partial timings (FirstToken…) are kept on failures.
func (c *Client) Do(ctx context.Context, call Call) Result {
	var res Result
	c.DoInto(ctx, call, &res)
	return res
}

// DoInto is Do writing the Result into *res (overwritten whole), for a caller that keeps it
// off its own stack frame: a goroutine waiting on a stream then holds only the pointer.
func (c *Client) DoInto(ctx context.Context, call Call, res *Result) {
	*res = Result{}
	timeout := call.Timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	callCtx, cancel := callContext(ctx, timeout)
	defer cancel()
	tr := &tracer{}
	callCtx = httptrace.WithClientTrace(callCtx, tr.trace())
	req, err := newRequest(callCtx, call)
	if err != nil {
		res.Start = time.Now()
		res.End = res.Start
		res.fail(Error, ErrTypeInvalidRequest, "the request could not be built: "+describeURLError(err))
		return
	}
	secret := bearer(call.Header)

	tr.start = time.Now()
	res.Start = tr.start
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		res.End = time.Now()
		tr.fill(res)
		c.classifyNoResponse(ctx, callCtx, timeout, err, res)
		res.redact(secret)
		return
	}
	defer resp.Body.Close()
	res.HTTPStatus = resp.StatusCode
	tr.fill(res)
	if !classifyStatus(resp, res) {
		c.readAnswer(ctx, callCtx, cancel, timeout, call.Stream, resp, res, tr.arrived)
	}
	if res.End.IsZero() {
		res.End = time.Now()
	}
	tr.fill(res) // WroteRequest may report after an early response
	res.redact(secret)
}

// callContext is the call's context: ctx with the per-call timeout (its cause
// errCallTimeout) when timeout > 0.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	}
	return context.WithCancel(ctx)
}

// newRequest builds the POST of call: URL credentials removed, call.Header sent as is, with
// Content-Type application/json added (on a copy) when it has none.
func newRequest(ctx context.Context, call Call) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(call.Body))
	if err != nil {
		return nil, err
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
	return req, nil
}
