package analyze

import (
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Spread95 is a {p50, p95, max} summary; each nil without values.
type Spread95 struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	Max *float64 `json:"max"`
}

// Spread4 is a {min, p50, p95, max} summary; each nil without values.
type Spread4 struct {
	Min *float64 `json:"min"`
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	Max *float64 `json:"max"`
}

// spread95 summarises values, reordering them (callers pass a slice they own).
func spread95(values []float64) Spread95 {
	if len(values) == 0 {
		return Spread95{}
	}
	return Spread95{P50: quantileInPlacePtr(values, 0.5), P95: quantileInPlacePtr(values, 0.95), Max: quantileInPlacePtr(values, 1)}
}

// spread4 summarises values, reordering them (callers pass a slice they own).
func spread4(values []float64) Spread4 {
	if len(values) == 0 {
		return Spread4{}
	}
	return Spread4{Min: quantileInPlacePtr(values, 0), P50: quantileInPlacePtr(values, 0.5), P95: quantileInPlacePtr(values, 0.95), Max: quantileInPlacePtr(values, 1)}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Arrivals is a case's arrivals block: what was offered,
// sent, completed (status ok), dropped and held for a slot (dropped excluded), failures by
// status (ok and dropped excluded), the highest recorded in_flight_at_dispatch, the intended
// arrival rate (N−1)/(last intended − first intended), req/s: the rate the schedule's own
// arrivals kept between its first and its last (nil for a closed loop, fewer than two intents
// or all at one instant; the offered load over the scheduled window is
// intervals.realized_offered_rate_per_second), dispatch-lag percentiles (ms), and the window
// and drain lengths (s).
type Arrivals struct {
	Mode                         string         `json:"mode"`
	Offered                      int            `json:"offered"`
	Sent                         int            `json:"sent"`
	Completed                    int            `json:"completed"`
	Dropped                      int            `json:"dropped"`
	Failed                       map[string]int `json:"failed"`
	HeldForSlot                  int            `json:"held_for_slot"`
	PeakInFlight                 *int64         `json:"peak_in_flight"`
	IntendedArrivalRatePerSecond *float64       `json:"intended_arrival_rate_per_second"`
	DispatchLagMs                Spread95       `json:"dispatch_lag_ms"`
	WindowSeconds                *float64       `json:"window_seconds"`
	DrainSeconds                 *float64       `json:"drain_seconds"`
}

// ArrivalMode returns the one arrival mode of the requests ("closed" for records without
// one), "mixed" when they differ, or the window's mode (else "closed") without requests.
func ArrivalMode(requests []Request, w *artifact.PhaseWindow) string {
	mode := ""
	for i := range requests {
		m := requests[i].ArrivalMode
		if m == "" {
			m = ModeClosed
		}
		if mode == "" {
			mode = m
		} else if m != mode {
			return "mixed"
		}
	}
	if mode == "" {
		if w != nil && w.ArrivalMode != "" {
			return w.ArrivalMode
		}
		return ModeClosed
	}
	return mode
}

// ArrivalsOf computes the arrivals block.
func ArrivalsOf(requests []Request, w *artifact.PhaseWindow) Arrivals {
	a := Arrivals{Mode: ArrivalMode(requests, w), Offered: len(requests), Failed: map[string]int{}}
	lags := getFloats(len(requests))
	defer func() { putFloats(lags) }()
	intents, lo, hi := 0, int64(0), int64(0) // how many intended_at_ns, their least and greatest
	for i := range requests {
		r := &requests[i]
		switch r.Status {
		case StatusOK:
			a.Completed++
		case StatusDropped:
			a.Dropped++
		default:
			a.Failed[r.Status]++
		}
		if heldForSlot(r) && r.Status != StatusDropped {
			a.HeldForSlot++
		}
		if r.InFlightAtDispatch != nil && (a.PeakInFlight == nil || *r.InFlightAtDispatch > *a.PeakInFlight) {
			a.PeakInFlight = i64Ptr(*r.InFlightAtDispatch)
		}
		if r.DispatchLagMS != nil && finite(*r.DispatchLagMS) {
			lags = append(lags, *r.DispatchLagMS)
		}
		if t := r.IntendedAtNS; t != nil {
			if intents == 0 {
				lo, hi = *t, *t
			}
			intents++
			lo, hi = min(lo, *t), max(hi, *t)
		}
	}
	a.Sent = a.Offered - a.Dropped
	if a.Mode != ModeClosed && intents >= 2 && hi > lo {
		a.IntendedArrivalRatePerSecond = f64Ptr(float64(intents-1) / (float64(hi-lo) / 1e9))
	}
	a.DispatchLagMs = spread95(lags)
	if w != nil && w.StartedAtNS != nil && w.WindowEndedAtNS != nil && w.DrainedAtNS != nil {
		a.WindowSeconds = f64Ptr(float64(max(*w.WindowEndedAtNS-*w.StartedAtNS, 0)) / 1e9)
		a.DrainSeconds = f64Ptr(float64(max(*w.DrainedAtNS-*w.WindowEndedAtNS, 0)) / 1e9)
	}
	return a
}

// MinMax is a {min, max} summary of integers; each nil without values.
type MinMax struct {
	Min *int64 `json:"min"`
	Max *int64 `json:"max"`
}

// Prompts is a case's prompts block: the prompt mode(s), how many distinct prompts
// (prompt_digest, else prompt_id) and prefix groups the measured requests used, the range of
// shared prefix lengths, and the phase window's prompts_digest.
type Prompts struct {
	Mode               *string `json:"mode"`
	DistinctPrompts    int     `json:"distinct_prompts"`
	PrefixGroupsUsed   int     `json:"prefix_groups_used"`
	SharedPrefixTokens MinMax  `json:"shared_prefix_tokens"`
	PromptsDigest      *string `json:"prompts_digest"`
}

// PromptsOf computes the prompts block.
func PromptsOf(requests []Request, w *artifact.PhaseWindow) Prompts {
	var p Prompts
	digests, promptIDs := 0, 0
	groups := map[int64]struct{}{}
	mode := ""
	for i := range requests {
		r := &requests[i]
		if r.PromptMode != "" {
			if mode == "" {
				mode = r.PromptMode
			} else if mode != r.PromptMode {
				mode = "mixed"
			}
		}
		switch {
		case r.PromptDigest != nil:
			digests++
		case r.PromptID != nil:
			promptIDs++
		}
		if r.PrefixGroup != nil {
			groups[*r.PrefixGroup] = struct{}{}
		}
		if t := r.SharedPrefixTokens; t != nil {
			if p.SharedPrefixTokens.Min == nil || *t < *p.SharedPrefixTokens.Min {
				p.SharedPrefixTokens.Min = i64Ptr(*t)
			}
			if p.SharedPrefixTokens.Max == nil || *t > *p.SharedPrefixTokens.Max {
				p.SharedPrefixTokens.Max = i64Ptr(*t)
			}
		}
	}
	if mode != "" {
		p.Mode = strPtr(mode)
	}
	// distinct prompt_digest values, plus distinct prompt_id values among the requests without one
	p.DistinctPrompts = digests - repeats(len(requests), func(i int) (string, bool) {
		if d := requests[i].PromptDigest; d != nil {
			return *d, true
		}
		return "", false
	})
	p.DistinctPrompts += promptIDs - repeats(len(requests), func(i int) (string, bool) {
		if r := &requests[i]; r.PromptDigest == nil && r.PromptID != nil {
			return *r.PromptID, true
		}
		return "", false
	})
	p.PrefixGroupsUsed = len(groups)
	if w != nil {
		p.PromptsDigest = w.PromptsDigest
	}
	return p
}

// ChunkGaps is a {p50, p95, max, n} summary of chunk gaps in ms.
type ChunkGaps struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	Max *float64 `json:"max"`
	N   int      `json:"n"`
}

