package tables

import (
	"math"
	"slices"
	"strconv"
)

// Worker states of worker_timeline.csv.
const (
	StateBusy   = "busy"
	StateIdle   = "idle"
	StateQueued = "queued"
)

// interval is one row of worker_timeline.csv: a worker's state over [startNS, endNS)
// (client clock, Unix ns) and the queue depths at its start (NaN: no scrape that early).
type interval struct {
	worker          string
	state           string
	startNS, endNS  int64
	waiting, active float64
}

// workerTimeline is the worker's state over each trace window it has steps in: busy over
// each step's host interval (from the end of the previous step when they overlap), and over
// each gap between consecutive steps of one trace file idle, or queued while the worker's
// last scrape (vllm:num_requests_waiting at or before the instant) shows a request waiting.
// A gap is split at the scrapes inside it, and neighbouring pieces of one state are merged.
// Outside its trace windows a worker has no rows: the steps there are not known.
func (bs *batches) timeline(ws *workerSamples) []interval {
	waiting, active := sortedSamples(ws, 0), sortedSamples(ws, 1)
	at := func(w string, t int64) (float64, float64) {
		wv, ok := before(waiting[w], t)
		if !ok {
			wv = nan
		}
		av, ok := before(active[w], t)
		if !ok {
			av = nan
		}
		return wv, av
	}
	var out []interval
	add := func(w, state string, lo, hi int64) {
		if hi <= lo {
			return
		}
		if n := len(out); n > 0 && out[n-1].worker == w && out[n-1].state == state && out[n-1].endNS == lo && state != StateBusy {
			out[n-1].endNS = hi
			return
		}
		wv, av := at(w, lo)
		out = append(out, interval{worker: w, state: state, startNS: lo, endNS: hi, waiting: wv, active: av})
	}
	for i := range bs.rows {
		b := &bs.rows[i]
		lo := b.startNS
		if i > 0 && bs.rows[i-1].worker == b.worker {
			prev := &bs.rows[i-1]
			if prev.it.TraceFile == b.it.TraceFile {
				bs.gap(waiting[b.worker], prev.endNS, b.startNS, func(state string, lo, hi int64) { add(b.worker, state, lo, hi) })
			}
			lo = max(lo, prev.endNS)
		}
		add(b.worker, StateBusy, lo, b.endNS)
	}
	return out
}

// gap reports the pieces of the gap [lo, hi) as idle or queued by the waiting samples ss.
func (bs *batches) gap(ss []sample, lo, hi int64, piece func(state string, lo, hi int64)) {
	state := func(t int64) string {
		if v, ok := before(ss, t); ok && v > 0 {
			return StateQueued
		}
		return StateIdle
	}
	start := lo
	for _, s := range ss {
		if s.atNS <= lo || s.atNS >= hi {
			continue
		}
		piece(state(start), start, s.atNS)
		start = s.atNS
	}
	piece(state(start), start, hi)
}

// workerTimelineCSV is worker_timeline.csv: worker_id, worker_type, state, start_time and
// end_time (seconds since base, the first arrival), duration_s, queue_depth_waiting,
// queue_depth_active; rows by worker then start time; %.4f, a queue-depth column without a
// missing cell as integers.
func workerTimelineCSV(rows []interval, base int64) []byte {
	full := [2]bool{true, true}
	for _, r := range rows {
		full[0], full[1] = full[0] && !math.IsNaN(r.waiting), full[1] && !math.IsNaN(r.active)
	}
	depth := func(v float64, k int) string {
		if full[k] {
			return IntFormat(v)
		}
		return Fixed4(v)
	}
	var c CSV
	c.Row("worker_id", "worker_type", "state", "start_time", "end_time", "duration_s", "queue_depth_waiting", "queue_depth_active")
	for _, r := range rows {
		c.Row(r.worker, WorkerType, r.state, Fixed4(float64(r.startNS-base)/1e9), Fixed4(float64(r.endNS-base)/1e9),
			Fixed4(float64(r.endNS-r.startNS)/1e9), depth(r.waiting, 0), depth(r.active, 1))
	}
	return c.Bytes()
}

// stateTimes are one worker's seconds per state.
type stateTimes struct{ busy, queued, idle float64 }

// stateTimesOf sums each worker's timeline durations per state.
func stateTimesOf(rows []interval) map[string]*stateTimes {
	out := map[string]*stateTimes{}
	for _, r := range rows {
		st := out[r.worker]
		if st == nil {
			st = &stateTimes{}
			out[r.worker] = st
		}
		d := float64(r.endNS-r.startNS) / 1e9
		switch r.state {
		case StateBusy:
			st.busy += d
		case StateQueued:
			st.queued += d
		default:
			st.idle += d
		}
	}
	return out
}

// workerStateTimeCSV is worker_plots/worker_state_time.csv in sangam's long form:
// worker_id, worker_type, worker_label, state (busy_time_s, queued_time_s, idle_time_s,
// draining_time_s), duration_s (%.4f); grouped by state, then worker. draining_time_s is
// always 0 (an engine's draining is not observed).
func workerStateTimeCSV(workers []string, st map[string]*stateTimes) []byte {
	var c CSV
	c.Row("worker_id", "worker_type", "worker_label", "state", "duration_s")
	for _, s := range []string{"busy_time_s", "queued_time_s", "idle_time_s", "draining_time_s"} {
		for _, w := range workers {
			t := st[w]
			if t == nil {
				t = &stateTimes{}
			}
			v := map[string]float64{"busy_time_s": t.busy, "queued_time_s": t.queued, "idle_time_s": t.idle}[s]
			c.Row(w, WorkerType, w+"/"+WorkerType, s, Fixed4(v))
		}
	}
	return c.Bytes()
}

