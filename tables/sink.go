package tables

import (
	"cmp"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// File names inside the output directory.
const (
	RequestMetricsFile = "request_metrics.csv"
	RequestPlotsDir    = "request_plots"
	ManifestFile       = "manifest.json"
)

// Sink is an artifact.Sink that collects the measured infer.request records, the
// infer.vllm_span records, the infer.vllm_scrape records and the imported engine steps
// (infer.iteration, with the infer.artifact header and infer.clock_alignment records that
// place them on the client clock) of one or more runs, and on Close writes the output
// directory:
//
//   - request_metrics.csv: header "Request Id" then the columns (sangam's order) that have a
//     source and at least one value; one row per measured request with at least one value
//     (latency and token columns only for a completed request, status ok; the inter-arrival
//     delay for every measured request with an intended arrival); floats as %.4f, an integer
//     column without a missing cell as integers, a missing value as an empty cell. Rows are
//     sorted by Request Id as strings (byte order) when there are two columns or more
//     (sangam's outer merge), kept in record order otherwise.
//   - request_plots/<column>.csv: each written column's exact CDF (ExactCDF: "<column>,cdf",
//     at most 1,001 rows, Python-repr floats, integers for a token column) and its PNG (a
//     step plot, value on x); <column>_histogram.png (25 bins) for the inter-arrival delay
//     and the token counts.
//   - request_plots/request_arrival_time_series.csv and request_completion_time_series.csv:
//     "Time (s),<name>", the cumulative count against seconds since the first arrival, at
//     most 1,001 rows (countSeriesCSV), with a PNG (lines).
//   - worker_plots/worker_<gauge>_time_series.csv ("Time (s),<gauge>,worker_id") and
//     worker_plots/worker_<gauge>.csv ("cdf,<gauge>,worker_id", 101 DDSketch quantiles per
//     worker) for queue_depth_waiting, queue_depth_active and kv_page_utilization_ratio from
//     the scrapes (worker = vLLM's engine label), each with a PNG, one colour per worker.
//   - with imported steps (placeBatches): worker_batch_metrics.csv (one row per step),
//     worker_timeline.csv, worker_plots/worker_state_time.csv, worker_utilization_ratio.csv,
//     worker_idle_gap_summary.csv, worker_batch_phase_time_totals.csv and a per-worker
//     DDSketch CDF of each batch column (writeBatches), with pictures.
//   - timeline.json: a Chrome trace of the requests, their joined spans, the engines' gauges
//     and steps (writeTimeline).
//   - manifest.json: every column, series, worker metric, picture (group, caption, source),
//     the per-batch files (or why they are left out) and the timeline (Manifest).
//   - index.html: the page to open first (writeIndex), with the summary (SetSummary).
//
// A file of an earlier write that this one does not produce (a column without values now)
// is removed, so an overwritten directory holds nothing stale. Spans are joined to requests
// by package join (join.Live, the rules of the offline join): a quarantined request has no
// span columns. Other records are ignored. Write never fails; Close returns the first error
// creating the directory or writing a file. The Sink is safe for concurrent use; records
// written after Close are ignored.
type Sink struct {
	dir     string
	mu      sync.Mutex
	live    join.Live
	reqs    []*artifact.Request
	spans   []*artifact.Span
	workers workerSamples
	// header, aligns and steps place the imported engine steps on the client clock.
	header  *artifact.ArtifactHeader
	aligns  []artifact.ClockAlignment
	steps   []*artifact.Iteration
	summary func() (Summary, error)
	seen    bool // an infer.request record arrived (any phase)
	// noPictures skips rendering the PNGs (the fuzz target, where rendering dominates);
	// index.html then has no picture.
	noPictures bool
	closed     bool
}

// Summary is what index.html shows above the plots: the run's text report (analyze's text
// rendering) and its SLO bounds (the policy document, as text); either may be empty.
type Summary struct {
	Text string
	SLO  string
}

// SetSummary sets the function that gives index.html its summary; Close calls it once
// (after every record was written, so that a caller can analyse the closed artifact). An
// error is shown on the page in the summary's place. Without one the page has no summary.
func (s *Sink) SetSummary(f func() (Summary, error)) {
	s.mu.Lock()
	s.summary = f
	s.mu.Unlock()
}

// New returns a Sink writing into dir (created on Close when missing). Checking that dir
// may be written (new, empty, or overwrite allowed) is the caller's.
func New(dir string) *Sink { return &Sink{dir: dir} }

// Write takes one record: a *artifact.Request (kept when measured; its join keys in any
// case, so warmup spans are told apart), a *artifact.Span, a *artifact.MetricsScrape, a
// *artifact.Iteration, a *artifact.ClockAlignment or the first *artifact.ArtifactHeader. It keeps the pointers: the
// records must not change afterwards. Always nil.
func (s *Sink) Write(rec artifact.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	switch v := rec.(type) {
	case *artifact.Request:
		s.live.Add(v)
		s.seen = true
		if v.Phase == artifact.PhaseMeasured {
			s.reqs = append(s.reqs, v)
		}
	case *artifact.Span:
		s.live.Add(v)
		s.spans = append(s.spans, v)
	case *artifact.MetricsScrape:
		s.workers.addScrape(v)
	case *artifact.ArtifactHeader:
		if s.header == nil {
			s.header = v
		}
	case *artifact.ClockAlignment:
		s.aligns = append(s.aligns, *v)
	case *artifact.Iteration:
		s.steps = append(s.steps, v)
	}
	return nil
}

// Close builds the tables and writes the directory (see Sink). A Sink that received no
// infer.request record (a run whose artifact could not be opened sends none) writes nothing
// and creates no directory. A second Close does nothing.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.seen {
		s.closed = true
		return nil
	}
	s.closed = true
	o := &output{t: build(s.reqs, s.live.Result()), reqs: s.reqs, spans: s.spans, workers: &s.workers, noPictures: s.noPictures,
		batches: placeBatches(s.steps, s.header, s.aligns, &s.workers)}
	if s.summary != nil {
		o.summary, o.summaryErr = s.summary()
	}
	return o.write(s.dir)
}

