package receiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed gRPC exports (OTEL_EXPORTER_OTLP_COMPRESSION=gzip)
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Endpoint facts (OTLP/HTTP specification; stormlog.md §4.4).
const (
	// TracesPath is the OTLP/HTTP traces path.
	TracesPath = "/v1/traces"
	// DefaultHTTPListen and DefaultGRPCListen are the default addresses of
	// --vllm-spans-listen and --vllm-spans-grpc-listen (the OTLP ports).
	DefaultHTTPListen = "127.0.0.1:4318"
	DefaultGRPCListen = "127.0.0.1:4317"
)

// Defaults of Options (stormlog.md §4.4 receiver limits).
const (
	// DefaultMaxBodyBytes bounds one export after decompression: 32 MiB.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultMaxSpansPerExport bounds the spans of one export.
	DefaultMaxSpansPerExport = 10_000
	// DefaultQueueSpans and DefaultQueueBytes bound the spans decoded but
	// not yet consumed.
	DefaultQueueSpans = 100_000
	DefaultQueueBytes = 64 << 20
	// DefaultMaxConcurrentExports bounds the exports read and decoded at once.
	DefaultMaxConcurrentExports = 8
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
	// Sink receives every accepted span as a *artifact.VLLMSpan, in arrival
	// order, from one goroutine the Receiver owns (never concurrently). A
	// slow sink fills the queue, and exporters are then told to retry (503 /
	// Unavailable). The first Write error is kept (WriteErr); later spans are
	// still handed on. Nil discards the spans (they still count as
	// delivered). The Receiver never closes the sink.
	Sink artifact.Sink
	// MaxBodyBytes bounds an HTTP body after gzip decompression and a gRPC
	// message after decompression (413 / ResourceExhausted beyond).
	MaxBodyBytes int64
	// MaxSpansPerExport bounds the spans of one export (413 /
	// InvalidArgument beyond).
	MaxSpansPerExport int
	// QueueSpans and QueueBytes bound the queue between the handlers and
	// Consume; bytes are an estimate of the decoded records. An export that
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
	// flight is bounded by about MaxConcurrentExports × MaxBodyBytes × the
	// decode expansion, plus the queue.
	MaxConcurrentExports int
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
	if o.MaxSpansPerExport <= 0 {
		o.MaxSpansPerExport = DefaultMaxSpansPerExport
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
// TraceService. Decoded spans become artifact.VLLMSpan values delivered to
// Options.Consume by one goroutine through a bounded queue.
//
// Answers follow the OTLP specification: 200 with an
// ExportTraceServiceResponse in the request's encoding (partial_success
// when spans were rejected: empty name, missing or all-zero trace/span id,
// end before start, values nested over 64 levels); 400 for an undecodable
// body; 404 for another path; 405 for another method; 413 for a body over
// MaxBodyBytes (counted after decompression: a gzip bomb is refused after
// inflating at most MaxBodyBytes+1 bytes) or over MaxSpansPerExport spans;
// 415 for an unsupported Content-Type or Content-Encoding; 429 with
// Retry-After when MaxConcurrentExports exports are already in flight; 503
// with Retry-After when the queue is full (near full: before the body is
// read) or the receiver is stopping.
// Error bodies are google.rpc.Status messages. gRPC answers use the
// matching codes (InvalidArgument, ResourceExhausted and Unavailable with
// RetryInfo). The HTTP server Listen starts also speaks unencrypted HTTP/2,
// so a gRPC exporter pointed at the HTTP port is served too.
type Receiver struct {
	opts  Options
	grpc  *grpc.Server
	slots chan struct{}
	q     queue

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
	methodNotAllowed, notFound, afterStop, timeouts, partialSucc atomic.Int64
	exportsAccepted                                              atomic.Int64
}

// New returns a Receiver and starts its consumer goroutine. Serve it with
// Listen, or mount ServeHTTP / RegisterGRPC on servers of your own. Stop it
// with Shutdown (graceful) or Close.
func New(opts Options) *Receiver {
	opts.setDefaults()
	r := &Receiver{
		opts:         opts,
		slots:        make(chan struct{}, opts.MaxConcurrentExports),
		consumerDone: make(chan struct{}),
	}
	r.q.init(opts.QueueSpans, opts.QueueBytes)
	r.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(int(min(opts.MaxBodyBytes, 1<<31-1))),
		grpc.MaxConcurrentStreams(uint32(2*opts.MaxConcurrentExports)),
	)
	r.RegisterGRPC(r.grpc)
	go r.consume()
	return r
}

// RegisterGRPC registers the receiver's OTLP TraceService on s (New already
// registers it on the gRPC server Listen uses).
func (r *Receiver) RegisterGRPC(s *grpc.Server) {
	ptraceotlp.RegisterGRPCServer(s, &grpcService{r: r})
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
	var lc net.ListenConfig
	var errs []error
	if httpAddr != "" {
		ln, err := lc.Listen(ctx, "tcp", httpAddr)
		if err != nil {
			be := BindError{Protocol: "http", Addr: httpAddr, Err: err}
			r.bindErrs = append(r.bindErrs, be)
			errs = append(errs, &be)
		} else {
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
		}
	}
	if grpcAddr != "" {
		ln, err := lc.Listen(ctx, "tcp", grpcAddr)
		if err != nil {
			be := BindError{Protocol: "grpc", Addr: grpcAddr, Err: err}
			r.bindErrs = append(r.bindErrs, be)
			errs = append(errs, &be)
		} else {
			r.grpcAddr = ln.Addr().String()
			r.serveWG.Add(1)
			go func() {
				defer r.serveWG.Done()
				if err := r.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
					r.opts.Logger.Warn("OTLP/gRPC receiver stopped", "addr", ln.Addr().String(), "err", err)
				}
			}()
		}
	}
	return errors.Join(errs...)
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
// queued span is delivered to Consume before Shutdown returns nil. When ctx
// ends first, the spans still queued are dropped (counted in
// Stats.SpansDropped) and ctx's error is returned. Later calls return the
// first call's result.
func (r *Receiver) Shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() { r.shutdownErr = r.shutdown(ctx) })
	return r.shutdownErr
}

