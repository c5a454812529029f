package tables

import (
	"fmt"
	"slices"
)

// Per-batch file names (relative to the output directory).
const (
	WorkerBatchMetricsFile = "worker_batch_metrics.csv"
	WorkerTimelineFile     = "worker_timeline.csv"
	WorkerStateTimeFile    = WorkerPlotsDir + "/worker_state_time.csv"
	WorkerUtilizationFile  = WorkerPlotsDir + "/worker_utilization_ratio.csv"
	WorkerIdleSummaryFile  = WorkerPlotsDir + "/worker_idle_gap_summary.csv"
	WorkerPhaseTotalsFile  = WorkerPlotsDir + "/worker_batch_phase_time_totals.csv"
	// WorkerBatchSizeFigure draws worker_batch_metrics.csv's batch_size over time.
	WorkerBatchSizeFigure = WorkerPlotsDir + "/worker_batch_size_over_time.png"
)

// batchTables describes the per-batch files besides worker_batch_metrics.csv and the CDFs.
var batchTables = []FileEntry{
	{Name: "worker_timeline", File: WorkerTimelineFile, Source: SourceIteration + "+" + SourceScrape, Unit: "seconds",
		Definition: "per worker, busy over each step's host interval and, between consecutive steps of one trace file, queued while the last scrape shows vllm:num_requests_waiting > 0, else idle; times in seconds since the first arrival; the queue depths are the last scrape's at the row's start; only inside the trace windows"},
	{Name: "worker_state_time", File: WorkerStateTimeFile, Source: SourceIteration + "+" + SourceScrape, Unit: "seconds",
		Definition: "per worker the summed worker_timeline time in each state (busy_time_s, queued_time_s, idle_time_s; draining_time_s is always 0)"},
	{Name: "worker_utilization_ratio", File: WorkerUtilizationFile, Source: SourceIteration, Unit: "ratio (0-1)",
		Definition: "per worker busy time over the worker_timeline's total time (its trace windows)"},
	{Name: "worker_idle_gap_summary", File: WorkerIdleSummaryFile, Source: SourceIteration + "+" + SourceScrape, Unit: "seconds; requests",
		Definition: "per worker num_idle_gaps (positive gaps between consecutive steps of one trace file), p50_idle_gap_s (median), p95_idle_gap_s (linear quantile), mean_waiting_queue_depth (mean vllm:num_requests_waiting of the scrapes inside the trace windows), mean_active_batch_size (mean batch_size); sangam computes these but writes no file"},
	{Name: "worker_batch_phase_time_totals", File: WorkerPhaseTotalsFile, Source: SourceIteration, Unit: "seconds",
		Definition: "per worker and batch_phase (prefill, decode, mixed) the summed batch_execution_time (GPU busy)"},
}

// batchFiles are every per-batch file name (written with imported steps, else removed).
var batchFiles = func() []string {
	out := []string{WorkerBatchMetricsFile}
	for _, e := range batchTables {
		out = append(out, e.File)
	}
	for _, c := range batchColumns {
		if c.cdf {
			out = append(out, batchCDFFile(c.name))
		}
	}
	return out
}()

// batchCDFFile is a batch column's per-worker CDF file: sangam's worker_<metric>.csv (no
// second prefix for a name that starts with "worker_").
func batchCDFFile(name string) string { return WorkerPlotsDir + "/worker_" + name + ".csv" }