// ChunkNote is the streaming block's note. Chunk gaps are chunk-level timing: a chunk can
// carry several tokens, so they are never reported as token-level latency.
const ChunkNote = "chunk-level timing: a streamed chunk can carry several tokens, so chunk gaps are not token-level latencies"

// Streaming is a case's chunk-level streaming block over its successful streamed responses
// with a TTFT: content chunks per response (gaps + 1), the gaps between content chunks (ms),
// and the mean tokens per chunk over the responses whose output tokens the server reported
// (nil without any).
type Streaming struct {
	Granularity              string    `json:"granularity"`
	Responses                int       `json:"responses"`
	ContentChunksPerResponse Spread95  `json:"content_chunks_per_response"`
	ChunkInterarrivalMs      ChunkGaps `json:"chunk_interarrival_ms"`
	MeanTokensPerChunk       *float64  `json:"mean_tokens_per_chunk"`
	Note                     string    `json:"note"`
}

// StreamingOf computes the streaming block.
func StreamingOf(requests []Request) Streaming {
	s := Streaming{Granularity: "chunk", Note: ChunkNote}
	streamed := func(r *Request) bool { return r.Status == StatusOK && r.Stream && r.TTFTMS != nil }
	for i := range requests {
		if streamed(&requests[i]) {
			s.Responses++
		}
	}
	chunks := getFloats(s.Responses)
	defer func() { putFloats(chunks) }()
	var tokens, counted int64
	gaps, hi := 0, math.Inf(-1) // finite gaps, their maximum
	for i := range requests {
		r := &requests[i]
		if !streamed(r) {
			continue
		}
		n := 0
		r.eachGap(func(g float64) {
			if finite(g) {
				n++
				if g > hi { // maxOf's rule: the first of equal maxima
					hi = g
				}
			}
		})
		gaps += n
		chunks = append(chunks, float64(n+1))
		if r.OutputTokenSource == artifact.TokenSourceServerUsage && r.OutputTokens != nil {
			tokens += *r.OutputTokens
			counted += int64(r.gapLen() + 1)
		}
	}
	s.ContentChunksPerResponse = spread95(chunks)
	g := spread95Counted(gaps, hi, func(yield func(float64)) {
		for i := range requests {
			if r := &requests[i]; streamed(r) {
				r.eachGap(yield)
			}
		}
	})
	s.ChunkInterarrivalMs = ChunkGaps{P50: g.P50, P95: g.P95, Max: g.Max, N: gaps}
	if counted > 0 {
		s.MeanTokensPerChunk = f64Ptr(float64(tokens) / float64(counted))
	}
	return s
}