func (r *Receiver) shutdown(ctx context.Context) error {
	r.stopping.Store(true)
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
// Stats.SpansDropped). It waits for a Consume call in progress to return.
func (r *Receiver) Close() error {
	r.abort.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = r.Shutdown(ctx)
	return nil
}

// ServeHTTP handles POST /v1/traces (see Receiver for the answers). An
// HTTP/2 request with a gRPC content type is handed to the receiver's gRPC
// service.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
		r.c.grpcOnHTTP.Add(1)
		r.grpc.ServeHTTP(w, req)
		return
	}
	if req.URL.Path != TracesPath {
		r.c.notFound.Add(1)
		http.Error(w, "404 not found: OTLP traces are posted to "+TracesPath, http.StatusNotFound)
		return
	}
	if req.Method != http.MethodPost {
		r.c.methodNotAllowed.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "405 method not allowed: use POST", http.StatusMethodNotAllowed)
		return
	}
	r.c.httpRequests.Add(1)
	format, ok := mediaFormat(req.Header.Get("Content-Type"))
	if !ok {
		r.c.unsupportedMedia.Add(1)
		writeStatus(w, format, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("unsupported Content-Type %q: use application/x-protobuf or application/json", truncate(req.Header.Get("Content-Type"), 80)), 0)
		return
	}
	gz, ok := contentEncoding(req.Header.Get("Content-Encoding"))
	if !ok {
		r.c.unsupportedMedia.Add(1)
		writeStatus(w, format, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("unsupported Content-Encoding %q: use gzip or none", truncate(req.Header.Get("Content-Encoding"), 80)), 0)
		return
	}
	if r.stopping.Load() {
		r.c.afterStop.Add(1)
		writeStatus(w, format, http.StatusServiceUnavailable, codes.Unavailable, "the receiver is stopping", r.opts.RetryAfter)
		return
	}
	max := r.opts.MaxBodyBytes
	wireMax := wireLimit(max, gz)
	if req.ContentLength > wireMax {
		r.c.tooLarge.Add(1)
		writeStatus(w, format, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
			fmt.Sprintf("body of %d bytes is over the %d-byte limit", req.ContentLength, max), 0)
		return
	}
	var expect int64 // the queue charge the body implies, when its length is known
	if !gz && req.ContentLength > 0 {
		expect = 3 * req.ContentLength
	}
	if err := r.q.admit(expect); err != nil {
		r.c.queueFull.Add(1)
		writeStatus(w, format, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), r.opts.RetryAfter)
		return
	}
	select {
	case r.slots <- struct{}{}:
	default:
		r.c.busy.Add(1)
		writeStatus(w, format, http.StatusTooManyRequests, codes.ResourceExhausted,
			fmt.Sprintf("%d exports are already being decoded; retry later", cap(r.slots)), r.opts.RetryAfter)
		return
	}
	defer func() { <-r.slots }()

	buf := getBuffer()
	defer putBuffer(buf)
	if !gz && req.ContentLength > 0 {
		buf.Grow(int(req.ContentLength))
	}
	if err := readBody(w, req.Body, gz, max, wireMax, buf); err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			r.c.tooLarge.Add(1)
			writeStatus(w, format, http.StatusRequestEntityTooLarge, codes.InvalidArgument,
				fmt.Sprintf("body is over the %d-byte limit (after decompression)", max), 0)
		case errors.Is(err, errTimeout):
			r.c.timeouts.Add(1)
			writeStatus(w, format, http.StatusRequestTimeout, codes.DeadlineExceeded, "the body did not arrive in time", 0)
		default:
			r.c.badRequests.Add(1)
			writeStatus(w, format, http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		}
		return
	}
	body := buf.Bytes()
	ereq := ptraceotlp.NewExportRequest()
	var derr error
	if format == formatJSON {
		derr = decodeJSONExport(ereq, body)
	} else {
		derr = ereq.UnmarshalProto(body)
	}
	if derr != nil {
		r.c.badRequests.Add(1)
		writeStatus(w, format, http.StatusBadRequest, codes.InvalidArgument, "undecodable OTLP "+format.String()+" export: "+truncate(derr.Error(), 200), 0)
		return
	}
	conv, err := r.accept(ereq.Traces(), artifact.SpanSourceHTTP, peerHost(req.RemoteAddr), len(body))
	if err != nil {
		r.refuseHTTP(w, format, err)
		return
	}
	if format == formatJSON {
		r.c.spansHTTPJSON.Add(int64(len(conv.records)))
	} else {
		r.c.spansHTTPProtobuf.Add(int64(len(conv.records)))
	}
	resp := exportResponse(conv)
	var out []byte
	if format == formatJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil { // cannot happen for a response message
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", format.contentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func (r *Receiver) refuseHTTP(w http.ResponseWriter, format bodyFormat, err error) {
	switch {
	case errors.Is(err, errTooManySpans):
		writeStatus(w, format, http.StatusRequestEntityTooLarge, codes.InvalidArgument, err.Error(), 0)
	case errors.Is(err, errQueueFull):
		writeStatus(w, format, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), r.opts.RetryAfter)
	default: // errStopped
		writeStatus(w, format, http.StatusServiceUnavailable, codes.Unavailable, err.Error(), r.opts.RetryAfter)
	}
}