// table is the built request table.
type table struct {
	ids []string
	// vals holds row i's value of column c at i×len(valued)+slot[c] (only the columns
	// with a source have a slot); NaN: no value.
	vals     []float64
	included []int // indices into columns, in order
	counts   []int // values per column of columns
	sorted   bool
	join     join.Result
	// measuredXIDs are the x_request_ids of the measured requests sent.
	measuredXIDs []string
}

// build computes every row of the measured requests (record order), drops the rows without
// any value, picks the columns with a value and orders the rows.
func build(reqs []*artifact.Request, jr join.Result) *table {
	gaps := interArrivals(reqs)
	t := &table{counts: make([]int, len(columns)), join: jr}
	row := make([]float64, len(valued))
	for i, r := range reqs {
		in := rowInput{req: r, completed: r.Status == artifact.RequestOK}
		in.interArrival, in.hasIA = gaps[i].gap, gaps[i].ok
		if r.XRequestID != nil {
			t.measuredXIDs = append(t.measuredXIDs, *r.XRequestID)
			if attrs, ok := jr.Joined[*r.XRequestID]; ok {
				in.span = &artifact.Span{Attributes: attrs}
			}
		}
		has := false
		for k, c := range valued {
			row[k] = nan
			if v, ok := columns[c].value(&in); ok {
				row[k], has = v, true
			}
		}
		if !has {
			continue
		}
		for k, c := range valued {
			if !math.IsNaN(row[k]) {
				t.counts[c]++
			}
		}
		t.ids, t.vals = append(t.ids, r.RequestID), append(t.vals, row...)
	}
	for c, n := range t.counts {
		if n > 0 {
			t.included = append(t.included, c)
		}
	}
	if len(t.included) >= 2 {
		t.sortRows()
	}
	return t
}

var nan = math.NaN()

// valued are the indices of the columns with a source (a value function); slot maps a
// column to its place among them (-1 for a column without a source).
var valued, slot = func() ([]int, []int) {
	var v []int
	sl := make([]int, len(columns))
	for c := range columns {
		sl[c] = -1
		if columns[c].value != nil {
			sl[c] = len(v)
			v = append(v, c)
		}
	}
	return v, sl
}()

// val is row i's value of column c (NaN: none).
func (t *table) val(i, c int) float64 {
	if slot[c] < 0 {
		return nan
	}
	return t.vals[i*len(valued)+slot[c]]
}

// sortRows orders the rows by Request Id (stable).
func (t *table) sortRows() {
	order := make([]int, len(t.ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(t.ids[a], t.ids[b]) })
	n := len(valued)
	ids, vals := make([]string, len(order)), make([]float64, len(t.vals))
	for i, k := range order {
		ids[i] = t.ids[k]
		copy(vals[i*n:(i+1)*n], t.vals[k*n:(k+1)*n])
	}
	t.ids, t.vals, t.sorted = ids, vals, true
}

// gap is one request's inter-arrival delay.
type gap struct {
	gap float64
	ok  bool
}

// interArrivals gives each request (by index) the seconds from the previous intended
// arrival of its session and case, arrivals ordered by intended time (ties in record order).
func interArrivals(reqs []*artifact.Request) []gap {
	out := make([]gap, len(reqs))
	groups := map[[2]string][]int{}
	for i, r := range reqs {
		if r.IntendedAtNS != nil {
			k := [2]string{r.SessionID, r.CaseID}
			groups[k] = append(groups[k], i)
		}
	}
	for _, idx := range groups {
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(*reqs[a].IntendedAtNS, *reqs[b].IntendedAtNS) })
		for k := 1; k < len(idx); k++ {
			d := *reqs[idx[k]].IntendedAtNS - *reqs[idx[k-1]].IntendedAtNS
			out[idx[k]] = gap{gap: float64(d) / 1e9, ok: true}
		}
	}
	return out
}

// writeRequestMetrics writes request_metrics.csv to w, in pieces of about 1 MiB.
func (t *table) writeRequestMetrics(w io.Writer) error {
	var c CSV
	head := []string{"Request Id"}
	for _, k := range t.included {
		head = append(head, columns[k].name)
	}
	c.Row(head...)
	row := make([]string, 0, len(head))
	for i, id := range t.ids {
		row = append(row[:0], id)
		for _, k := range t.included {
			v := t.val(i, k)
			if columns[k].integer && t.counts[k] == len(t.ids) {
				row = append(row, IntFormat(v))
			} else {
				row = append(row, Fixed4(v))
			}
		}
		c.Row(row...)
		if c.Len() >= 1<<20 {
			if err := c.FlushTo(w); err != nil {
				return err
			}
		}
	}
	return c.FlushTo(w)
}