// writeBatches writes the per-batch files from the placed steps (o.batches), with their
// pictures and the manifest's batches entry (Files: those written); without placed steps it
// removes them and the entry lists them all and says why.
func (o *output) writeBatches(dir string) error {
	bs := o.batches
	e := BatchesEntry{Files: slices.Clone(batchFiles), Why: bs.why, Source: SourceIteration, WorkerType: WorkerType, Workers: []string{}}
	if len(bs.rows) == 0 {
		o.m.Batches = e
		for _, f := range batchFiles {
			for _, name := range []string{f, pngOf(f)} {
				if err := removeFile(dir, name); err != nil {
					return err
				}
			}
		}
		if err := removeFile(dir, WorkerBatchSizeFigure); err != nil {
			return err
		}
		return removeFile(dir, pngOf(WorkerTimelineFile))
	}
	e.Written, e.Why, e.Steps, e.Workers, e.ClockSource = true, "", len(bs.rows), bs.workers, bs.clock.Source
	b, included := bs.workerBatchMetricsCSV()
	if err := writeFile(dir, WorkerBatchMetricsFile, b); err != nil {
		return err
	}
	e.Columns = batchColumnEntries(included)
	tl := bs.timeline(o.workers)
	st := stateTimesOf(tl)
	for _, f := range []struct {
		name string
		b    []byte
	}{
		{WorkerTimelineFile, workerTimelineCSV(tl, o.base)},
		{WorkerStateTimeFile, workerStateTimeCSV(bs.workers, st)},
		{WorkerUtilizationFile, workerUtilizationCSV(bs.workers, st)},
		{WorkerIdleSummaryFile, idleSummaryCSV(bs.workers, bs.idleSummaries(o.workers))},
		{WorkerPhaseTotalsFile, bs.phaseTotalsCSV()},
	} {
		if err := writeFile(dir, f.name, f.b); err != nil {
			return err
		}
	}
	for _, t := range batchTables {
		t.Written = true
		e.Tables = append(e.Tables, t)
	}
	o.timelineFigure(tl)
	o.batchSizeFigure()
	if err := o.batchCDFs(dir, included); err != nil {
		return err
	}
	e.Files = e.Files[:1+len(batchTables)]
	for _, c := range included {
		if batchColumns[c].cdf {
			e.Files = append(e.Files, batchCDFFile(batchColumns[c].name))
		}
	}
	o.m.Batches = e
	return nil
}

// batchColumnEntries lists worker_batch_metrics.csv's columns: the written ones (in file
// order) and sangam's that are left out, with why.
func batchColumnEntries(included []int) []ColumnEntry {
	out := []ColumnEntry{
		{Name: "worker_id", Written: true, Source: SourceIteration, Unit: "id", Definition: "the step's trace rank (vLLM's data-parallel rank, the engine label of its /metrics); " + NoRankLabel + " when the trace names none"},
		{Name: "worker_type", Written: true, Source: SourceIteration, Unit: "type", Definition: "always " + WorkerType},
		{Name: "batch_id", Written: true, Source: SourceIteration, Unit: "index", Definition: "the worker's steps numbered from 0 in host start order (the step index within one trace window)"},
	}
	in := map[int]bool{}
	for _, c := range included {
		in[c] = true
	}
	for c, col := range batchColumns {
		if c == phaseColumn {
			out = append(out, ColumnEntry{Name: "batch_phase", Written: true, Source: SourceIteration, Unit: "phase",
				Definition: "prefill (only context requests), decode (only generation requests), mixed (both) or unknown (the annotation counts none)"})
		}
		ce := ColumnEntry{Name: col.name, Written: in[c], Source: SourceIteration, Unit: col.unit, Definition: col.definition}
		if col.name == "kv_page_utilization_ratio" {
			ce.Source = SourceScrape
		}
		if !in[c] {
			ce.Why = "no step has a value (no scrape of the worker for the KV ratio; no counts in the annotations for the tokens and requests)"
		}
		out = append(out, ce)
	}
	return append(out, batchLeftOut...)
}

// batchCDFs writes each written CDF column's per-worker DDSketch CDF (worker_plots,
// "cdf,<metric>,worker_id", WorkerCDFRows rows per worker) and queues its picture; a CDF
// column without values is removed.
func (o *output) batchCDFs(dir string, included []int) error {
	bs := o.batches
	grid := Grid(WorkerCDFRows)
	for c, col := range batchColumns {
		if !col.cdf {
			continue
		}
		file := batchCDFFile(col.name)
		if !slices.Contains(included, c) {
			if err := removeFile(dir, file); err != nil {
				return err
			}
			if err := removeFile(dir, pngOf(file)); err != nil {
				return err
			}
			continue
		}
		var ids []string
		var vals [][]float64
		var curves []curve
		for _, w := range bs.workers {
			var xs []float64
			for i := range bs.rows {
				if v, ok := col.value(&bs.rows[i]); ok && bs.rows[i].worker == w {
					xs = append(xs, v)
				}
			}
			if len(xs) == 0 {
				continue
			}
			q, err := sketchQuantiles(xs, grid)
			if err != nil {
				return fmt.Errorf("tables: %s of worker %s: %w", col.name, w, err)
			}
			ids, vals = append(ids, w), append(vals, q)
			curves = append(curves, curve{label: "worker " + w, xys: xys(q, grid)})
		}
		if err := writeFile(dir, file, workerCDFBytes(col.name, ids, vals)); err != nil {
			return err
		}
		o.addFigure(&figure{file: pngOf(file), kind: kindStep, title: "worker_" + col.name + " (DDSketch CDF per worker)",
			xLabel: col.name + " (" + col.unit + ")", yLab: "cdf", curves: curves},
			file, GroupBatches, "Per-worker CDF (101 quantiles) of "+col.definition, SourceIteration)
	}
	return nil
}

