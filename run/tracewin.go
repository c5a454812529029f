package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/scrape/prom"
	"github.com/inferprobe/inferprobe/trace"
)

// traceWindows are a run's profiler trace windows (Spec.Trace): the controller on the load
// generator's phase hooks, writing its infer.trace_window records to the run's fan-out.
type traceWindows struct {
	ctrl *trace.Controller
	sink artifact.Sink // the fan-out, from start on
	spec *Spec

	mu    sync.Mutex
	files []string // the worker trace files the windows found, in record order
}

// newTraceWindows checks spec.Trace and prepares its controller (nil without Spec.Trace);
// nothing is sent yet.
//
// A window delayed until num_requests_running (trace.Options.AfterRunning) reads it from the
// run's scraper, or, without one, from the endpoint's default /metrics.
func newTraceWindows(spec *Spec, sessionID string, scraper *prom.Scraper) (*traceWindows, error) {
	if spec.Trace == nil {
		return nil, nil
	}
	tw := &traceWindows{spec: spec}
	o := *spec.Trace
	if o.AfterRunning > 0 && o.Running == nil {
		sc, err := runningScraper(spec, scraper)
		if err != nil {
			return nil, fmt.Errorf("trace windows: %w", err)
		}
		o.Running = func(ctx context.Context) (float64, error) { return sc.Sum(ctx, "vllm:num_requests_running") }
	}
	o.SessionID, o.RunID = sessionID, spec.Workload.RunID
	o.Sink = artifact.SinkFunc(func(rec artifact.Record) error {
		if tw.sink == nil {
			return errors.New("trace window before the run started")
		}
		tw.note(rec)
		return tw.sink.Write(rec)
	})
	if o.Warn == nil {
		o.Warn = spec.Warn
	}
	c, err := trace.New(o)
	if err != nil {
		return nil, fmt.Errorf("trace windows: %w", err)
	}
	tw.ctrl = c
	return tw, nil
}

// start directs the records to sink; it is called before the load generator runs.
func (tw *traceWindows) start(sink artifact.Sink) {
	if tw != nil {
		tw.sink = sink
	}
}

// hooks puts the windows on h's phase hooks: the window opens after h's PhaseStart (the
// scrape before the phase) and closes before its PhaseEnd (the scrape after the drain).
func (tw *traceWindows) hooks(h *loadgen.Hooks) {
	if tw == nil {
		return
	}
	start, end := h.PhaseStart, h.PhaseEnd
	h.PhaseStart = func(ctx context.Context, caseID, phase string) {
		if start != nil {
			start(ctx, caseID, phase)
		}
		tw.ctrl.PhaseStart(ctx, caseID, phase)
	}
	h.PhaseEnd = func(ctx context.Context, caseID, phase string) {
		tw.ctrl.PhaseEnd(ctx, caseID, phase)
		if end != nil {
			end(ctx, caseID, phase)
		}
	}
}

// note keeps the trace files of a window record.
func (tw *traceWindows) note(rec artifact.Record) {
	w, ok := rec.(*artifact.TraceWindow)
	if !ok {
		return
	}
	tw.mu.Lock()
	for _, f := range w.TraceFiles {
		tw.files = append(tw.files, f.Path)
	}
	tw.mu.Unlock()
}

// finish ends a window still open (stop_reason cancelled: the load generator skips PhaseEnd
// once the run's context has ended), imports the windows' trace files (importTraces) and
// returns the first record write error.
func (tw *traceWindows) finish(ctx context.Context, header artifact.Context) error {
	if tw == nil {
		return nil
	}
	tw.ctrl.Close(ctx)
	if err := tw.ctrl.WriteErr(); err != nil {
		return err
	}
	tw.mu.Lock()
	files := slices.Clone(tw.files)
	tw.mu.Unlock()
	return tw.importTraces(ctx, files, header)
}

// runningScraper is the scraper a delayed window reads num_requests_running with: the run's
// own, else one of the endpoint's default /metrics.
func runningScraper(spec *Spec, scraper *prom.Scraper) (*prom.Scraper, error) {
	if scraper != nil {
		return scraper, nil
	}
	u, err := prom.DefaultMetricsURL(spec.Workload.Endpoint)
	if err != nil {
		return nil, err
	}
	return prom.NewScraper(prom.Config{URL: u, Endpoint: spec.Workload.Endpoint, APIKey: spec.Workload.APIKey, Timeout: 5 * time.Second})
}
