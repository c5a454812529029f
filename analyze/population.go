package analyze

import (
	"fmt"
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Interval kinds and numerator cohorts (stormlog.md §3.3).
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

// Arrival modes.
const (
	ModeClosed    = "closed"
	ModeFixedRate = "fixed-rate"
	ModePoisson   = "poisson"
	ModeBurst     = "burst"
	ModeReplay    = "replay"
)

// endSlackNs: a request may end up to 1 s after the recorded drain end (the window record is
// written after the drain returns).
const endSlackNs = 1_000_000_000

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

// Population counts a case's measured requests by what happened to them; every status lands
// in exactly one count (stormlog.md §3.3):
//
//	offered  = dropped + sent
//	sent     = unreachable + delivery_unknown + rejected + accepted
//	accepted = successful + failed + timed_out + cancelled + Σ other
//	censored = timed_out + cancelled
//
// Scheduled is the open loop's scheduled arrivals (nil for a closed loop). ServerAdmitted
// counts non-dropped requests a server source confirmed (nil without a server source);
// ServerEvidenceCoverage = (admitted ∩ accepted)/accepted (nil without a source or when
// nothing was accepted). CohortValid is false when any hard cohort check failed; Issues lists
// the hard issues, then the soft notes (request_index_unrecorded,
// abandoned_requests_at_start: n).
type Population struct {
	Offered                int            `json:"offered"`
	Scheduled              *int64         `json:"scheduled"`
	Dropped                int            `json:"dropped"`
	Sent                   int            `json:"sent"`
	Unreachable            int            `json:"unreachable"`
	DeliveryUnknown        int            `json:"delivery_unknown"`
	Rejected               int            `json:"rejected"`
	Accepted               int            `json:"accepted"`
	Successful             int            `json:"successful"`
	Failed                 int            `json:"failed"`
	TimedOut               int            `json:"timed_out"`
	Cancelled              int            `json:"cancelled"`
	Censored               int            `json:"censored"`
	Other                  map[string]int `json:"other"`
	ServerAdmitted         *int           `json:"server_admitted"`
	ServerEvidenceCoverage *float64       `json:"server_evidence_coverage"`
	CohortValid            bool           `json:"cohort_valid"`
	Issues                 []string       `json:"issues"`
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

// ArrivalSpec is a case's arrival shape from the infer.workload record. TraceArrivals is a
// replay trace's arrival count.
type ArrivalSpec struct {
	Mode                 string
	RatePerSecond        *float64
	BurstSize            *int64
	BurstIntervalSeconds *float64
	TraceArrivals        *int64
}

// Measurement is the workload record's measurement limits.
type Measurement struct {
	RequestCount    *int64
	DurationSeconds *float64
}

// ScheduleFunc recomputes an open-loop case's schedule from its seeded workload when that
// needs the generator itself (a Poisson draw, a replay trace's offsets): the number of
// arrivals and the scheduled endpoint offset in ns (nil when undeclared). ok is false when it
// cannot.
type ScheduleFunc func(caseID string) (arrivals int64, endpointNs *int64, ok bool)

// CaseInput is what populations and intervals are computed from: the case's measured
// requests, its measured phase window (nil when the artifact has none), whether the artifact
// recorded a workload, and the case's arrival spec and measurement limits from it (nil when
// unknown). Scheduler, when set, recomputes what ScheduleFromWorkload cannot. ServerSource
// says whether any server evidence source (span receiver, span file, execution records) ran.
type CaseInput struct {
	CaseID           string
	Requests         []Request
	Window           *artifact.PhaseWindow
	WorkloadRecorded bool
	Arrival          *ArrivalSpec
	Measurement      *Measurement
	Seed             int64
	Scheduler        ScheduleFunc
	ServerSource     bool
}

// ScheduleFromWorkload recomputes what an open-loop schedule implies without running its
// generator (stormlog.md §3.3 "Scheduled endpoint", §5 items 1, 3): the number of arrivals
// and the scheduled endpoint offset (ns), each nil when it cannot be known this way.
//   - fixed-rate r: count N → N arrivals ending at N/r; duration D → ⌈D·r⌉ arrivals ending
//     at D; both → the limit that binds first.
//   - burst b every I s: count N → N arrivals ending at ⌈N/b⌉·I (the next burst boundary);
//     duration D → ⌈D/I⌉·b arrivals ending at D.
//   - poisson: count N → N arrivals (the endpoint needs the (N+1)-th draw); duration D → the
//     endpoint D (the count needs the draws).
//   - replay: count N → min(N, trace arrivals); duration D → the endpoint D; without a
//     duration the endpoint is undeclared.
//
// Closed loops have no schedule (nil, nil).
func ScheduleFromWorkload(a ArrivalSpec, m Measurement) (arrivals *int64, endpointNs *int64) {
	count := m.RequestCount
	if count != nil && *count < 0 {
		count = nil
	}
	var dur *float64
	if m.DurationSeconds != nil && *m.DurationSeconds > 0 && !math.IsInf(*m.DurationSeconds, 0) {
		dur = m.DurationSeconds
	}
	ns := func(seconds float64) *int64 {
		if !(seconds >= 0) || seconds > math.MaxInt64/1e9 {
			return nil
		}
		return i64Ptr(int64(math.Round(seconds * 1e9)))
	}
	positive := func(v *float64) bool { return v != nil && *v > 0 && !math.IsInf(*v, 0) }
	switch a.Mode {
	case ModeFixedRate:
		if !positive(a.RatePerSecond) {
			return nil, nil
		}
		r := *a.RatePerSecond
		switch {
		case count != nil && dur != nil:
			byDuration := int64(math.Ceil(*dur*r - 1e-9))
			if *count < byDuration {
				return i64Ptr(*count), ns(float64(*count) / r)
			}
			return i64Ptr(byDuration), ns(*dur)
		case count != nil:
			return i64Ptr(*count), ns(float64(*count) / r)
		case dur != nil:
			return i64Ptr(int64(math.Ceil(*dur*r - 1e-9))), ns(*dur)
		}
	case ModeBurst:
		if a.BurstSize == nil || *a.BurstSize <= 0 || !positive(a.BurstIntervalSeconds) {
			return nil, nil
		}
		b, iv := *a.BurstSize, *a.BurstIntervalSeconds
		var byDuration int64 = -1
		if dur != nil {
			byDuration = int64(math.Ceil(*dur/iv-1e-9)) * b
		}
		switch {
		case count != nil && (dur == nil || *count < byDuration):
			bursts := (*count + b - 1) / b
			return i64Ptr(*count), ns(float64(bursts) * iv)
		case dur != nil:
			return i64Ptr(byDuration), ns(*dur)
		}
	case ModePoisson:
		switch {
		case count != nil && dur == nil:
			return i64Ptr(*count), nil
		case dur != nil:
			return nil, ns(*dur)
		}
	case ModeReplay:
		var n *int64
		if a.TraceArrivals != nil && dur == nil {
			n = i64Ptr(*a.TraceArrivals)
			if count != nil && *count < *n {
				n = i64Ptr(*count)
			}
		}
		if dur != nil {
			return nil, ns(*dur)
		}
		return n, nil
	}
	return nil, nil
}

// configuredRate returns --rate, or burst size/interval, from the workload's arrival spec.
func configuredRate(a *ArrivalSpec) *float64 {
	if a == nil {
		return nil
	}
	switch a.Mode {
	case ModeFixedRate, ModePoisson:
		if a.RatePerSecond != nil && !math.IsNaN(*a.RatePerSecond) && !math.IsInf(*a.RatePerSecond, 0) {
			return f64Ptr(*a.RatePerSecond)
		}
	case ModeBurst:
		if a.BurstSize != nil && a.BurstIntervalSeconds != nil && *a.BurstIntervalSeconds > 0 && !math.IsInf(*a.BurstIntervalSeconds, 0) {
			return f64Ptr(float64(*a.BurstSize) / *a.BurstIntervalSeconds)
		}
	}
	return nil
}

// recomputed returns the schedule implied by the workload: analytic first, then Scheduler.
func (in *CaseInput) recomputed() (arrivals *int64, endpointNs *int64) {
	if in.Arrival == nil || in.Measurement == nil || in.Arrival.Mode == ModeClosed || in.Arrival.Mode == "" {
		return nil, nil
	}
	arrivals, endpointNs = ScheduleFromWorkload(*in.Arrival, *in.Measurement)
	if (arrivals == nil || endpointNs == nil) && in.Scheduler != nil {
		if n, end, ok := in.Scheduler(in.CaseID); ok {
			if arrivals == nil {
				arrivals = i64Ptr(n)
			}
			if endpointNs == nil {
				endpointNs = end
			}
		}
	}
	return arrivals, endpointNs
}

// Populate computes a case's population, cohort checks and intervals (stormlog.md §3.3).
func Populate(in CaseInput) (Population, Intervals) {
	scheduled := (*int64)(nil)
	if in.Window != nil {
		scheduled = in.Window.ScheduledArrivals
	} else if in.WorkloadRecorded {
		scheduled, _ = in.recomputed()
	}
	hard, soft := cohortIssues(in.Requests, in.Window, scheduled)
	if in.Window == nil && in.WorkloadRecorded {
		hard = append(hard, RateReasonPhaseWindowMissing)
	}
	if in.Window != nil && (in.Window.StartedAtNS == nil || in.Window.DrainedAtNS == nil) {
		hard = append(hard, RateReasonPhaseWindowIncomplete)
	}
	pop := countPopulation(in.Requests, in.ServerSource)
	pop.Scheduled = scheduled
	pop.CohortValid = len(hard) == 0
	pop.Issues = append(append([]string{}, hard...), soft...)
	return pop, intervalsOf(&in)
}

// countPopulation counts requests by status; the identities of Population always hold.
func countPopulation(requests []Request, serverSource bool) Population {
	p := Population{Offered: len(requests), Other: map[string]int{}}
	admitted, admittedAccepted := 0, 0
	for i := range requests {
		r := &requests[i]
		accepted := true
		switch r.Status {
		case StatusOK:
			p.Successful++
		case StatusError:
			p.Failed++
		case StatusTimeout:
			p.TimedOut++
		case StatusCancelled:
			p.Cancelled++
		case StatusDropped:
			p.Dropped++
			accepted = false
		case StatusUnreachable:
			p.Unreachable++
			accepted = false
		case StatusDeliveryUnknown:
			p.DeliveryUnknown++
			accepted = false
		case StatusRejected:
			p.Rejected++
			accepted = false
		default:
			p.Other[r.Status]++
		}
		if r.ServerAdmitted && r.Status != StatusDropped {
			admitted++
			if accepted {
				admittedAccepted++
			}
		}
	}
	p.Sent = p.Offered - p.Dropped
	p.Accepted = p.Sent - p.Unreachable - p.DeliveryUnknown - p.Rejected
	p.Censored = p.TimedOut + p.Cancelled
	if serverSource {
		p.ServerAdmitted = intPtr(admitted)
		p.ServerEvidenceCoverage = share(admittedAccepted, p.Accepted)
	}
	return p
}

// cohortIssues returns the hard cohort problems and the soft notes.
func cohortIssues(requests []Request, w *artifact.PhaseWindow, scheduled *int64) (hard, soft []string) {
	hard = []string{}
	ids := make(map[string]struct{}, len(requests))
	xids := make(map[string]struct{}, len(requests))
	dupIDs, dupXIDs := 0, 0
	for i := range requests {
		if _, seen := ids[requests[i].RequestID]; seen {
			dupIDs++
		}
		ids[requests[i].RequestID] = struct{}{}
		if x := requests[i].XRequestID; x != nil {
			if _, seen := xids[*x]; seen {
				dupXIDs++
			}
			xids[*x] = struct{}{}
		}
	}
	if dupIDs > 0 {
		hard = append(hard, fmt.Sprintf("duplicate_request_id: %d", dupIDs))
	}
	if dupXIDs > 0 {
		hard = append(hard, fmt.Sprintf("duplicate_x_request_id: %d", dupXIDs))
	}
	hard = append(hard, indexIssues(requests, scheduled)...)
	sessions := map[string]bool{}
	for i := range requests {
		sessions[requests[i].SessionID] = true
	}
	if w != nil {
		sessions[w.SessionID] = true
	}
	if len(sessions) > 1 {
		hard = append(hard, "session_mismatch")
	}
	var start, drained *int64
	if w != nil {
		start, drained = w.StartedAtNS, w.DrainedAtNS
	}
	outside := 0
	for i := range requests {
		if outsideWindow(&requests[i], start, drained) {
			outside++
		}
	}
	if outside > 0 {
		hard = append(hard, fmt.Sprintf("outside_window: %d", outside))
	}
	soft = []string{}
	for i := range requests {
		if requests[i].RequestIndex == nil {
			soft = append(soft, "request_index_unrecorded")
			break
		}
	}
	if w != nil && w.AbandonedRequests != nil && w.AbandonedRequests.StillRunning != 0 {
		soft = append(soft, fmt.Sprintf("abandoned_requests_at_start: %d", w.AbandonedRequests.StillRunning))
	}
	return hard, soft
}

// indexIssues checks every arrival appears exactly once: no index repeated, none missing,
// none out of range. Without indexes on every record, a known schedule still needs one
// record per arrival.
func indexIssues(requests []Request, scheduled *int64) []string {
	indexes := make([]int64, 0, len(requests))
	for i := range requests {
		if requests[i].RequestIndex != nil {
			indexes = append(indexes, *requests[i].RequestIndex)
		}
	}
	if len(indexes) != len(requests) {
		if scheduled == nil || *scheduled == int64(len(requests)) {
			return nil
		}
		return []string{fmt.Sprintf("offered_differs_from_scheduled: %d of %d", len(requests), *scheduled)}
	}
	expected := int64(len(requests))
	if scheduled != nil {
		expected = *scheduled
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	var issues []string
	repeated, outOfRange := false, false
	var distinctInRange int64
	for i, v := range indexes {
		if i > 0 && v == indexes[i-1] {
			repeated = true
			continue
		}
		if v < 0 || v >= expected {
			outOfRange = true
			continue
		}
		distinctInRange++
	}
	if repeated {
		issues = append(issues, "request_index_repeated")
	}
	if missing := expected - distinctInRange; missing > 0 {
		issues = append(issues, fmt.Sprintf("records_missing: %d of %d", missing, expected))
	}
	if outOfRange {
		issues = append(issues, "request_index_out_of_range")
	}
	return issues
}

// outsideWindow: times missing or reversed, a start before the phase start, or an end more
// than 1 s after the drain end.
func outsideWindow(r *Request, start, drained *int64) bool {
	if r.StartedAtNS == nil || r.EndedAtNS == nil || *r.StartedAtNS > *r.EndedAtNS {
		return true
	}
	if start != nil && *r.StartedAtNS < *start {
		return true
	}
	return drained != nil && *r.EndedAtNS > *drained+endSlackNs
}

// intervalsOf chooses the rate interval (stormlog.md §3.3 table).
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

// Throughput is the successful requests' rates per second of the case's rate interval
// (stormlog.md §2.6): every field is nil (never 0) when there is no rate interval or it has
// no length. There is no duration_seconds in analysis version 2.
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
