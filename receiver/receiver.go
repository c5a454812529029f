package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed gRPC exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip)
)

// Endpoint facts: the OTLP/HTTP traces path and the standard OTLP ports.
const (
	// TracesPath is the OTLP/HTTP traces path.
	TracesPath = "/v1/traces"
	// DefaultHTTPListen and DefaultGRPCListen are the default addresses of
	// --vllm-spans-listen and --vllm-spans-grpc-listen (the OTLP ports).
	DefaultHTTPListen = "127.0.0.1:4318"
	DefaultGRPCListen = "127.0.0.1:4317"
)

// Defaults of Options: the receiver limits that bound its memory.
const (
	// DefaultMaxBodyBytes bounds one export after decompression: 16 MiB.
	// vLLM's exporter sends batches of at most 512 spans (about 0.3 MiB of
	// protobuf); a Collector's batch processor at its default 8,192 spans
	// about 5 MiB, and the 12,000-span exports it was seen to send 7 MiB.
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMemoryLimitBytes bounds the bytes held at once by the exports
	// being read, decoded and converted, over every connection of both
	// transports (see decodeCost): 128 MiB, which holds the largest export
	// DefaultMaxBodyBytes allows of real spans (about 28,000 vLLM spans cost
	// about 105 MiB).
	DefaultMemoryLimitBytes = 128 << 20
	// DefaultMaxExportElements bounds the elements of one export counted by
	// the pre-scan (resource spans, scope spans, spans, events, links,
	// attributes, array values; for JSON, objects and arrays): 1,048,576. A
	// full 16 MiB export of vLLM spans has about 420,000; 16 MiB of empty
	// ResourceSpans would have 8 million.
	DefaultMaxExportElements = 1 << 20
	// DefaultMaxValueDepth bounds the nesting of attribute values in an
	// export: 32 levels (an array or kvlist value inside another is one
	// level). An export nested deeper is refused whole (413), before the
	// decoder, whose own recursion limit (100 messages) would refuse a
	// kvlist nested 33 levels as undecodable.
	DefaultMaxValueDepth = 32
	// DefaultQueueSpans and DefaultQueueBytes bound the spans decoded but
	// not yet consumed.
	DefaultQueueSpans = 100_000
	DefaultQueueBytes = 64 << 20
	// DefaultMaxConcurrentExports bounds the exports read and decoded at once.
	DefaultMaxConcurrentExports = 8
	// DefaultAdmissionWait bounds how long an OTLP/HTTP export waits, its
	// body unread, for room before it is refused: 2 s, under the 5 s
	// timeout of a Collector's exporter and the SDKs' 10 s.
	DefaultAdmissionWait = 2 * time.Second
	// DefaultMaxWaitingExports bounds the OTLP/HTTP exports waiting for
	// room at once: 1,024 (about 20 MiB of connection buffers and
	// goroutines; no body is read while waiting).
	DefaultMaxWaitingExports = 1024
	// DefaultRetryAfter is the Retry-After / RetryInfo delay of a refusal.
	DefaultRetryAfter = time.Second
	// DefaultReadTimeout bounds reading one HTTP request (headers and body)
	// on the server Listen starts.
	DefaultReadTimeout = 10 * time.Second
)

