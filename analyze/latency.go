package analyze

import (
	"math"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// Level is one quantile level of the latency block: its report key ("p50", "p99_9") and p.
type Level struct {
	Key string
	P   float64
}

// Levels are the report's quantile levels: p50, p90, p95 and p99.
var Levels = []Level{{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}}

// Estimate reasons.
const (
	ReasonNoValues                = "no_values"
	ReasonSuccessfulValuesMissing = "successful_values_missing"
)

// OrderInterval is a distribution-free confidence interval [X(LowerRank), X(UpperRank)] made
// of two order statistics (1-based ranks), with the values at those ranks in milliseconds.
// Coverage is what the ranks achieve for i.i.d. continuous data. UpperMs and WidthMs are nil
// when the upper rank falls among failures ranked worst (failure-penalized estimand).
type OrderInterval struct {
	LowerRank int      `json:"lower_rank"`
	UpperRank int      `json:"upper_rank"`
	LowerMs   float64  `json:"lower_ms"`
	UpperMs   *float64 `json:"upper_ms"`
	WidthMs   *float64 `json:"width_ms"`
	Coverage  float64  `json:"coverage"`
}

// Estimate is one quantile of one latency metric with how far it can be trusted. ValueMs is nil
// with Reason "no_values" when there is nothing to rank, nil with "successful_values_missing"
// when a successful request lacks the value (failure-penalized only), and nil with Penalized
// when the level falls in the failure mass. N is the sample count (successful values, or every
// offered request when penalized); Sufficient ⇔ N ≥ NMin under the rule; NMinExists is Le
// Boudec's narrowest-interval minimum. ObservedLowerBoundMs is set only for client.e2e in the
// failure mass when every failure is a timeout with an elapsed time.
type Estimate struct {
	ValueMs              *float64       `json:"value_ms"`
	N                    int            `json:"n"`
	Sufficient           bool           `json:"sufficient"`
	NMin                 int            `json:"n_min"`
	NMinExists           int            `json:"n_min_exists"`
	Penalized            bool           `json:"penalized"`
	ObservedLowerBoundMs *float64       `json:"observed_lower_bound_ms"`
	Reason               *string        `json:"reason"`
	Interval             *OrderInterval `json:"interval"`
}

func strPtr(s string) *string   { return &s }
func f64Ptr(v float64) *float64 { return &v }
func intPtr(v int) *int         { return &v }
func boolPtr(v bool) *bool      { return &v }
func i64Ptr(v int64) *int64     { return &v }

// minimums returns n_min under rule and Le Boudec's n_min_exists for p; both are 0 when p or
// the rule is invalid (callers use fixed, valid levels).
func minimums(p float64, rule Rule) (nmin, nminExists int) {
	nmin, _ = MinimumN(p, rule)
	nminExists, _ = MinimumN(p, existsRule)
	return nmin, nminExists
}

// interval builds the rule's interval over sorted values with `penalized` failures ranked
// above every value; nil when the ranks do not exist or the lower rank is among failures.
func interval(sorted []float64, penalized int, p float64, rule Rule) *OrderInterval {
	n := len(sorted) + penalized
	j, k, cov, ok := ranks(n, p, rule)
	if !ok || j > len(sorted) {
		return nil
	}
	iv := &OrderInterval{LowerRank: j, UpperRank: k, LowerMs: sorted[j-1], Coverage: cov}
	if k <= len(sorted) {
		iv.UpperMs = f64Ptr(sorted[k-1])
		iv.WidthMs = f64Ptr(sorted[k-1] - sorted[j-1])
	}
	return iv
}

// EstimateSuccessful estimates the p-quantile over successful requests' values (ms, any
// order): the point estimate by Quantile, N = len(values), and rule's interval when it exists.
// With no values, ValueMs is nil and Reason is "no_values". p must be in (0, 1).
func EstimateSuccessful(values []float64, p float64, rule Rule) Estimate {
	sorted := values
	if !sort.Float64sAreSorted(values) {
		sorted = sortedCopy(values)
	}
	return estimateSuccessfulSorted(sorted, p, rule)
}

func estimateSuccessfulSorted(sorted []float64, p float64, rule Rule) Estimate {
	nmin, nex := minimums(p, rule)
	e := Estimate{N: len(sorted), NMin: nmin, NMinExists: nex}
	e.Sufficient = nmin > 0 && e.N >= nmin
	if len(sorted) == 0 {
		e.Reason = strPtr(ReasonNoValues)
		return e
	}
	e.ValueMs = quantilePtr(sorted, p)
	e.Interval = interval(sorted, 0, p, rule)
	return e
}

// PenalizedInput is what the failure-penalized estimand ranks: the successful requests'
// values (ms), how many successful requests lack the value, how many offered requests did
// not succeed (ranked worst), and — only for client.e2e when every failure is a timeout with
// an elapsed time — those elapsed times (ms); otherwise TimeoutElapsedMs is nil.
type PenalizedInput struct {
	Values            []float64
	SuccessfulMissing int
	Failures          int
	TimeoutElapsedMs  []float64
}

// levelTolerance absorbs float rounding in p·offered/successes (95 of 100 at p95 is level 1).
const levelTolerance = 1e-12

// EstimatePenalized estimates the p-quantile over every offered request with each one that
// did not succeed ranked worst: N = offered; the value is the successful
// values' quantile at level p·offered/successes, and above level 1 it falls in the failure
// mass (Penalized, ValueMs nil). The interval ranks failures above all values. When a
// successful request lacks the value nothing can be ranked: ValueMs nil, Reason
// "successful_values_missing", no interval. With no requests, Reason "no_values". In the
// failure mass, a non-nil in.TimeoutElapsedMs with one entry per failure gives the observed
// lower bound: the p-quantile of the successful values together with the elapsed times.
func EstimatePenalized(in PenalizedInput, p float64, rule Rule) Estimate {
	sorted := in.Values
	if !sort.Float64sAreSorted(sorted) {
		sorted = sortedCopy(sorted)
	}
	return estimatePenalizedSorted(sorted, in.SuccessfulMissing, in.Failures, in.TimeoutElapsedMs, p, rule)
}

func estimatePenalizedSorted(sorted []float64, missing, failures int, timeouts []float64, p float64, rule Rule) Estimate {
	offered := len(sorted) + missing + failures
	nmin, nex := minimums(p, rule)
	e := Estimate{N: offered, NMin: nmin, NMinExists: nex}
	e.Sufficient = nmin > 0 && offered >= nmin
	if offered == 0 {
		e.Reason = strPtr(ReasonNoValues)
		return e
	}
	if missing > 0 {
		e.Reason = strPtr(ReasonSuccessfulValuesMissing)
		return e
	}
	level := math.Inf(1)
	if len(sorted) > 0 {
		level = p * float64(offered) / float64(len(sorted))
	}
	if level > 1 && level <= 1+levelTolerance {
		level = 1
	}
	if level > 1 {
		e.Penalized = true
		if failures > 0 && len(timeouts) == failures {
			all := make([]float64, 0, len(sorted)+len(timeouts))
			all = append(all, sorted...)
			all = append(all, timeouts...)
			sort.Float64s(all)
			e.ObservedLowerBoundMs = quantilePtr(all, p)
		}
	} else {
		e.ValueMs = quantilePtr(sorted, level)
	}
	e.Interval = interval(sorted, failures, p, rule)
	return e
}

// ServerMetrics are the per-request server metrics, reported only when spans were joined.
var ServerMetrics = []string{"server.ttft", "server.e2e", "server.queue"}

// MetricLatency is one metric's quantiles, keyed by level ("p50" …): over the successful
// requests, and over every offered request with failures ranked worst. SuccessfulMissing
// counts successful requests without a value for the metric (non-streamed TTFT, TPOT without
// server usage or with one output token, no joined span).
type MetricLatency struct {
	Boundary          string              `json:"boundary"`
	SuccessfulMissing int                 `json:"successful_missing"`
	Successful        map[string]Estimate `json:"successful"`
	FailurePenalized  map[string]Estimate `json:"failure_penalized"`
}

// Spread is a {min, p50, max} summary; each nil when there are no values.
type Spread struct {
	Min *float64 `json:"min"`
	P50 *float64 `json:"p50"`
	Max *float64 `json:"max"`
}

// UnsuccessfulStatus is how long the requests that ended with one non-ok status ran before
// they did: the time until inferprobe saw them end (e2e_latency_ms, or send → end when that
// is null), not a latency they would have had — only for a timeout is it a lower bound on
// one. A dropped request was never sent and has no elapsed time (ElapsedMissing).
type UnsuccessfulStatus struct {
	Count          int    `json:"count"`
	ElapsedMs      Spread `json:"elapsed_ms"`
	ElapsedMissing int    `json:"elapsed_missing"`
}

// LatencyBlock is a case's latency block: the sufficiency rule, each
// metric's estimates, and the unsuccessful requests' elapsed times by status ({} when every
// request succeeded).
type LatencyBlock struct {
	Rule         Rule                          `json:"rule"`
	Metrics      map[string]MetricLatency      `json:"metrics"`
	Unsuccessful map[string]UnsuccessfulStatus `json:"unsuccessful"`
}

// elapsedMs is a request's recorded e2e time or, for a request sent and abandoned, send →
// end; nil for a dropped request or without times.
func elapsedMs(r *Request) *float64 {
	if r.E2ELatencyMS != nil {
		return r.E2ELatencyMS
	}
	if r.Status == StatusDropped || r.StartedAtNS == nil || r.EndedAtNS == nil || *r.EndedAtNS < *r.StartedAtNS {
		return nil
	}
	return f64Ptr(float64(*r.EndedAtNS-*r.StartedAtNS) / 1e6)
}

// LatencyOf computes the latency block over a case's measured requests: the client metrics
// always, the server metrics when withServer (spans were joined), under rule at Levels.
func LatencyOf(requests []Request, rule Rule, withServer bool) LatencyBlock {
	keys := artifact.ClientMetrics
	if withServer {
		keys = append(append([]string{}, artifact.ClientMetrics...), ServerMetrics...)
	}
	failures := 0
	var timeouts []float64
	allTimeouts := true
	for i := range requests {
		r := &requests[i]
		if r.Status == StatusOK {
			continue
		}
		failures++
		if r.Status != StatusTimeout || r.E2ELatencyMS == nil {
			allTimeouts = false
		} else {
			timeouts = append(timeouts, *r.E2ELatencyMS)
		}
	}
	if failures == 0 || !allTimeouts {
		timeouts = nil
	}
	block := LatencyBlock{Rule: rule, Metrics: make(map[string]MetricLatency, len(keys)), Unsuccessful: unsuccessfulOf(requests)}
	values := getFloats(len(requests))
	defer func() { putFloats(values) }()
	for _, key := range keys {
		values = values[:0]
		missing := 0
		for i := range requests {
			r := &requests[i]
			if r.Status != StatusOK {
				continue
			}
			v := requestValue(key, r)
			if v.OK && finite(v.Ms) {
				values = append(values, v.Ms)
			} else {
				missing++
			}
		}
		sortFloats(values)
		var elapsed []float64
		if key == artifact.MetricE2E {
			elapsed = timeouts
		}
		m := MetricLatency{
			Boundary:          key[:strings.IndexByte(key, '.')],
			SuccessfulMissing: missing,
			Successful:        make(map[string]Estimate, len(Levels)),
			FailurePenalized:  make(map[string]Estimate, len(Levels)),
		}
		for _, l := range Levels {
			m.Successful[l.Key] = estimateSuccessfulSorted(values, l.P, rule)
			m.FailurePenalized[l.Key] = estimatePenalizedSorted(values, missing, failures, elapsed, l.P, rule)
		}
		block.Metrics[key] = m
	}
	return block
}

// unsuccessfulOf groups the non-ok requests by status with their elapsed times.
func unsuccessfulOf(requests []Request) map[string]UnsuccessfulStatus {
	elapsed := map[string][]float64{}
	out := map[string]UnsuccessfulStatus{}
	for i := range requests {
		r := &requests[i]
		if r.Status == StatusOK {
			continue
		}
		s := out[r.Status]
		s.Count++
		if e := elapsedMs(r); e != nil && !math.IsNaN(*e) && !math.IsInf(*e, 0) {
			elapsed[r.Status] = append(elapsed[r.Status], *e)
		} else {
			s.ElapsedMissing++
		}
		out[r.Status] = s
	}
	for status, s := range out {
		s.ElapsedMs = spreadOf(elapsed[status])
		out[status] = s
	}
	return out
}

// spreadOf returns {min, p50, max} of values (any order).
func spreadOf(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	sorted := sortedCopy(values)
	return Spread{Min: f64Ptr(sorted[0]), P50: quantilePtr(sorted, 0.5), Max: f64Ptr(sorted[len(sorted)-1])}
}
