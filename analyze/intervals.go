package analyze

import "math"

// Interval kinds and numerator cohorts.
const (
	KindScheduledWindow = "scheduled_window"
	KindDispatchWindow  = "dispatch_window"
	KindDrain           = "drain"
	KindMeasuredSpan    = "measured_span"
	KindRequestSpan     = "request_span"

	CohortArrival     = "arrival_cohort"
	CohortAllMeasured = "all_measured"
)

// Rate reasons: why a case has no rate interval, or not the first choice.
const (
	RateReasonEndpointUndeclared    = "endpoint_undeclared"
	RateReasonNoPhaseWindow         = "no_phase_window"
	RateReasonPhaseWindowMissing    = "phase_window_missing"
	RateReasonPhaseWindowIncomplete = "phase_window_incomplete"
)

// MeasuredInterval is a span of client wall time named by what it is (Kind) and by which
// requests a rate over it counts (NumeratorCohort). Times are Unix epoch ns; Seconds is nil
// when the interval has no positive length, so nothing divides by zero.
type MeasuredInterval struct {
	Kind            string   `json:"kind"`
	StartedAtNs     int64    `json:"started_at_ns"`
	EndedAtNs       int64    `json:"ended_at_ns"`
	Seconds         *float64 `json:"seconds"`
	NumeratorCohort string   `json:"numerator_cohort"`
}

// NewInterval returns the interval [start, end] (ns) with its length in seconds, nil when
// end ≤ start.
func NewInterval(kind string, start, end int64, cohort string) *MeasuredInterval {
	iv := &MeasuredInterval{Kind: kind, StartedAtNs: start, EndedAtNs: end, NumeratorCohort: cohort}
	if end > start {
		iv.Seconds = f64Ptr(float64(end-start) / 1e9)
	}
	return iv
}

// Rate returns count per second of iv; nil (never 0 or ±Inf) when iv is nil or has no length.
func Rate(count float64, iv *MeasuredInterval) *float64 {
	if iv == nil || iv.Seconds == nil || *iv.Seconds <= 0 || math.IsInf(*iv.Seconds, 0) {
		return nil
	}
	return f64Ptr(count / *iv.Seconds)
}

// Intervals are the case's intervals and the one every rate divides by (Rate, nil when the
// case has none, with RateReason saying why; RateReason is also set when Rate is the
// request_span fallback). ConfiguredRatePerSecond is --rate (or burst size/interval);
// RealizedOfferedRatePerSecond = scheduled arrivals (or the record count) per second of the
// scheduled window.
type Intervals struct {
	Rate                         *MeasuredInterval `json:"rate"`
	ScheduledWindow              *MeasuredInterval `json:"scheduled_window"`
	DispatchWindow               *MeasuredInterval `json:"dispatch_window"`
	Drain                        *MeasuredInterval `json:"drain"`
	MeasuredSpan                 *MeasuredInterval `json:"measured_span"`
	RequestSpan                  *MeasuredInterval `json:"request_span"`
	ConfiguredRatePerSecond      *float64          `json:"configured_rate_per_second"`
	RealizedOfferedRatePerSecond *float64          `json:"realized_offered_rate_per_second"`
	RateReason                   *string           `json:"rate_reason"`
}