// Tokens is a case's token totals over its successful requests, and the sources of their
// output token counts (sorted; "unknown" for records without one).
type Tokens struct {
	OutputTokens       int64    `json:"output_tokens"`
	TotalTokens        int64    `json:"total_tokens"`
	OutputTokenSources []string `json:"output_token_sources"`
}

// Lengths are the prompt and output token distributions of the completed requests.
type Lengths struct {
	PromptTokens Spread4 `json:"prompt_tokens"`
	OutputTokens Spread4 `json:"output_tokens"`
}

// TokensOf computes the tokens and lengths blocks over the successful requests.
func TokensOf(requests []Request) (Tokens, Lengths) {
	t := Tokens{OutputTokenSources: []string{}}
	sources := map[string]struct{}{}
	ok := 0
	for i := range requests {
		r := &requests[i]
		if r.Status != StatusOK {
			continue
		}
		ok++
		if r.OutputTokens != nil {
			t.OutputTokens += *r.OutputTokens
		}
		if r.TotalTokens != nil {
			t.TotalTokens += *r.TotalTokens
		}
		src := r.OutputTokenSource
		if src == "" {
			src = "unknown"
		}
		sources[src] = struct{}{}
	}
	for s := range sources {
		t.OutputTokenSources = append(t.OutputTokenSources, s)
	}
	sort.Strings(t.OutputTokenSources)
	// one buffer for both lengths, filled in turn
	values := getFloats(ok)
	defer func() { putFloats(values) }()
	spread := func(count func(r *Request) *int64) Spread4 {
		values = values[:0]
		for i := range requests {
			if r := &requests[i]; r.Status == StatusOK && count(r) != nil {
				values = append(values, float64(*count(r)))
			}
		}
		return spread4(values)
	}
	prompt := spread(func(r *Request) *int64 { return r.PromptTokens })
	output := spread(func(r *Request) *int64 { return r.OutputTokens })
	return t, Lengths{PromptTokens: prompt, OutputTokens: output}
}

// LegacyLatency is the report's quick latency_ms block over successful requests (ms, linear
// interpolation): e2e, e2e_from_intended and ttft at p50/p95/p99, first chunk at p50/p95.
// Keys are fixed; values nil without data.
func LegacyLatency(requests []Request) map[string]*float64 {
	ok := 0
	for i := range requests {
		if requests[i].Status == StatusOK {
			ok++
		}
	}
	// one buffer, refilled per metric: a quarter of the memory of four lists, for three more
	// passes over the requests
	values := getFloats(ok)
	defer func() { putFloats(values) }()
	out := map[string]*float64{}
	put := func(name string, metric func(values []float64, r *Request) []float64, levels ...int) {
		values = values[:0]
		for i := range requests {
			if r := &requests[i]; r.Status == StatusOK {
				values = metric(values, r)
			}
		}
		for _, l := range levels {
			out[name+"_p"+itoa(l)] = quantileInPlacePtr(values, float64(l)/100)
		}
	}
	client := func(key string) func([]float64, *Request) []float64 {
		return func(values []float64, r *Request) []float64 { return appendMetric(values, r, key) }
	}
	put("e2e", client(artifact.MetricE2E), 50, 95, 99)
	put("e2e_from_intended", client(artifact.MetricE2EFromIntended), 50, 95, 99)
	put("ttft", client(artifact.MetricTTFT), 50, 95, 99)
	put("first_chunk", func(values []float64, r *Request) []float64 {
		if r.FirstChunkLatencyMS != nil && finite(*r.FirstChunkLatencyMS) {
			return append(values, *r.FirstChunkLatencyMS)
		}
		return values
	}, 50, 95)
	return out
}

// appendMetric appends r's finite value of a client metric to values.
func appendMetric(values []float64, r *Request, key string) []float64 {
	if v := r.ClientMetric(key); v.OK && finite(v.Ms) {
		return append(values, v.Ms)
	}
	return values
}

func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