// Refusal causes of accept.
var (
	errTooManySpans = errors.New("too many spans in one export")
	errQueueFull    = errors.New("span queue full")
	errStopped      = errors.New("the receiver is stopping")
)

// accept converts and queues the spans of one export. wireBytes sizes the
// queue charge.
func (r *Receiver) accept(td ptrace.Traces, source, peer string, wireBytes int) (conversion, error) {
	if n := td.SpanCount(); n > r.opts.MaxSpansPerExport {
		r.c.tooLarge.Add(1)
		return conversion{}, fmt.Errorf("%w: %d spans, limit %d", errTooManySpans, n, r.opts.MaxSpansPerExport)
	}
	now := r.opts.Now().UnixNano()
	conv := convertTraces(td, convertOptions{
		sessionID: r.opts.SessionID, runID: r.opts.RunID, source: source,
		receivedAtNS: &now, peer: peer, strict: true,
	})
	if len(conv.records) > 0 {
		size := 3*int64(wireBytes) + 256*int64(len(conv.records))
		if err := r.q.push(conv.records, size); err != nil {
			if errors.Is(err, errQueueFull) {
				r.c.queueFull.Add(1)
			} else {
				r.c.afterStop.Add(1)
			}
			return conversion{}, err
		}
	}
	r.c.exportsAccepted.Add(1)
	if conv.rejected > 0 {
		r.c.spansRejected.Add(int64(conv.rejected))
		r.c.partialSucc.Add(1)
	}
	return conv, nil
}

// exportResponse is the ExportTraceServiceResponse of an accepted export.
func exportResponse(conv conversion) ptraceotlp.ExportResponse {
	resp := ptraceotlp.NewExportResponse()
	if conv.rejected > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(conv.rejected))
		msg := conv.reason
		if conv.rejected > 1 {
			msg = fmt.Sprintf("%d spans rejected; first: %s", conv.rejected, conv.reason)
		}
		ps.SetErrorMessage(msg)
	}
	return resp
}