// intervalsOf chooses the rate interval.
func intervalsOf(in *CaseInput) Intervals {
	iv := Intervals{
		RequestSpan:             requestSpan(in.Requests),
		ConfiguredRatePerSecond: configuredRate(in.Arrival),
	}
	w := in.Window
	switch {
	case w == nil && in.WorkloadRecorded:
		iv.RateReason = strPtr(RateReasonPhaseWindowMissing)
		return iv
	case w == nil:
		iv.Rate = iv.RequestSpan
		iv.RateReason = strPtr(RateReasonNoPhaseWindow)
		return iv
	case w.StartedAtNS == nil || w.DrainedAtNS == nil:
		iv.RateReason = strPtr(RateReasonPhaseWindowIncomplete)
		return iv
	}
	start, drained := *w.StartedAtNS, *w.DrainedAtNS
	iv.MeasuredSpan = NewInterval(KindMeasuredSpan, start, drained, CohortAllMeasured)
	iv.DispatchWindow = dispatchWindow(in.Requests)
	if w.WindowEndedAtNS != nil {
		iv.Drain = NewInterval(KindDrain, *w.WindowEndedAtNS, drained, CohortAllMeasured)
	}
	mode := w.ArrivalMode
	if mode == "" || mode == ModeClosed {
		iv.Rate = iv.MeasuredSpan
		return iv
	}
	endpoint := w.ScheduledEndpointOffsetNS
	if endpoint == nil {
		_, endpoint = in.recomputed()
	}
	if endpoint == nil {
		iv.RateReason = strPtr(RateReasonEndpointUndeclared)
		return iv
	}
	iv.ScheduledWindow = NewInterval(KindScheduledWindow, start, start+*endpoint, CohortArrival)
	iv.Rate = iv.ScheduledWindow
	offered := int64(len(in.Requests))
	if w.ScheduledArrivals != nil && *w.ScheduledArrivals != 0 {
		offered = *w.ScheduledArrivals
	}
	iv.RealizedOfferedRatePerSecond = Rate(float64(offered), iv.ScheduledWindow)
	return iv
}

// dispatchWindow spans the first to the last send of the requests that were sent.
func dispatchWindow(requests []Request) *MeasuredInterval {
	var lo, hi int64
	found := false
	for i := range requests {
		r := &requests[i]
		if r.Status == StatusDropped || r.StartedAtNS == nil {
			continue
		}
		s := *r.StartedAtNS
		if !found || s < lo {
			lo = s
		}
		if !found || s > hi {
			hi = s
		}
		found = true
	}
	if !found {
		return nil
	}
	return NewInterval(KindDispatchWindow, lo, hi, CohortAllMeasured)
}

// requestSpan spans the first start to the last end over every measured request that has
// both times, failed ones included.
func requestSpan(requests []Request) *MeasuredInterval {
	lo, hi, found := startEndSpan(requests, false)
	if !found {
		return nil
	}
	return NewInterval(KindRequestSpan, lo, hi, CohortAllMeasured)
}

// startEndSpan returns the first start and the last end over the requests that have both
// times (only the successful ones when okOnly); found is false when none has.
func startEndSpan(requests []Request, okOnly bool) (lo, hi int64, found bool) {
	for i := range requests {
		r := &requests[i]
		if r.StartedAtNS == nil || r.EndedAtNS == nil || (okOnly && r.Status != StatusOK) {
			continue
		}
		if !found || *r.StartedAtNS < lo {
			lo = *r.StartedAtNS
		}
		if !found || *r.EndedAtNS > hi {
			hi = *r.EndedAtNS
		}
		found = true
	}
	return lo, hi, found
}

// Throughput is the successful requests' rates per second of the case's rate interval: every
// field is nil (never 0) when there is no rate interval or it has no length. There is no
// duration_seconds in analysis version 2.
type Throughput struct {
	IntervalKind          *string  `json:"interval_kind"`
	IntervalSeconds       *float64 `json:"interval_seconds"`
	NumeratorCohort       *string  `json:"numerator_cohort"`
	RequestsPerSecond     *float64 `json:"requests_per_second"`
	OutputTokensPerSecond *float64 `json:"output_tokens_per_second"`
	TotalTokensPerSecond  *float64 `json:"total_tokens_per_second"`
}

// ThroughputOf divides the successful requests, their output tokens and their total tokens by
// the rate interval.
func ThroughputOf(requests []Request, rate *MeasuredInterval) Throughput {
	var t Throughput
	if rate == nil {
		return t
	}
	t.IntervalKind = strPtr(rate.Kind)
	t.IntervalSeconds = rate.Seconds
	t.NumeratorCohort = strPtr(rate.NumeratorCohort)
	ok := 0
	var out, total int64
	for i := range requests {
		r := &requests[i]
		if r.Status != StatusOK {
			continue
		}
		ok++
		if r.OutputTokens != nil {
			out += *r.OutputTokens
		}
		if r.TotalTokens != nil {
			total += *r.TotalTokens
		}
	}
	t.RequestsPerSecond = Rate(float64(ok), rate)
	t.OutputTokensPerSecond = Rate(float64(out), rate)
	t.TotalTokensPerSecond = Rate(float64(total), rate)
	return t
}
