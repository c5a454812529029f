package tables

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/inferprobe/inferprobe/artifact"
)

// WorkerPlotsDir is the per-worker directory inside the output directory.
const WorkerPlotsDir = "worker_plots"

// WorkerCDFRows is the rows per worker of a worker CDF file (sangam's 101 quantiles).
const WorkerCDFRows = 101

// NoEngineLabel is the worker id of the vllm: gauges of a scrape that carry no "engine" label.
const NoEngineLabel = "unlabelled"

// gauge is one per-worker metric read from vLLM's /metrics: sangam's name, the vLLM family
// it is read from, its unit and definition.
type gauge struct {
	name, family, unit, definition string
	integer                        bool
}

// gauges are the per-worker metrics, in the order they are written.
var gauges = []gauge{
	{name: "queue_depth_waiting", family: "vllm:num_requests_waiting", unit: "requests", integer: true,
		definition: "requests waiting in the engine's scheduler queue at the scrape (vllm:num_requests_waiting, summed over model_name)"},
	{name: "queue_depth_active", family: "vllm:num_requests_running", unit: "requests", integer: true,
		definition: "requests in the engine's running batch at the scrape (vllm:num_requests_running, summed over model_name)"},
	{name: "kv_page_utilization_ratio", family: "vllm:kv_cache_usage_perc", unit: "ratio (0-1)",
		definition: "share of the engine's KV-cache blocks in use at the scrape (vllm:kv_cache_usage_perc; 1 is full)"},
}

// sample is one gauge value of one worker at one scrape (client wall clock, Unix ns).
type sample struct {
	atNS  int64
	value float64
}

// workerSamples holds, per gauge (index into gauges), each worker's samples in arrival order.
type workerSamples [3]map[string][]sample

// SourceScrape is the source of the per-worker columns: vLLM's /metrics scrapes.
const SourceScrape = "vllm_scrape"

// addScrape takes the three gauges of every engine of an ok scrape, at its ObservedAtNS; a
// failed scrape, and a non-finite value, adds nothing. A gauge exposed under several label
// sets of one engine (model_name) is summed.
func (ws *workerSamples) addScrape(r *artifact.MetricsScrape) {
	if !r.OK() {
		return
	}
	for g := range gauges {
		byID, ok := r.Scrape.Values[gauges[g].family]
		if !ok {
			continue
		}
		sums := map[string]float64{}
		for id, v := range byID {
			if v.Dist != nil {
				continue
			}
			x := float64(v.Sample)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			eng, ok := r.Scrape.LabelSets[id]["engine"]
			if !ok {
				eng = NoEngineLabel
			}
			sums[eng] += x
		}
		if ws[g] == nil && len(sums) > 0 {
			ws[g] = map[string][]sample{}
		}
		for eng, x := range sums {
			ws[g][eng] = append(ws[g][eng], sample{atNS: r.ObservedAtNS, value: x})
		}
	}
}

// workers returns gauge g's worker ids, sorted (byte order).
func (ws *workerSamples) workers(g int) []string {
	ids := make([]string, 0, len(ws[g]))
	for id := range ws[g] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// gaugeFormat is the cell format of gauge g's values: integers for a queue depth, Repr for
// a ratio.
func gaugeFormat(g int) func(float64) string {
	if gauges[g].integer {
		return IntFormat
	}
	return Repr
}

// workerSeriesCSV is worker_plots/worker_<gauge>_time_series.csv: header
// "Time (s),<gauge>,worker_id"; each worker's samples ordered by time (stable), downsampled
// to CDFRows rows (Downsample), then all workers' rows stable-sorted by time; the time is
// seconds from base (the first arrival) in Repr.
func (ws *workerSamples) workerSeriesCSV(g int, base int64) []byte {
	type row struct {
		t      float64
		v      float64
		worker string
	}
	var rows []row
	for _, id := range ws.workers(g) {
		ss := slices.Clone(ws[g][id])
		slices.SortStableFunc(ss, func(a, b sample) int { return cmp.Compare(a.atNS, b.atNS) })
		for _, k := range Downsample(len(ss), CDFRows) {
			rows = append(rows, row{t: float64(ss[k].atNS-base) / 1e9, v: ss[k].value, worker: id})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.t, b.t) })
	format := gaugeFormat(g)
	var c CSV
	c.Row("Time (s)", gauges[g].name, "worker_id")
	for _, r := range rows {
		c.Row(Repr(r.t), format(r.v), r.worker)
	}
	return c.Bytes()
}

// workerCDFCSV is worker_plots/worker_<gauge>.csv: header "cdf,<gauge>,worker_id", then for
// each worker in sorted order WorkerCDFRows rows: q of Grid(WorkerCDFRows) and the worker's
// DDSketch (NewSketch) value at q, both in Repr, except that a column whose every value is
// zero is written "0" (Python's integer zero bucket). Errors: the sketch's.
func (ws *workerSamples) workerCDFCSV(g int) ([]byte, error) {
	grid := Grid(WorkerCDFRows)
	ids := ws.workers(g)
	vals := make([][]float64, len(ids))
	for i, id := range ids {
		var err error
		if vals[i], err = ws.quantiles(g, id, grid); err != nil {
			return nil, err
		}
	}
	return workerCDFBytes(gauges[g].name, ids, vals), nil
}

// workerCDFBytes is a per-worker CDF file: header "cdf,<metric>,worker_id", then for each
// worker (in the order of ids) one row per quantile q of Grid(WorkerCDFRows) with q and the
// worker's value vals[i][k] at it, both in Repr, except that a column whose every value is
// zero is written "0" (Python's integer zero bucket).
func workerCDFBytes(metric string, ids []string, vals [][]float64) []byte {
	grid := Grid(WorkerCDFRows)
	allZero := true
	for i := range ids {
		allZero = allZero && !slices.ContainsFunc(vals[i], func(v float64) bool { return v != 0 })
	}
	var c CSV
	c.Row("cdf", metric, "worker_id")
	for i, id := range ids {
		for k, q := range grid {
			v := Repr(vals[i][k])
			if allZero {
				v = "0"
			}
			c.Row(Repr(q), v, id)
		}
	}
	return c.Bytes()
}

// workerCDFFile and workerSeriesFile are gauge g's file names inside WorkerPlotsDir.
func workerCDFFile(g int) string    { return "worker_" + gauges[g].name + ".csv" }
func workerSeriesFile(g int) string { return "worker_" + gauges[g].name + "_time_series.csv" }

// quantiles are worker id's gauge g values at the quantiles q of a DDSketch (NewSketch) of
// its samples. Errors: the sketch's.
func (ws *workerSamples) quantiles(g int, id string, q []float64) ([]float64, error) {
	s, err := NewSketch()
	if err != nil {
		return nil, fmt.Errorf("tables: sketch: %w", err)
	}
	for _, x := range ws[g][id] {
		if err := s.Add(x.value); err != nil {
			return nil, fmt.Errorf("tables: %s of worker %s: %w", gauges[g].name, id, err)
		}
	}
	vals, err := s.GetValuesAtQuantiles(q)
	if err != nil {
		return nil, fmt.Errorf("tables: sketch quantiles: %w", err)
	}
	return vals, nil
}
