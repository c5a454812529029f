package analyze

import (
	"fmt"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// endSlackNs: a request may end up to 1 s after the recorded drain end (the window record is
// written after the drain returns).
const endSlackNs = 1_000_000_000

// Population counts a case's measured requests by what happened to them; every status lands
// in exactly one count:
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
	// slice is a lone shard's share of the indexes (nil unless the artifact is one shard of
	// a sharded run analysed alone: a merge's workload has no shard block).
	slice *shardSlice
}

// Populate computes a case's population, cohort checks and intervals.
func Populate(in CaseInput) (Population, Intervals) {
	scheduled := (*int64)(nil)
	if in.Window != nil {
		scheduled = in.Window.ScheduledArrivals
	} else if in.WorkloadRecorded {
		scheduled, _ = in.recomputed()
	}
	hard, soft := cohortIssues(in.Requests, in.Window, scheduled, in.slice)
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
func cohortIssues(requests []Request, w *artifact.PhaseWindow, scheduled *int64, slice *shardSlice) (hard, soft []string) {
	hard = []string{}
	dupIDs := repeats(len(requests), func(i int) (string, bool) { return requests[i].RequestID, true })
	dupXIDs := repeats(len(requests), func(i int) (string, bool) {
		if x := requests[i].XRequestID; x != nil {
			return *x, true
		}
		return "", false
	})
	if dupIDs > 0 {
		hard = append(hard, fmt.Sprintf("duplicate_request_id: %d", dupIDs))
	}
	if dupXIDs > 0 {
		hard = append(hard, fmt.Sprintf("duplicate_x_request_id: %d", dupXIDs))
	}
	hard = append(hard, indexIssues(requests, scheduled, slice)...)
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
// none out of range. Without a schedule, the arrivals expected are the distinct records or
// the highest index + 1, whichever is more (a lower bound: what was never sent after the
// highest index leaves no trace). Without indexes on every record, a known schedule still
// needs one record per arrival. A lone shard's indexes (slice non-nil) are checked by their rank among
// the indexes the shard sends (scheduled is then its share); one it does not send is out of
// range.
func indexIssues(requests []Request, scheduled *int64, slice *shardSlice) []string {
	indexes := make([]int64, 0, len(requests))
	for i := range requests {
		if requests[i].RequestIndex == nil {
			continue
		}
		v := *requests[i].RequestIndex
		if slice != nil {
			r, ok := slice.rank(v)
			if !ok {
				r = -1 // not this shard's: out of range
			}
			v = r
		}
		indexes = append(indexes, v)
	}
	if len(indexes) != len(requests) {
		if scheduled == nil || *scheduled == int64(len(requests)) {
			return nil
		}
		return []string{fmt.Sprintf("offered_differs_from_scheduled: %d of %d", len(requests), *scheduled)}
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	repeats := int64(0)
	for i := 1; i < len(indexes); i++ {
		if indexes[i] == indexes[i-1] {
			repeats++
		}
	}
	// Without a schedule, the arrivals are at least the records less the repeated ones (a
	// duplicated record does not make another arrival missing) and at least the highest
	// index + 1 (arrivals are indexed from 0 without gaps, so a gap below the highest is an
	// arrival whose record is missing: a shard that died mid-run, say).
	expected := int64(len(requests)) - repeats
	if n := len(indexes); n > 0 && indexes[n-1] >= expected {
		expected = indexes[n-1] + 1
	}
	if scheduled != nil {
		expected = *scheduled
	}
	var issues []string
	repeated, outOfRange := repeats > 0, false
	var distinctInRange int64
	for i, v := range indexes {
		if i > 0 && v == indexes[i-1] {
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
	if missing := expected - distinctInRange; missing > 0 && scheduled != nil {
		issues = append(issues, fmt.Sprintf("records_missing: %d of %d", missing, expected))
	} else if missing > 0 {
		// No schedule: the arrivals after the highest index left no trace.
		issues = append(issues, fmt.Sprintf("records_missing: at least %d of at least %d", missing, expected))
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
