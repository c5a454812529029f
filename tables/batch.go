package tables

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// SourceIteration is the source of the per-batch files: the engine steps imported from a
// profiler trace (infer.iteration records).
const SourceIteration = "iteration"

// WorkerType is the worker_type of every per-batch row: a worker is one engine (vLLM's
// engine core, one per data-parallel rank); worker_label is "<worker_id>/engine".
const WorkerType = "engine"

// NoRankLabel is the worker id of the steps of a trace that names no rank.
const NoRankLabel = "unranked"

// batch is one imported step (one batch) placed on the client clock.
type batch struct {
	it     *artifact.Iteration
	worker string
	rank   int64 // -1 for NoRankLabel (sorts last)
	id     int   // batch_id: the worker's steps numbered from 0 in start order
	// startNS and endNS are the step's host interval on the client clock (Unix ns).
	startNS, endNS int64
	// delay is inter_batch_delay (seconds): start minus the previous step's end on the same
	// worker in the same trace file; NaN for the first step of a file.
	delay float64
	kv    float64 // kv_page_utilization_ratio of the nearest scrape; NaN without one
}

// batches are the placed steps, ordered by worker (rank ascending, NoRankLabel last) then
// start; workers lists the worker ids in that order. When the steps cannot be placed on the
// client clock, or there are none, batches is empty and why says so.
type batches struct {
	rows    []batch
	workers []string
	clock   join.StepClock
	why     string
}

// placeBatches places the steps on the client clock (join.PlaceSteps with the artifact's
// header and clock alignments; every step's clock domain must be placeable), numbers each
// worker's steps, computes the inter-batch delays and takes each step's
// kv_page_utilization_ratio from the scrape of its worker (engine label = rank) nearest to
// the step's end.
func placeBatches(steps []*artifact.Iteration, h *artifact.ArtifactHeader, aligns []artifact.ClockAlignment, ws *workerSamples) batches {
	if len(steps) == 0 {
		return batches{why: whyNoSteps}
	}
	client, runID := join.ClientDomain(h), ""
	if h != nil {
		runID = h.Context.RunID
	}
	clocks := map[string]join.StepClock{}
	var out batches
	for _, s := range steps {
		d := s.Context.ClockDomain
		clk, ok := clocks[d]
		if !ok {
			clk = join.PlaceSteps(d, client, runID, aligns, s.StartNS)
			clocks[d] = clk
		}
		if !clk.OK {
			return batches{why: "imported steps not placed on the client clock (" + clk.Reason + "): record an infer.clock_alignment from " + d + " to " + client}
		}
		if len(out.rows) == 0 {
			out.clock = clk
		}
		b := batch{it: s, worker: NoRankLabel, rank: -1, startNS: s.StartNS + clk.OffsetNS, endNS: s.EndNS + clk.OffsetNS, delay: nan, kv: nan}
		if s.Rank != nil && *s.Rank >= 0 {
			b.rank, b.worker = *s.Rank, strconv.FormatInt(*s.Rank, 10)
		}
		out.rows = append(out.rows, b)
	}
	slices.SortStableFunc(out.rows, func(a, b batch) int {
		return cmp.Or(cmpRank(a.rank, b.rank), cmp.Compare(a.startNS, b.startNS), cmp.Compare(a.it.TraceFile, b.it.TraceFile), cmp.Compare(a.it.StepIndex, b.it.StepIndex))
	})
	kv := sortedSamples(ws, 2)
	for i := range out.rows {
		b := &out.rows[i]
		if i == 0 || out.rows[i-1].worker != b.worker {
			out.workers = append(out.workers, b.worker)
		} else {
			prev := &out.rows[i-1]
			b.id = prev.id + 1
			if prev.it.TraceFile == b.it.TraceFile {
				b.delay = float64(b.startNS-prev.endNS) / 1e9
			}
		}
		if v, ok := nearest(kv[b.worker], b.endNS); ok {
			b.kv = v
		}
	}
	return out
}