// utilization is busy over busy + queued + idle time (NaN without any time).
func (t *stateTimes) utilization() float64 {
	if t == nil || t.busy+t.queued+t.idle <= 0 {
		return nan
	}
	return t.busy / (t.busy + t.queued + t.idle)
}

// workerUtilizationCSV is worker_plots/worker_utilization_ratio.csv: worker_id,
// worker_type, worker_label, utilization_ratio (%.4f; busy time over the timeline's time).
func workerUtilizationCSV(workers []string, st map[string]*stateTimes) []byte {
	var c CSV
	c.Row("worker_id", "worker_type", "worker_label", "utilization_ratio")
	for _, w := range workers {
		c.Row(w, WorkerType, w+"/"+WorkerType, Fixed4(st[w].utilization()))
	}
	return c.Bytes()
}

// idleSummary is one worker's idle-gap summary.
type idleSummary struct {
	gaps                int
	p50, p95            float64 // seconds; NaN without gaps
	meanWaiting         float64 // NaN without a scrape in the window
	meanActiveBatchSize float64 // NaN without a step that counts requests
}

// idleSummaries computes each worker's summary: the idle gaps are the positive gaps between
// consecutive steps of one trace file (the time no step ran, queued or not); p50 is their
// median (the mean of the middle two for an even count), p95 the linear-interpolation
// quantile at 0.95·(n−1); mean_waiting_queue_depth is the mean vllm:num_requests_waiting of
// the worker's scrapes within its trace windows (first step start to last step end of each
// file); mean_active_batch_size the mean batch_size of its steps.
func (bs *batches) idleSummaries(ws *workerSamples) map[string]idleSummary {
	waiting := sortedSamples(ws, 0)
	gaps, sizes := map[string][]float64{}, map[string][]float64{}
	type window struct{ lo, hi int64 }
	wins := map[string]map[string]*window{}
	for i := range bs.rows {
		b := &bs.rows[i]
		if !math.IsNaN(b.delay) && b.delay > 0 {
			gaps[b.worker] = append(gaps[b.worker], b.delay)
		}
		if n, ok := sum2(b.it.ContextRequests, b.it.GenRequests); ok {
			sizes[b.worker] = append(sizes[b.worker], n)
		}
		if wins[b.worker] == nil {
			wins[b.worker] = map[string]*window{}
		}
		if w := wins[b.worker][b.it.TraceFile]; w == nil {
			wins[b.worker][b.it.TraceFile] = &window{b.startNS, b.endNS}
		} else {
			w.lo, w.hi = min(w.lo, b.startNS), max(w.hi, b.endNS)
		}
	}
	out := map[string]idleSummary{}
	for _, w := range bs.workers {
		g := slices.Clone(gaps[w])
		slices.Sort(g)
		s := idleSummary{gaps: len(g), p50: median(g), p95: linearQuantile(g, 0.95), meanActiveBatchSize: mean(sizes[w])}
		var in []float64
		for _, x := range waiting[w] {
			for _, win := range wins[w] {
				if x.atNS >= win.lo && x.atNS <= win.hi {
					in = append(in, x.value)
					break
				}
			}
		}
		s.meanWaiting = mean(in)
		out[w] = s
	}
	return out
}

// median of sorted values (NaN for none).
func median(s []float64) float64 {
	n := len(s)
	switch {
	case n == 0:
		return nan
	case n%2 == 1:
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// linearQuantile is the q quantile of sorted values by linear interpolation between the
// order statistics at q·(n−1) (pandas' default); NaN for none.
func linearQuantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return nan
	}
	h := q * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

func mean(s []float64) float64 {
	if len(s) == 0 {
		return nan
	}
	var t float64
	for _, v := range s {
		t += v
	}
	return t / float64(len(s))
}

// idleSummaryCSV is worker_plots/worker_idle_gap_summary.csv (sangam computes these numbers
// but writes no file): worker_id, worker_type, worker_label, num_idle_gaps (an integer),
// p50_idle_gap_s, p95_idle_gap_s, mean_waiting_queue_depth, mean_active_batch_size (%.4f,
// empty when there is nothing to average).
func idleSummaryCSV(workers []string, sums map[string]idleSummary) []byte {
	var c CSV
	c.Row("worker_id", "worker_type", "worker_label", "num_idle_gaps", "p50_idle_gap_s", "p95_idle_gap_s",
		"mean_waiting_queue_depth", "mean_active_batch_size")
	for _, w := range workers {
		s := sums[w]
		c.Row(w, WorkerType, w+"/"+WorkerType, strconv.Itoa(s.gaps), Fixed4(s.p50), Fixed4(s.p95), Fixed4(s.meanWaiting), Fixed4(s.meanActiveBatchSize))
	}
	return c.Bytes()
}

// phaseTotalsCSV is worker_plots/worker_batch_phase_time_totals.csv: worker_id,
// batch_phase, execution_time_s — per worker three rows (prefill, decode, mixed), the summed
// batch_execution_time of its steps of that phase, %.6f.
func (bs *batches) phaseTotalsCSV() []byte {
	tot := map[string]map[string]float64{}
	for i := range bs.rows {
		b := &bs.rows[i]
		if tot[b.worker] == nil {
			tot[b.worker] = map[string]float64{}
		}
		tot[b.worker][b.phase()] += float64(b.it.GPUBusyNS) / 1e9
	}
	var c CSV
	c.Row("worker_id", "batch_phase", "execution_time_s")
	for _, w := range bs.workers {
		for _, p := range []string{PhasePrefill, PhaseDecode, PhaseMixed} {
			c.Row(w, p, strconv.FormatFloat(tot[w][p], 'f', 6, 64))
		}
	}
	return c.Bytes()
}
