package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

// receiverShutdown bounds the delivery of a run's own receiver's queued spans at the end.
const receiverShutdown = 5 * time.Second

// telemetry is a run's server telemetry: the /metrics sampler and the span intake (its own
// receiver, or a feed's routing).
type telemetry struct {
	spec    *Spec
	scraper *prom.Scraper
	sampler *prom.PhaseSampler

	recv    *receiver.Receiver // the run's own receiver
	bindErr error

	intake      *spanIntake
	feedRecords artifact.Sink // the feed's sink of the run's records
	detach      func()

	traces *traceWindows // nil without Spec.Trace
}

// newTelemetry prepares the scraper and the span intake; nothing is bound yet.
func newTelemetry(spec *Spec, sessionID, clockDomain string) (*telemetry, error) {
	t := &telemetry{spec: spec}
	if spec.Receiver != nil && spec.Spans != nil {
		return nil, errors.New("run: a run takes spans from its own receiver or from a feed, not both")
	}
	if spec.Metrics != nil {
		c := *spec.Metrics
		c.SessionID, c.RunID, c.ClockDomain = sessionID, spec.Workload.RunID, clockDomain
		s, err := prom.NewScraper(c)
		if err != nil {
			return nil, fmt.Errorf("vLLM metrics: %w", err)
		}
		t.scraper = s
	}
	tw, err := newTraceWindows(spec, sessionID, t.scraper)
	if err != nil {
		return nil, err
	}
	t.traces = tw
	if spec.Spans != nil {
		t.intake = &spanIntake{sessionID: sessionID, runID: spec.Workload.RunID}
		t.feedRecords, t.detach = spec.Spans.Attach(spec.Workload.RunID, t.intake)
	}
	return t, nil
}

// abort releases what newTelemetry took (the feed's routing) for a run that never started.
func (t *telemetry) abort() {
	if t.detach != nil {
		t.detach()
	}
}

// sessionConfig fills the session config's vllm_metrics and vllm_spans blocks.
func (t *telemetry) sessionConfig(sc *artifact.SessionConfig) {
	if t.scraper != nil {
		sc.ServerMetrics = &artifact.MetricsConfig{
			URL: t.scraper.SourceURL(), IntervalSeconds: t.scraper.Interval().Seconds(),
			TimeoutSeconds: t.scraper.Timeout().Seconds(), Authorization: t.scraper.Authorization(),
		}
	}
	var httpListen, grpcListen string
	switch {
	case t.spec.Receiver != nil:
		httpListen, grpcListen = t.spec.Receiver.HTTPListen, t.spec.Receiver.GRPCListen
	case t.spec.Spans != nil:
		httpListen, grpcListen = t.spec.Spans.Addrs()
	default:
		return
	}
	sc.ServerSpans, _ = json.Marshal(map[string]any{
		"http_listen": httpListen, "grpc_listen": grpcListen, "drain_seconds": t.spec.SpansDrain.Seconds(),
	})
}

// startSpans opens the span intake into sink: the feed's routing delivers from now on, or the
// run's own receiver binds (a bind failure is a warning and the capability record's say).
func (t *telemetry) startSpans(ctx context.Context, sink artifact.Sink, sessionID, runID string) {
	if t.intake != nil {
		t.intake.open(sink)
	}
	t.traces.start(sink)
	if rs := t.spec.Receiver; rs != nil {
		t.recv = receiver.New(receiver.Options{SessionID: sessionID, RunID: runID, Sink: sink})
		if err := t.recv.Listen(ctx, rs.HTTPListen, rs.GRPCListen); err != nil {
			t.bindErr = err
			t.spec.Warn(fmt.Sprintf("the span receiver could not bind (%s); spans on that listener will not be received", strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
	}
	if t.scraper != nil {
		t.sampler = prom.NewPhaseSampler(t.scraper, sink, t.spec.Warn)
	}
}

// hooks puts the scraper's and the trace windows' phase hooks on h.
func (t *telemetry) hooks(h *loadgen.Hooks) {
	if t.sampler != nil {
		h.PhaseStart = t.sampler.PhaseStart
		h.PhaseEnd = t.sampler.PhaseEnd
	}
	t.traces.hooks(h)
}

// finish ends a trace window still open, stops the sampler, keeps receiving spans for the drain (skipped once ctx has
// ended), stops the span intake, and writes each component's infer.capabilities record.
func (t *telemetry) finish(ctx context.Context, sink artifact.Sink, header artifact.Context) error {
	errs := []error{t.traces.finish(ctx, header)}
	if t.sampler != nil {
		t.sampler.Close()
		errs = append(errs, t.sampler.WriteErr(), writeCapabilities(sink, t.scraper.Capabilities(header, t.sampler.Tally())))
	}
	if t.recv == nil && t.intake == nil {
		return errors.Join(errs...)
	}
	if d := t.spec.SpansDrain; ctx.Err() == nil && d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
	if t.recv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), receiverShutdown)
		if err := t.recv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("span receiver: %w", err))
		}
		cancel()
		errs = append(errs, t.recv.WriteErr(), writeCapabilities(sink, t.recv.Capabilities(header)))
	} else {
		t.detach()
		errs = append(errs, t.intake.close(), writeCapabilities(sink, t.spec.Spans.Capabilities(header)))
	}
	return errors.Join(errs...)
}

// spanIntake is the sink a SpanFeed delivers a run's spans to: it stamps the run's session
// and run ids on each span and writes it to the run's fan-out, from the moment the intake
// opens until it closes (a span routed after that is dropped: the artifact is closing).
type spanIntake struct {
	sessionID, runID string

	mu     sync.Mutex
	sink   artifact.Sink // nil until open and after close
	closed bool
	err    error // the first write error
}

func (s *spanIntake) open(sink artifact.Sink) {
	s.mu.Lock()
	if !s.closed {
		s.sink = sink
	}
	s.mu.Unlock()
}

// Write stamps and writes a *artifact.Span; other records are ignored.
func (s *spanIntake) Write(rec artifact.Record) error {
	span, ok := rec.(*artifact.Span)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink == nil {
		return nil
	}
	span.SessionID, span.RunID = s.sessionID, s.runID
	err := s.sink.Write(span)
	if err != nil && s.err == nil {
		s.err = err
	}
	return err
}

// Close does nothing: the pipeline closes the intake at the end of the span drain.
func (s *spanIntake) Close() error { return nil }

// close stops the intake and returns its first write error.
func (s *spanIntake) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.sink = true, nil
	return s.err
}

// writeCapabilities writes a component's capability record.
func writeCapabilities(sink artifact.Sink, c artifact.Capabilities) error { return sink.Write(&c) }