// cmpRank orders ranks ascending with -1 (no rank) last.
func cmpRank(a, b int64) int {
	if (a < 0) != (b < 0) {
		if a < 0 {
			return 1
		}
		return -1
	}
	return cmp.Compare(a, b)
}

// sortedSamples is gauge g's samples per worker, ordered by time (stable).
func sortedSamples(ws *workerSamples, g int) map[string][]sample {
	out := map[string][]sample{}
	if ws == nil {
		return out
	}
	for id, ss := range ws[g] {
		c := slices.Clone(ss)
		slices.SortStableFunc(c, func(a, b sample) int { return cmp.Compare(a.atNS, b.atNS) })
		out[id] = c
	}
	return out
}

// nearest is the value of the sample nearest in time to at (ss ordered by time; the
// earlier one on a tie); false without samples.
func nearest(ss []sample, at int64) (float64, bool) {
	if len(ss) == 0 {
		return 0, false
	}
	k := sort.Search(len(ss), func(i int) bool { return ss[i].atNS >= at })
	switch {
	case k == 0:
		return ss[0].value, true
	case k == len(ss):
		return ss[k-1].value, true
	case at-ss[k-1].atNS <= ss[k].atNS-at:
		return ss[k-1].value, true
	}
	return ss[k].value, true
}

// before is the value of the last sample at or before at (the gauge's value then); false
// when none is that early.
func before(ss []sample, at int64) (float64, bool) {
	k := sort.Search(len(ss), func(i int) bool { return ss[i].atNS > at })
	if k == 0 {
		return 0, false
	}
	return ss[k-1].value, true
}

// Batch phases (batch_phase).
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseMixed   = "mixed"
	PhaseUnknown = "unknown"
)

// phase is the step's batch_phase: mixed with both context (prefill) and generation
// (decode) requests, prefill or decode with only one kind, unknown when its annotation
// counts neither.
func (b *batch) phase() string {
	ctx := b.it.ContextRequests != nil && *b.it.ContextRequests > 0
	gen := b.it.GenRequests != nil && *b.it.GenRequests > 0
	switch {
	case ctx && gen:
		return PhaseMixed
	case ctx:
		return PhasePrefill
	case gen:
		return PhaseDecode
	}
	return PhaseUnknown
}

// sum2 is a + b of two optional counts: false when both are missing, a missing one 0.
func sum2(a, b *int64) (float64, bool) {
	if a == nil && b == nil {
		return 0, false
	}
	var n int64
	if a != nil {
		n += *a
	}
	if b != nil {
		n += *b
	}
	return float64(n), true
}

func opt(p *int64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return float64(*p), true
}

// batchColumn is one numeric column of worker_batch_metrics.csv (after worker_id,
// worker_type and batch_id; batch_phase is placed by its position).
type batchColumn struct {
	name, unit, definition string
	integer                bool
	// cdf: the column has a per-worker DDSketch CDF file in worker_plots.
	cdf   bool
	value func(*batch) (float64, bool)
}

// phaseColumn is batch_phase's place in batchColumns: the phase is written before the
// column of this index.
const phaseColumn = 7

