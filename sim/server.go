package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Server is a running simulated vLLM server. Create it with Start; it is safe for concurrent
// use.
type Server struct {
	cfg        Config
	ln         net.Listener
	srv        *http.Server
	handler    http.Handler
	engines    []*engine
	rr         atomic.Uint64
	metrics    atomic.Pointer[metricSet]
	startNs    atomic.Int64 // current process_start_time, unix ns
	profBaseNs int64        // the profiler's baseTimeNanoseconds: Start's time, unix ns
	downTill   atomic.Int64 // restart downtime end, unix ns
	tp         *sdktrace.TracerProvider
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	gt         *gtWriter

	idMu    sync.Mutex
	idRNG   *rand.Rand // ids of requests without X-Request-Id
	echoRNG *rand.Rand // X-Request-Id echoed when none was sent
	faultMu sync.Mutex
	faultRN *rand.Rand // /metrics faults
	prof    profiler   // /start_profile, /stop_profile

	done         chan struct{}
	closing      atomic.Bool
	wg           sync.WaitGroup
	restartTimer *time.Timer
	closeOnce    sync.Once
	closeErr     error
}

func nowNs() int64 { return time.Now().UnixNano() }

// Start validates cfg, listens on addr ("127.0.0.1:0" picks a free port) and serves until
// ctx is cancelled or Close is called. Errors: an invalid config, a listen failure, an
// unwritable ground-truth file, or a bad OTLP endpoint.
func Start(ctx context.Context, cfg Config, addr string) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		done:    make(chan struct{}),
		idRNG:   rand.New(rand.NewPCG(cfg.Seed, 0x69647365)),
		echoRNG: rand.New(rand.NewPCG(cfg.Seed, 0x6563686f)),
		faultRN: rand.New(rand.NewPCG(cfg.Seed, 0x6d657472)),
		prop:    propagation.TraceContext{},
	}
	if cfg.GroundTruthPath != "" {
		gt, err := openGroundTruth(cfg.GroundTruthPath)
		if err != nil {
			return nil, err
		}
		s.gt = gt
	}
	if cfg.OTLPTracesEndpoint != "" {
		tp, err := newTracerProvider(ctx, &s.cfg)
		if err != nil {
			s.closeGT()
			return nil, err
		}
		s.tp = tp
		s.tracer = tp.Tracer(tracerScope)
	}
	start := time.Now()
	s.startNs.Store(start.UnixNano())
	s.profBaseNs = start.UnixNano()
	for i := 0; i < cfg.Engines; i++ {
		s.engines = append(s.engines, newEngine(i, &s.cfg, nil, nowNs))
	}
	ms := newMetricSet(&s.cfg, s.engines, start)
	for i, e := range s.engines {
		e.m = ms.engines[i]
		if s.tracer != nil {
			e.onFinish = func(q *seq) { emitSpan(s.tracer, q) }
		}
	}
	s.metrics.Store(ms)
	s.handler = s.routes()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.shutdownTracing()
		s.closeGT()
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
	}
	for _, e := range s.engines {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); e.run(s.done) }()
	}
	if cfg.Faults.RestartAt > 0 {
		s.restartTimer = time.AfterFunc(cfg.Faults.RestartAt, s.restart)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener failed; Close reports nothing more useful
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL returns the base URL, "http://HOST:PORT" ("http://127.0.0.1:PORT" for a loopback or
// unspecified listen address).
func (s *Server) URL() string {
	a, ok := s.ln.Addr().(*net.TCPAddr)
	if !ok {
		return "http://" + s.ln.Addr().String()
	}
	ip := a.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}

// Handler returns the server's HTTP handler (all routes), e.g. for httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops serving: in-flight requests are dropped (their connections closed), engines
// stop, pending spans are exported (waiting up to 10 s for the collector) and the
// ground-truth file is flushed and closed. It is idempotent and returns the first error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		if s.restartTimer != nil {
			s.restartTimer.Stop()
		}
		for _, e := range s.engines {
			e.dropAll(finShutdown, nil, true)
		}
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		cancel()
		s.wg.Wait()
		errs := []error{s.shutdownTracing(), s.closeGT()}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// ErrSpanExport marks a Close error that only concerns spans the exporter could not deliver
// (no receiver listening, for instance): the server itself stopped cleanly.
var ErrSpanExport = errors.New("span export")

// SpanExportOnly reports whether err, an error of Close, concerns only spans the exporter
// could not deliver: an ErrSpanExport error, or a join (at any depth) of nothing else. The
// server itself then stopped cleanly, and a caller may report err as a warning: spans are
// best effort, as vLLM's are.
func SpanExportOnly(err error) bool {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) == 0 || j.Unwrap()[0] == ErrSpanExport {
		// A plain error, or the span error itself ("span export: <cause>").
		return errors.Is(err, ErrSpanExport)
	}
	for _, e := range j.Unwrap() {
		if !SpanExportOnly(e) {
			return false
		}
	}
	return true
}