// grpcService is the OTLP gRPC TraceService of a Receiver.
type grpcService struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export handles one gRPC export.
func (g *grpcService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r := g.r
	r.c.grpcRequests.Add(1)
	if r.stopping.Load() {
		r.c.afterStop.Add(1)
		return ptraceotlp.ExportResponse{}, retryStatus(codes.Unavailable, "the receiver is stopping", r.opts.RetryAfter)
	}
	if err := r.q.admit(0); err != nil {
		r.c.queueFull.Add(1)
		return ptraceotlp.ExportResponse{}, retryStatus(codes.Unavailable, err.Error(), r.opts.RetryAfter)
	}
	select {
	case r.slots <- struct{}{}:
	default:
		r.c.busy.Add(1)
		return ptraceotlp.ExportResponse{}, retryStatus(codes.ResourceExhausted,
			fmt.Sprintf("%d exports are already being decoded; retry later", cap(r.slots)), r.opts.RetryAfter)
	}
	defer func() { <-r.slots }()
	host := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		host = peerHost(p.Addr.String())
	}
	td := req.Traces()
	var sizer ptrace.ProtoMarshaler
	conv, err := r.accept(td, artifact.SpanSourceGRPC, host, sizer.TracesSize(td))
	switch {
	case errors.Is(err, errTooManySpans):
		return ptraceotlp.ExportResponse{}, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return ptraceotlp.ExportResponse{}, retryStatus(codes.Unavailable, err.Error(), r.opts.RetryAfter)
	}
	r.c.spansGRPC.Add(int64(len(conv.records)))
	return exportResponse(conv), nil
}

// retryStatus is a gRPC status with a RetryInfo detail (OTLP/gRPC
// throttling: the client waits RetryDelay before retrying).
func retryStatus(code codes.Code, msg string, delay time.Duration) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = d
	}
	return st.Err()
}

// bodyFormat is the encoding of an OTLP/HTTP body.
type bodyFormat int

const (
	formatProtobuf bodyFormat = iota
	formatJSON
)

func (f bodyFormat) String() string {
	if f == formatJSON {
		return "JSON"
	}
	return "protobuf"
}

func (f bodyFormat) contentType() string {
	if f == formatJSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// mediaFormat reads a Content-Type: application/x-protobuf (or
// application/protobuf) and application/json, with any parameters. For an
// unsupported type it returns the format to answer in (JSON when the type
// mentions json) and false.
func mediaFormat(ct string) (bodyFormat, bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		mt = ""
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return formatProtobuf, true
	case "application/json":
		return formatJSON, true
	}
	if strings.Contains(strings.ToLower(ct), "json") {
		return formatJSON, false
	}
	return formatProtobuf, false
}

// contentEncoding accepts no encoding, identity and gzip.
func contentEncoding(ce string) (gz bool, ok bool) {
	switch strings.ToLower(strings.TrimSpace(ce)) {
	case "", "identity":
		return false, true
	case "gzip", "x-gzip":
		return true, true
	}
	return false, false
}

// wireLimit is the most body bytes read off the wire: the limit itself, or
// for gzip a little more (deflate's worst case expands stored data by
// 5 bytes per 64 KiB block, plus headers).
func wireLimit(max int64, gz bool) int64 {
	if !gz {
		return max
	}
	return max + max/1024 + 1<<16
}

var (
	errTooLarge = errors.New("body over the limit")
	errTimeout  = errors.New("body read timed out")
)

var gzipReaders sync.Pool

// readBody reads an HTTP body into buf: at most wireMax bytes off the wire,
// at most max bytes after decompression (errTooLarge beyond, without
// reading further: a gzip bomb is never inflated past max+1 bytes).
func readBody(w http.ResponseWriter, rc io.ReadCloser, gz bool, max, wireMax int64, buf *bytes.Buffer) error {
	body := http.MaxBytesReader(w, rc, wireMax)
	var src io.Reader = body
	if gz {
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(body)
		} else {
			err = zr.Reset(body)
		}
		if err != nil {
			if isTimeout(err) {
				return errTimeout
			}
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return errTooLarge
			}
			return fmt.Errorf("invalid gzip body: %v", err)
		}
		defer gzipReaders.Put(zr)
		src = zr
	}
	n, err := buf.ReadFrom(io.LimitReader(src, max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return errTooLarge
		case isTimeout(err):
			return errTimeout
		case gz:
			return fmt.Errorf("invalid gzip body: %v", err)
		default:
			return fmt.Errorf("reading the body: %v", err)
		}
	}
	if n > max {
		return errTooLarge
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// decodeJSONExport decodes an OTLP JSON ExportTraceServiceRequest. The text
// must be one valid JSON object (pdata's decoder alone tolerates trailing
// garbage). Trace and span ids must be hex: base64 ids have the wrong length
// and are refused by pdata; 64-bit integers may be numbers or strings and
// are read exactly.
func decodeJSONExport(req ptraceotlp.ExportRequest, body []byte) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	if !json.Valid(trimmed) {
		return errors.New("invalid JSON")
	}
	return req.UnmarshalJSON(trimmed)
}