// batchColumns are the written candidates in sangam's order (sangam's
// batch_num_unmasked_tokens, batch_decode_length_std and batch_sampling_time have no source
// and are listed in batchLeftOut); batch_wall_time is inferprobe's, last.
var batchColumns = []batchColumn{
	{name: "batch_num_tokens", unit: "tokens", integer: true, cdf: true,
		definition: "tokens the step processed: context (prefill) plus generation (decode) tokens of its annotation",
		value:      func(b *batch) (float64, bool) { return sum2(b.it.ContextTokens, b.it.GenTokens) }},
	{name: "batch_prompt_len", unit: "tokens", integer: true, cdf: true,
		definition: "context (prefill) tokens of the step's annotation",
		value:      func(b *batch) (float64, bool) { return opt(b.it.ContextTokens) }},
	{name: "batch_gen_len", unit: "tokens", integer: true, cdf: true,
		definition: "generation (decode) tokens of the step's annotation",
		value:      func(b *batch) (float64, bool) { return opt(b.it.GenTokens) }},
	{name: "batch_size", unit: "requests", integer: true, cdf: true,
		definition: "requests in the batch: context plus generation requests of the step's annotation",
		value:      func(b *batch) (float64, bool) { return sum2(b.it.ContextRequests, b.it.GenRequests) }},
	{name: "batch_execution_time", unit: "seconds", cdf: true,
		definition: "the step's GPU busy time: the union of its kernel, memcpy and memset intervals over all streams (gpu_busy_ns)",
		value:      func(b *batch) (float64, bool) { return float64(b.it.GPUBusyNS) / 1e9, true }},
	{name: "batch_token_throughput", unit: "tokens/second", cdf: true,
		definition: "batch_num_tokens / max(batch_execution_time, 1e-12 s)",
		value: func(b *batch) (float64, bool) {
			n, ok := sum2(b.it.ContextTokens, b.it.GenTokens)
			return n / max(float64(b.it.GPUBusyNS)/1e9, 1e-12), ok
		}},
	{name: "inter_batch_delay", unit: "seconds", cdf: true,
		definition: "the step's host start minus the previous step's host end on the same worker in the same trace file (negative when host ranges overlap); none for a file's first step",
		value:      func(b *batch) (float64, bool) { return b.delay, !math.IsNaN(b.delay) }},
	{name: "kv_page_utilization_ratio", unit: "ratio (0-1)",
		definition: "vllm:kv_cache_usage_perc of the worker's (engine label = rank) /metrics scrape nearest to the step's end",
		value:      func(b *batch) (float64, bool) { return b.kv, !math.IsNaN(b.kv) }},
	{name: "batch_wall_time", unit: "seconds",
		definition: "inferprobe's addition: the step's host (CPU annotation) wall time, end minus start",
		value:      func(b *batch) (float64, bool) { return float64(b.it.EndNS-b.it.StartNS) / 1e9, true }},
}

// batchLeftOut are sangam's per-batch columns no imported step observes, with why.
var batchLeftOut = []ColumnEntry{
	{Name: "batch_num_unmasked_tokens", Source: SourceNone, Why: "no source: a step annotation counts scheduled tokens, not the unmasked ones"},
	{Name: "batch_decode_length_std", Source: SourceNone, Why: "no source: a step annotation gives no per-request decode lengths"},
	{Name: "batch_sampling_time", Source: SourceNone, Why: "no source: the step's sampling is not told apart from its other GPU work"},
}

// workerBatchMetricsCSV is worker_batch_metrics.csv: header worker_id, worker_type,
// batch_id, the batchColumns with at least one value (batch_phase between
// inter_batch_delay and kv_page_utilization_ratio), one row per batch in (worker, batch_id)
// order; an integer column without a missing cell as integers, other numbers %.4f, a
// missing value an empty cell. included lists the written batchColumns indices.
func (bs *batches) workerBatchMetricsCSV() (out []byte, included []int) {
	counts := make([]int, len(batchColumns))
	for i := range bs.rows {
		for c, col := range batchColumns {
			if _, ok := col.value(&bs.rows[i]); ok {
				counts[c]++
			}
		}
	}
	head := []string{"worker_id", "worker_type", "batch_id"}
	for c, col := range batchColumns {
		if c == phaseColumn {
			head = append(head, "batch_phase")
		}
		if counts[c] > 0 {
			included = append(included, c)
			head = append(head, col.name)
		}
	}
	var csv CSV
	csv.Row(head...)
	row := make([]string, 0, len(head))
	for i := range bs.rows {
		b := &bs.rows[i]
		row = append(row[:0], b.worker, WorkerType, strconv.Itoa(b.id))
		for c, col := range batchColumns {
			if c == phaseColumn {
				row = append(row, b.phase())
			}
			if counts[c] == 0 {
				continue
			}
			v, ok := col.value(b)
			switch {
			case !ok:
				row = append(row, "")
			case col.integer && counts[c] == len(bs.rows):
				row = append(row, IntFormat(v))
			default:
				row = append(row, Fixed4(v))
			}
		}
		csv.Row(row...)
	}
	return csv.Bytes(), included
}