// sketchQuantiles are the values at quantiles q of a DDSketch (NewSketch) of xs. Errors:
// the sketch's (a value it cannot hold).
func sketchQuantiles(xs, q []float64) ([]float64, error) {
	s, err := NewSketch()
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if err := s.Add(x); err != nil {
			return nil, err
		}
	}
	return s.GetValuesAtQuantiles(q)
}

// TimelineBins is the number of time bins of worker_timeline.png.
const TimelineBins = 200

// timelineFigure queues worker_timeline.png: per worker the busy and the queued share of
// its timeline time in each of TimelineBins equal bins from the first row's start to the
// last row's end (a bin the worker has no row in is not drawn: the line joins its
// neighbours).
func (o *output) timelineFigure(tl []interval) {
	if len(tl) == 0 {
		return
	}
	lo, hi := tl[0].startNS, tl[0].endNS
	for _, r := range tl {
		lo, hi = min(lo, r.startNS), max(hi, r.endNS)
	}
	flo := float64(lo)
	width := max((float64(hi)-flo)/TimelineBins, 1)
	var curves []curve
	for i := 0; i < len(tl); {
		w := tl[i].worker
		var covered, busy, queued [TimelineBins]float64
		for ; i < len(tl) && tl[i].worker == w; i++ {
			r := tl[i]
			start, end := float64(r.startNS), float64(r.endNS)
			for k := min(max(int((start-flo)/width), 0), TimelineBins); k < TimelineBins; k++ {
				blo, bhi := flo+float64(k)*width, flo+float64(k+1)*width
				if blo >= end {
					break
				}
				d := min(bhi, end) - max(blo, start)
				if d <= 0 {
					continue
				}
				covered[k] += d
				switch r.state {
				case StateBusy:
					busy[k] += d
				case StateQueued:
					queued[k] += d
				}
			}
		}
		var xs, bs, qs []float64
		for k := range covered {
			if covered[k] > 0 {
				xs = append(xs, (flo+(float64(k)+0.5)*width-float64(o.base))/1e9)
				bs, qs = append(bs, busy[k]/covered[k]), append(qs, queued[k]/covered[k])
			}
		}
		curves = append(curves, curve{label: "worker " + w + " busy", xys: xys(xs, bs)}, curve{label: "worker " + w + " queued", xys: xys(xs, qs)})
	}
	o.addFigure(&figure{file: pngOf(WorkerTimelineFile), kind: kindLine, title: fmt.Sprintf("worker_timeline: busy and queued share per worker (%d bins)", TimelineBins),
		xLabel: "Time (s) since the first arrival", yLab: "share of the bin", curves: curves},
		WorkerTimelineFile, GroupBatches, "Share of each time bin a worker was busy (a step ran) or queued (between steps while requests waited), over its trace windows", SourceIteration+"+"+SourceScrape)
}

// batchSizeFigure queues worker_batch_size_over_time.png: each worker's batch_size at its
// steps' host starts (seconds since the first arrival), at most CDFRows points per worker
// (Downsample).
func (o *output) batchSizeFigure() {
	bs := o.batches
	var curves []curve
	for i := 0; i < len(bs.rows); {
		w := bs.rows[i].worker
		var ts, ns []float64
		for ; i < len(bs.rows) && bs.rows[i].worker == w; i++ {
			if n, ok := sum2(bs.rows[i].it.ContextRequests, bs.rows[i].it.GenRequests); ok {
				ts, ns = append(ts, float64(bs.rows[i].startNS-o.base)/1e9), append(ns, n)
			}
		}
		var xs, ys []float64
		for _, k := range Downsample(len(ts), CDFRows) {
			xs, ys = append(xs, ts[k]), append(ys, ns[k])
		}
		if len(xs) > 0 {
			curves = append(curves, curve{label: "worker " + w, xys: xys(xs, ys)})
		}
	}
	if len(curves) == 0 {
		return
	}
	o.addFigure(&figure{file: WorkerBatchSizeFigure, kind: kindLine, title: "batch_size per step over time",
		xLabel: "Time (s) since the first arrival (step start)", yLab: "batch_size (requests)", curves: curves},
		WorkerBatchMetricsFile, GroupBatches, "Requests in each step's batch (context plus generation requests) over time, per worker", SourceIteration)
}