// writeStatus answers an error with a google.rpc.Status body in the
// request's format, and Retry-After when retry > 0.
func writeStatus(w http.ResponseWriter, format bodyFormat, httpCode int, code codes.Code, msg string, retry time.Duration) {
	st := &spb.Status{Code: int32(code), Message: msg}
	var body []byte
	var err error
	if format == formatJSON {
		body, err = protojson.Marshal(st)
	} else {
		body, err = proto.Marshal(st)
	}
	if err != nil {
		body = nil
	}
	h := w.Header()
	if retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Type", format.contentType())
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(httpCode)
	_, _ = w.Write(body)
}

// peerHost returns the host of a "host:port" address.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

var buffers sync.Pool

func getBuffer() *bytes.Buffer {
	if b, ok := buffers.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= 4<<20 {
		buffers.Put(b)
	}
}

// consume is the single consumer goroutine.
func (r *Receiver) consume() {
	defer close(r.consumerDone)
	for {
		batch, size, ok := r.q.pop()
		if !ok {
			return
		}
		delivered := 0
		for i := range batch {
			if r.abort.Load() {
				break
			}
			if r.opts.Sink != nil {
				if err := r.opts.Sink.Write(&batch[i]); err != nil {
					r.writeErrMu.Lock()
					if r.writeErr == nil {
						r.writeErr = err
					}
					r.writeErrMu.Unlock()
				}
			}
			delivered++
		}
		r.c.spansDelivered.Add(int64(delivered))
		r.c.spansDropped.Add(int64(len(batch) - delivered))
		r.q.done(len(batch), size)
	}
}

// queue is the bounded FIFO of decoded exports between the handlers and
// the consumer. Counts include the batch being consumed.
type queue struct {
	mu       sync.Mutex
	cond     sync.Cond
	batches  [][]artifact.VLLMSpan
	sizes    []int64
	spans    int
	bytes    int64
	maxSpans int
	maxBytes int64
	closed   bool
}

func (q *queue) init(maxSpans int, maxBytes int64) {
	q.cond.L = &q.mu
	q.maxSpans = maxSpans
	q.maxBytes = maxBytes
}

func (q *queue) push(batch []artifact.VLLMSpan, size int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errStopped
	}
	if q.spans > 0 && (q.spans+len(batch) > q.maxSpans || q.bytes+size > q.maxBytes) {
		return fmt.Errorf("%w: %d spans (%d bytes) queued, limits %d spans and %d bytes; retry later",
			errQueueFull, q.spans, q.bytes, q.maxSpans, q.maxBytes)
	}
	q.batches = append(q.batches, batch)
	q.sizes = append(q.sizes, size)
	q.spans += len(batch)
	q.bytes += size
	q.cond.Signal()
	return nil
}

// admit refuses an export early — before its body is read and decoded —
// when the queue is at 90% of its span limit or the export's expected
// charge (0 when unknown) would pass the byte limit. push decides exactly.
func (q *queue) admit(expect int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.spans > 0 && (10*q.spans >= 9*q.maxSpans || q.bytes+expect > q.maxBytes) {
		return fmt.Errorf("%w: %d spans (%d bytes) queued, limits %d spans and %d bytes; retry later",
			errQueueFull, q.spans, q.bytes, q.maxSpans, q.maxBytes)
	}
	return nil
}

// pop blocks for the next batch; false once the queue is closed and empty.
func (q *queue) pop() ([]artifact.VLLMSpan, int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.batches) == 0 {
		if q.closed {
			return nil, 0, false
		}
		q.cond.Wait()
	}
	b, s := q.batches[0], q.sizes[0]
	q.batches[0] = nil
	q.batches = q.batches[1:]
	q.sizes = q.sizes[1:]
	return b, s, true
}

// done releases a consumed batch's charge.
func (q *queue) done(spans int, size int64) {
	q.mu.Lock()
	q.spans -= spans
	q.bytes -= size
	q.mu.Unlock()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// queued returns the spans and estimated bytes queued or being consumed.
func (q *queue) queued() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.spans, q.bytes
}

// WriteErr returns the sink's first Write error, or nil.
func (r *Receiver) WriteErr() error {
	r.writeErrMu.Lock()
	defer r.writeErrMu.Unlock()
	return r.writeErr
}
