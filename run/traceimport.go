package run

import (
	"context"
	"fmt"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/trace"
	"github.com/inferprobe/inferprobe/trace/kineto"
)

// ProducerTraceImport is the producer_id of the records a run's trace import writes.
const ProducerTraceImport = "inferprobe.trace_import"

// importTraces imports the worker trace files the run's windows found (Kineto traces:
// kineto.Import) into the run's fan-out: one infer.iteration per engine step, the activity
// refs and a capabilities record per file. The steps' times are in the server's clock
// domain: the client's own (header.ClockDomain) when the profiler's control URL is a
// loopback address (the server runs on this host), else "<control host>/unix_epoch_ns",
// which the analysis places on the client clock only with an infer.clock_alignment record.
// A trace that cannot be read is a warning, never a run failure (its file adds nothing; the
// files before it stay imported); only a record write error is returned.
func (tw *traceWindows) importTraces(ctx context.Context, files []string, header artifact.Context) error {
	imp := tw.spec.TraceImport
	if len(files) == 0 || imp.Skip || ctx.Err() != nil {
		return nil
	}
	opts := imp.Options
	opts.Context = header
	opts.Context.ProducerID, opts.Context.Source = ProducerTraceImport, "kineto"
	opts.Context.ClockDomain = trace.ServerClockDomain(tw.spec.Trace.ControlBase, header.ClockDomain)
	failed := false
	sink := artifact.SinkFunc(func(rec artifact.Record) error {
		stampDevice(rec, imp.DeviceUUIDs)
		if err := tw.sink.Write(rec); err != nil {
			failed = true
			return err
		}
		return nil
	})
	sums, err := kineto.Import(ctx, files, opts, sink)
	if err != nil && failed {
		return fmt.Errorf("trace import: %w", err)
	}
	if err != nil && tw.spec.Warn != nil {
		tw.spec.Warn(fmt.Sprintf("trace import stopped after %d of %d files: %v", len(sums), len(files), err))
	}
	return nil
}

// stampDevice sets context.device_uuid on an imported record of a rank that uuids names.
func stampDevice(rec artifact.Record, uuids map[int64]string) {
	var c *artifact.Context
	switch v := rec.(type) {
	case *artifact.Iteration:
		c = &v.Context
	case *artifact.ActivityRef:
		c = &v.Context
	case *artifact.Capabilities:
		c = &v.Context
	default:
		return
	}
	if c.Rank == nil {
		return
	}
	if u, ok := uuids[*c.Rank]; ok {
		c.DeviceUUID = &u
	}
}