// Options configures a Receiver. The zero value of each limit means its
// default.
type Options struct {
	// SessionID and RunID are stamped on every record.
	SessionID string
	RunID     string
	// Sink receives every accepted span as a *artifact.Span, in arrival
	// order, from one goroutine the Receiver owns (never concurrently). A
	// slow sink fills the queue, and exporters are then told to retry (503 /
	// Unavailable). The first Write error is kept (WriteErr); later spans are
	// still handed on. Nil discards the spans (they still count as
	// delivered). The Receiver never closes the sink. A sink that is a
	// SpanFilter is asked before each export whether it wants spans at all.
	Sink artifact.Sink
	// MaxBodyBytes bounds an HTTP body after gzip decompression (413
	// beyond) and a gRPC message after decompression (the gRPC server's
	// MaxRecvMsgSize: ResourceExhausted beyond).
	MaxBodyBytes int64
	// MemoryLimitBytes bounds the bytes held at once by the exports being
	// read, decoded and converted, HTTP and gRPC together: a body is charged
	// as it is read (and inflated), then its decode cost (about 2 bytes per
	// wire byte, 140 per element and 1 KiB per span) before it is decoded.
	// A charge that does not fit now is refused retryably (429 /
	// ResourceExhausted with RetryInfo); an export whose cost is over the
	// whole limit is refused for good (413 / ResourceExhausted). A body
	// buffer let go of (outgrown while inflating, or too large to pool) stays
	// charged until a collection has run since. Raised to 3×MaxBodyBytes when
	// smaller (a body at the limit, the buffer it outgrew and the garbage
	// before it).
	MemoryLimitBytes int64
	// MaxExportElements and MaxValueDepth bound one export by its pre-scan,
	// before it is decoded (413 / ResourceExhausted beyond; see
	// DefaultMaxExportElements and DefaultMaxValueDepth). No span count is
	// limited: a batch of real spans within MaxBodyBytes is accepted.
	MaxExportElements int
	MaxValueDepth     int
	// QueueSpans and QueueBytes bound the queue between the handlers and
	// the sink; bytes are an estimate of the decoded records. An export that
	// does not fit whole is refused (503 / Unavailable, retryable) — spans
	// are never queued in part. An export always fits an empty queue. At 90%
	// of QueueSpans, or when a body's Content-Length shows it cannot fit,
	// exports are refused before their body is read or decoded, so an
	// overloaded receiver spends its CPU on the consumer.
	QueueSpans int
	QueueBytes int64
	// MaxConcurrentExports bounds the exports being read and decoded at once,
	// HTTP and gRPC together; beyond it an export is refused at once
	// (429 / ResourceExhausted with RetryInfo). Memory held by exports in
	// flight is bounded by MemoryLimitBytes, plus the queue.
	MaxConcurrentExports int
	// AdmissionWait bounds how long an OTLP/HTTP export that finds no room
	// (the queue near full, or MaxConcurrentExports in flight) waits for
	// it, its body unread so that TCP flow control throttles the sender,
	// before it is refused (503 / 429 with Retry-After); negative: refused
	// at once. gRPC exports never wait.
	AdmissionWait time.Duration
	// MaxWaitingExports bounds the OTLP/HTTP exports waiting at once;
	// beyond it an export without room is refused at once.
	MaxWaitingExports int
	// RetryAfter is the delay advertised with 429/503 (Retry-After, whole
	// seconds rounded up) and gRPC refusals (RetryInfo).
	RetryAfter time.Duration
	// ReadTimeout bounds reading one request on the HTTP server Listen
	// starts (http.Server ReadTimeout and ReadHeaderTimeout).
	ReadTimeout time.Duration
	// Now is the client clock stamped as ReceivedAtNS; default time.Now.
	Now func() time.Time
	// Logger receives serve errors; default slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MemoryLimitBytes <= 0 {
		o.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	o.MemoryLimitBytes = max(o.MemoryLimitBytes, 3*o.MaxBodyBytes)
	if o.MaxExportElements <= 0 {
		o.MaxExportElements = DefaultMaxExportElements
	}
	if o.MaxValueDepth <= 0 {
		o.MaxValueDepth = DefaultMaxValueDepth
	}
	if o.QueueSpans <= 0 {
		o.QueueSpans = DefaultQueueSpans
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.MaxConcurrentExports <= 0 {
		o.MaxConcurrentExports = DefaultMaxConcurrentExports
	}
	if o.AdmissionWait == 0 {
		o.AdmissionWait = DefaultAdmissionWait
	}
	if o.MaxWaitingExports <= 0 {
		o.MaxWaitingExports = DefaultMaxWaitingExports
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Receiver is an OTLP trace receiver: OTLP/HTTP (POST /v1/traces, protobuf
// and JSON, optionally gzip) through ServeHTTP, and the OTLP gRPC
// TraceService. Decoded spans become artifact.Span values delivered to
// Options.Sink by one goroutine through a bounded queue.
//
// Answers follow the OTLP specification, one outcome table for both
// transports: 200 with an
// ExportTraceServiceResponse in the request's encoding (partial_success
// when spans were rejected: empty name, missing or all-zero trace/span id,
// end before start, values nested over 64 levels); 400 for an undecodable
// body; 404 for another path; 405 for another method; 413 for a body over
// MaxBodyBytes (counted after decompression: a gzip bomb is refused after
// inflating at most MaxBodyBytes+1 bytes), or over MaxExportElements
// elements or MaxValueDepth levels by the pre-scan that runs before the
// decoder, or whose decode cost is over MemoryLimitBytes; 415 for an unsupported Content-Type or Content-Encoding; 429 with
// Retry-After when MaxConcurrentExports exports are already in flight; 503
// with Retry-After also when the memory limiter is held by other exports
// (checked as the body is read and before it is decoded); 503
// with Retry-After when the queue is full (near full: before the body is
// read) or the receiver is stopping.
// Error bodies are google.rpc.Status messages. gRPC answers use the
// matching codes (InvalidArgument, ResourceExhausted and Unavailable with
// RetryInfo). The HTTP server Listen starts also speaks unencrypted HTTP/2,
// so a gRPC exporter pointed at the HTTP port is served too.
type Receiver struct {
	opts   Options
	grpc   *grpc.Server
	slots  chan struct{}
	drains chan struct{} // large refused bodies being drained now (leaveUnread)
	mem    memLimiter
	q      queue
	waits  waitList  // HTTP exports waiting for room (enterWaiting)
	timer  timerFunc // the clock of those waits

	stopping     atomic.Bool
	abort        atomic.Bool
	consumerDone chan struct{}

	writeErrMu sync.Mutex
	writeErr   error // the sink's first Write error

	mu       sync.Mutex
	listened bool
	httpSrv  *http.Server
	httpAddr string
	grpcAddr string
	bindErrs []BindError
	serveWG  sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error

	c counters
}

type counters struct {
	httpRequests, grpcRequests, grpcOnHTTP                       atomic.Int64
	spansHTTPProtobuf, spansHTTPJSON, spansGRPC                  atomic.Int64
	spansRejected, spansDelivered, spansDropped                  atomic.Int64
	queueFull, busy, tooLarge, badRequests, unsupportedMedia     atomic.Int64
	tooComplex, memoryBusy                                       atomic.Int64
	methodNotAllowed, notFound, afterStop, timeouts, partialSucc atomic.Int64
	exportsAccepted, closedUnread, exportsWaited, spansSkipped   atomic.Int64
	exportsDirect                                                atomic.Int64
}

// New returns a Receiver and starts its consumer goroutine. Serve it with
// Listen, or mount ServeHTTP / RegisterGRPC on servers of your own. Stop it
// with Shutdown (graceful) or Close.
func New(opts Options) *Receiver {
	opts.setDefaults()
	r := &Receiver{
		opts:         opts,
		slots:        make(chan struct{}, opts.MaxConcurrentExports),
		drains:       make(chan struct{}, maxLargeDrains),
		consumerDone: make(chan struct{}),
		timer:        realTimer,
	}
	r.waits.max = opts.MaxWaitingExports
	r.mem.limit = opts.MemoryLimitBytes
	r.q.init(opts.QueueSpans, opts.QueueBytes)
	r.grpc = grpc.NewServer(r.grpcServerOptions()...)
	r.RegisterGRPC(r.grpc)
	go r.consume()
	return r
}

// BindError is a listener that could not be bound; Listen returns one per
// failed address (joined).
type BindError struct {
	// Protocol is "http" or "grpc".
	Protocol string
	Addr     string
	Err      error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("receiver: cannot listen for OTLP/%s on %s: %v", e.Protocol, e.Addr, e.Err)
}

func (e *BindError) Unwrap() error { return e.Err }

// Listen binds the OTLP/HTTP listener on httpAddr and the OTLP/gRPC listener
// on grpcAddr (host:port; port 0 picks one; "" skips that listener) and
// serves them until Shutdown or Close. Both binds complete before Listen
// returns, so call it before the first request is sent. A bind failure is
// returned as a *BindError (errors.Join of them when both fail) and the
// other listener still serves: record the failure as an unavailable
// capability and continue. ctx bounds only the binding. Listen may be
// called once.
func (r *Receiver) Listen(ctx context.Context, httpAddr, grpcAddr string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listened {
		return errors.New("receiver: Listen called twice")
	}
	if r.stopping.Load() {
		return errors.New("receiver: Listen after Shutdown")
	}
	r.listened = true
	var errs []error
	if httpAddr != "" {
		if err := r.listenHTTP(ctx, httpAddr); err != nil {
			errs = append(errs, err)
		}
	}
	if grpcAddr != "" {
		if err := r.listenGRPC(ctx, grpcAddr); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// bindFailed records a listener that could not be bound; r.mu is held.
func (r *Receiver) bindFailed(protocol, addr string, err error) *BindError {
	be := BindError{Protocol: protocol, Addr: addr, Err: err}
	r.bindErrs = append(r.bindErrs, be)
	return &be
}

// listenHTTP binds addr and serves ServeHTTP on it (HTTP/1.1 and
// unencrypted HTTP/2) until Shutdown or Close; r.mu is held. A bind failure
// is returned as a *BindError.
func (r *Receiver) listenHTTP(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return r.bindFailed("http", addr, err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	r.httpSrv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: r.opts.ReadTimeout,
		ReadTimeout:       r.opts.ReadTimeout,
		WriteTimeout:      3 * r.opts.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		Protocols:         &protos,
		ErrorLog:          slog.NewLogLogger(r.opts.Logger.Handler(), slog.LevelDebug),
	}
	r.httpAddr = ln.Addr().String()
	srv := r.httpSrv
	r.serveWG.Add(1)
	go func() {
		defer r.serveWG.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.opts.Logger.Warn("OTLP/HTTP receiver stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// listenGRPC binds addr and serves the gRPC TraceService on it until
// Shutdown or Close; r.mu is held. A bind failure is returned as a
// *BindError.
func (r *Receiver) listenGRPC(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return r.bindFailed("grpc", addr, err)
	}
	r.grpcAddr = ln.Addr().String()
	r.serveWG.Add(1)
	go func() {
		defer r.serveWG.Done()
		if err := r.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			r.opts.Logger.Warn("OTLP/gRPC receiver stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// HTTPAddr returns the bound OTLP/HTTP address ("127.0.0.1:4318"), or ""
// when none is bound. Exporters post to "http://" + HTTPAddr() + TracesPath.
func (r *Receiver) HTTPAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.httpAddr
}

// GRPCAddr returns the bound OTLP/gRPC address, or "" when none is bound.
func (r *Receiver) GRPCAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grpcAddr
}

// Shutdown stops gracefully: new exports are refused with 503 /
// Unavailable, the listeners close, exports in flight finish, and every
// queued span is delivered to the sink before Shutdown returns nil. When ctx
// ends first, the spans still queued are dropped (counted in
// Stats.SpansDropped) and ctx's error is returned. Later calls return the
// first call's result.
func (r *Receiver) Shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() { r.shutdownErr = r.shutdown(ctx) })
	return r.shutdownErr
}

func (r *Receiver) shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	r.waits.close()
	r.mu.Lock()
	r.listened = true // no Listen after this
	srv := r.httpSrv
	r.mu.Unlock()
	var errs []error
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
			errs = append(errs, err)
		}
	}
	stopped := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		r.grpc.Stop()
		<-stopped
		errs = append(errs, ctx.Err())
	}
	r.serveWG.Wait()
	r.q.close()
	select {
	case <-r.consumerDone:
	case <-ctx.Done():
		r.abort.Store(true)
		<-r.consumerDone
		errs = append(errs, ctx.Err())
	}
	if len(errs) > 0 {
		return fmt.Errorf("receiver: shutdown: %w", errs[0])
	}
	return nil
}

// Close stops at once: listeners and connections close, exports in flight
// are cut off, and queued spans are dropped (counted in
// Stats.SpansDropped). It waits for a sink Write in progress to return.
func (r *Receiver) Close() error {
	r.abort.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = r.Shutdown(ctx)
	return nil
}