func (s *Server) shutdownTracing() error {
	if s.tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSpanExport, err)
	}
	return nil
}

func (s *Server) closeGT() error {
	if s.gt == nil {
		return nil
	}
	return s.gt.close()
}

// restart is the engine-restart fault: every engine drops its requests and caches, and
// /metrics starts again from zero with a new process_start_time_seconds.
func (s *Server) restart() {
	if s.closing.Load() {
		return
	}
	start := time.Now()
	ms := newMetricSet(&s.cfg, s.engines, start)
	s.downTill.Store(start.Add(s.cfg.Faults.RestartDowntime).UnixNano())
	s.startNs.Store(start.UnixNano())
	for i, e := range s.engines {
		e.dropAll(finRestart, ms.engines[i], false)
	}
	s.metrics.Store(ms)
}

func (s *Server) down() bool { return nowNs() < s.downTill.Load() }

// routes builds the router: vLLM's paths, FastAPI-style 404/405 bodies elsewhere.
func (s *Server) routes() http.Handler {
	metrics := s.metricsHandler()
	type route struct {
		method string
		h      http.HandlerFunc
	}
	table := map[string]route{
		"/v1/chat/completions": {http.MethodPost, s.handleChat},
		"/v1/models":           {http.MethodGet, s.handleModels},
		"/health":              {http.MethodGet, s.handleHealth},
		"/metrics":             {http.MethodGet, func(w http.ResponseWriter, r *http.Request) { s.handleMetrics(w, r, metrics) }},
		"/reset_prefix_cache":  {http.MethodPost, s.handleResetPrefixCache},
		"/start_profile":       {http.MethodPost, s.handleStartProfile},
		"/stop_profile":        {http.MethodPost, s.handleStopProfile},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.EnableRequestIDHeaders {
			id := r.Header.Get("X-Request-Id")
			if id == "" {
				s.idMu.Lock()
				id = fmt.Sprintf("%016x%016x", s.echoRNG.Uint64(), s.echoRNG.Uint64())
				s.idMu.Unlock()
			}
			w.Header().Set("X-Request-Id", id)
		}
		rt, ok := table[r.URL.Path]
		switch {
		case !ok:
			writeJSON(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
		case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
			w.Header().Set("Allow", rt.method)
			writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"detail":"Method Not Allowed"}`))
		default:
			rt.h(w, r)
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func statusClass(code int) string { return string(rune('0'+code/100)) + "xx" }

func (s *Server) countHTTP(path, method string, status int) {
	s.metrics.Load().httpReqs.WithLabelValues(path, method, statusClass(status)).Inc()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.down() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	created := s.startNs.Load() / 1e9
	m, _ := jsonString(s.cfg.Model)
	body := fmt.Sprintf(`{"object":"list","data":[{"id":%s,"object":"model","created":%d,"owned_by":"vllm","root":%s,"parent":null,"max_model_len":%d,"permission":[{"id":"modelperm-%016x","object":"model_permission","created":%d,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}`,
		m, created, m, s.cfg.MaxModelLen, s.cfg.Seed, created)
	writeJSON(w, http.StatusOK, []byte(body))
	s.countHTTP("/v1/models", r.Method, http.StatusOK)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, h http.Handler) {
	f := &s.cfg.Faults
	if f.Metrics503 > 0 || f.MetricsHTML > 0 {
		s.faultMu.Lock()
		u503, uHTML := s.faultRN.Float64(), s.faultRN.Float64()
		s.faultMu.Unlock()
		switch {
		case u503 < f.Metrics503:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "Service Unavailable\n")
			return
		case uHTML < f.MetricsHTML:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>Login</title></head><body><h1>Please sign in</h1></body></html>\n")
			return
		}
	}
	h.ServeHTTP(w, r)
}

func (s *Server) handleResetPrefixCache(w http.ResponseWriter, r *http.Request) {
	ok := true
	for _, e := range s.engines {
		if !e.resetPrefixCache() {
			ok = false
		}
	}
	if s.cfg.ResetAnswer == "empty" {
		w.WriteHeader(http.StatusOK)
	} else if ok {
		writeJSON(w, http.StatusOK, []byte(`{"success":true}`))
	} else {
		writeJSON(w, http.StatusOK, []byte(`{"success":false}`))
	}
	s.countHTTP("/reset_prefix_cache", r.Method, http.StatusOK)
}

// newID returns a generated request id: 16 hex characters, the form of the ids vLLM
// generates itself since late 2025 (random_uuid; 32 hex characters before), drawn from the
// seeded generator in arrival order.
func (s *Server) newID() string {
	s.idMu.Lock()
	v := s.idRNG.Uint64()
	s.idMu.Unlock()
	return fmt.Sprintf("%016x", v)
}

// sleep waits d, returning false when the request or the server ended first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// resetConn closes the client connection with a TCP RST before any byte of the response.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
