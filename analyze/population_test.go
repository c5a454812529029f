package analyze

import (
	"reflect"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func populate(requests []Request, w *artifact.PhaseWindow, mods ...func(*CaseInput)) (Population, Intervals) {
	in := CaseInput{CaseID: "c1", Requests: requests, Window: w}
	for _, m := range mods {
		m(&in)
	}
	return Populate(in)
}

func fixedWorkload(in *CaseInput) {
	in.WorkloadRecorded = true
	in.Arrival = &ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(10)}
	in.Measurement = &Measurement{RequestCount: p64(10)}
}

// Every status lands in exactly one bucket and the identities hold.
func TestPopulationBuckets(t *testing.T) {
	statuses := []string{"ok", "ok", "ok", "error", "timeout", "cancelled", "rejected", "unreachable", "delivery_unknown", "dropped", "mystery"}
	var requests []Request
	for i, s := range statuses {
		requests = append(requests, req(i, s))
	}
	p, _ := populate(requests, window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = p64(11) }))
	got := [][2]int{{p.Offered, 11}, {int(*p.Scheduled), 11}, {p.Dropped, 1}, {p.Sent, 10}, {p.Unreachable, 1}, {p.DeliveryUnknown, 1},
		{p.Rejected, 1}, {p.Accepted, 7}, {p.Successful, 3}, {p.Failed, 1}, {p.TimedOut, 1}, {p.Cancelled, 1}, {p.Censored, 2}}
	for i, g := range got {
		if g[0] != g[1] {
			t.Errorf("bucket %d = %d, want %d", i, g[0], g[1])
		}
	}
	if !reflect.DeepEqual(p.Other, map[string]int{"mystery": 1}) {
		t.Errorf("other = %v", p.Other)
	}
	other := 0
	for _, n := range p.Other {
		other += n
	}
	if p.Offered != p.Dropped+p.Sent || p.Sent != p.Unreachable+p.DeliveryUnknown+p.Rejected+p.Accepted ||
		p.Accepted != p.Successful+p.Failed+p.TimedOut+p.Cancelled+other {
		t.Error("population identities do not hold")
	}
	if !p.CohortValid || len(p.Issues) != 0 || p.ServerAdmitted != nil || p.ServerEvidenceCoverage != nil {
		t.Errorf("cohort %v issues %v admitted %v", p.CohortValid, p.Issues, p.ServerAdmitted)
	}
}

// Hard cohort checks and soft notes, as a table.
func TestCohortChecks(t *testing.T) {
	nine := func(last Request) []Request { return append(reqs(9, StatusOK), last) }
	drained := start + 2*second
	cases := []struct {
		name     string
		requests []Request
		window   *artifact.PhaseWindow
		mods     []func(*CaseInput)
		valid    bool
		issues   []string
	}{
		{"item 28 duplicate cannot mask a missing arrival", append(reqs(9, StatusOK), req(3, StatusOK, func(r *Request) { r.RequestID = "again"; r.XRequestID = ps("again") })),
			window(), nil, false, []string{"request_index_repeated", "records_missing: 1 of 10"}},
		{"a duplicated record without a schedule is no missing arrival", append(reqs(10, StatusOK), req(3, StatusOK)),
			window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = nil }), nil, false,
			[]string{"duplicate_request_id: 1", "duplicate_x_request_id: 1", "request_index_repeated"}},
		{"item 29 duplicate request_id", nine(req(9, StatusOK, func(r *Request) { r.RequestID = "c1_measured_0" })), window(), nil, false, []string{"duplicate_request_id: 1"}},
		{"item 29 duplicate x_request_id", nine(req(9, StatusOK, func(r *Request) { r.XRequestID = ps("stormlog-run-c1_measured_0") })), window(), nil, false, []string{"duplicate_x_request_id: 1"}},
		{"item 29 index out of range", nine(req(9, StatusOK, func(r *Request) { r.RequestIndex = p64(12) })), window(), nil, false, []string{"records_missing: 1 of 10", "request_index_out_of_range"}},
		{"item 29 session mismatch", nine(req(9, StatusOK, func(r *Request) { r.SessionID = "other" })), window(), nil, false, []string{"session_mismatch"}},
		{"item 29 start before phase", nine(req(9, StatusOK, func(r *Request) { r.StartedAtNS = p64(start - second) })), window(), nil, false, []string{"outside_window: 1"}},
		{"item 29 end long after drain", nine(req(9, StatusOK, func(r *Request) { r.EndedAtNS = p64(start + 9*second) })), window(), nil, false, []string{"outside_window: 1"}},
		{"item 29 missing start", nine(req(9, StatusOK, func(r *Request) { r.StartedAtNS = nil })), window(), nil, false, []string{"outside_window: 1"}},
		{"item 29 reversed times", nine(req(9, StatusOK, func(r *Request) { r.EndedAtNS = p64(*r.StartedAtNS - 1) })), window(), nil, false, []string{"outside_window: 1"}},
		{"item 29 end within 1 s of drain", nine(req(9, StatusOK, func(r *Request) { r.EndedAtNS = p64(drained + second/2) })), window(), nil, true, []string{}},
		{"item 29 end 1.5 s after drain", nine(req(9, StatusOK, func(r *Request) { r.EndedAtNS = p64(drained + 3*second/2) })), window(), nil, false, []string{"outside_window: 1"}},
		{"item 30 stragglers are a note", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.AbandonedRequests.StillRunning = 2 }), nil, true, []string{"abandoned_requests_at_start: 2"}},
		{"item 30 missing indexes are a note", reqs(10, StatusOK, func(r *Request) { r.RequestIndex = nil }), window(), nil, true, []string{"request_index_unrecorded"}},
		{"item 36 interrupted open loop", append(reqs(5, StatusOK), req(5, StatusCancelled)), nil, []func(*CaseInput){fixedWorkload},
			false, []string{"records_missing: 4 of 10", "phase_window_missing"}},
		{"item 36 interrupted closed loop", reqs(6, StatusOK, func(r *Request) { r.ArrivalMode = ModeClosed }), nil,
			[]func(*CaseInput){func(in *CaseInput) {
				in.WorkloadRecorded = true
				in.Arrival = &ArrivalSpec{Mode: ModeClosed}
				in.Measurement = &Measurement{RequestCount: p64(10)}
			}}, false, []string{"phase_window_missing"}},
		{"item 37 window without start", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.StartedAtNS = nil }), []func(*CaseInput){fixedWorkload}, false, []string{"phase_window_incomplete"}},
		{"item 37 window without drain", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.DrainedAtNS = nil }), []func(*CaseInput){fixedWorkload}, false, []string{"phase_window_incomplete"}},
		{"item 38 no indexes, 11 records for 10 scheduled", reqs(11, StatusOK, func(r *Request) { r.RequestIndex = nil }), window(), nil, false,
			[]string{"offered_differs_from_scheduled: 11 of 10", "request_index_unrecorded"}},
		{"no window, no workload: a valid legacy cohort", reqs(6, StatusOK), nil, nil, true, []string{}},
		{"no schedule: a gap below the highest index is a missing record, not an index out of range",
			append(reqs(6, StatusOK), req(8, StatusOK), req(9, StatusOK)), window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = nil }), nil,
			false, []string{"records_missing: at least 2 of at least 10"}},
		{"no schedule: a negative index is out of range", append(reqs(6, StatusOK), req(6, StatusOK, func(r *Request) { r.RequestIndex = p64(-1) })),
			window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = nil }), nil, false, []string{"records_missing: at least 1 of at least 7", "request_index_out_of_range"}},
	}
	for _, c := range cases {
		p, _ := populate(c.requests, c.window, c.mods...)
		if p.CohortValid != c.valid || !reflect.DeepEqual(p.Issues, c.issues) {
			t.Errorf("%s: valid %v issues %q; want %v %q", c.name, p.CohortValid, p.Issues, c.valid, c.issues)
		}
	}
	// The scheduled count is recomputed from the workload; none for a closed loop.
	p, iv := populate(append(reqs(5, StatusOK), req(5, StatusCancelled)), nil, fixedWorkload)
	if p.Scheduled == nil || *p.Scheduled != 10 || iv.Rate != nil || *iv.RateReason != RateReasonPhaseWindowMissing {
		t.Errorf("interrupted open loop: scheduled %v rate %v reason %v", p.Scheduled, iv.Rate, iv.RateReason)
	}
}

// The rate interval, as a table.
func TestRateInterval(t *testing.T) {
	closed := func(w *artifact.PhaseWindow) {
		w.ArrivalMode = ModeClosed
		w.ScheduledArrivals = nil
		w.ScheduledEndpointOffsetNS = nil
	}
	cases := []struct {
		name     string
		requests []Request
		window   *artifact.PhaseWindow
		mods     []func(*CaseInput)
		kind     string // "" = no rate interval
		seconds  float64
		reason   string
	}{
		{"item 31 open loop uses the scheduled window", reqs(10, StatusOK), window(), []func(*CaseInput){fixedWorkload}, KindScheduledWindow, 1, ""},
		{"item 32 old window recomputes its endpoint", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.ScheduledEndpointOffsetNS = nil }), []func(*CaseInput){fixedWorkload}, KindScheduledWindow, 1, ""},
		{"item 33 replay without endpoint", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.ArrivalMode = ModeReplay; w.ScheduledEndpointOffsetNS = nil }),
			[]func(*CaseInput){func(in *CaseInput) {
				in.WorkloadRecorded = true
				in.Arrival = &ArrivalSpec{Mode: ModeReplay, TraceArrivals: p64(10)}
				in.Measurement = &Measurement{RequestCount: p64(10)}
			}}, "", 0, RateReasonEndpointUndeclared},
		{"item 34 closed loop runs to its drain end", append(reqs(9, StatusOK), req(9, StatusTimeout, func(r *Request) { r.EndedAtNS = p64(start + 9*second) })),
			window(closed, func(w *artifact.PhaseWindow) { w.DrainedAtNS = p64(start + 9*second) }), nil, KindMeasuredSpan, 9, ""},
		{"item 35 no window, no workload: request span", append(reqs(5, StatusOK), req(5, StatusTimeout, func(r *Request) { r.EndedAtNS = p64(start + 9*second) })),
			nil, nil, KindRequestSpan, 9, RateReasonNoPhaseWindow},
		{"item 36 cut short", reqs(6, StatusOK), nil, []func(*CaseInput){fixedWorkload}, "", 0, RateReasonPhaseWindowMissing},
		{"item 37 window without bounds", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.StartedAtNS = nil }), nil, "", 0, RateReasonPhaseWindowIncomplete},
		{"poisson window without endpoint, scheduler recomputes", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.ArrivalMode = ModePoisson; w.ScheduledEndpointOffsetNS = nil }),
			[]func(*CaseInput){func(in *CaseInput) {
				in.WorkloadRecorded = true
				in.Arrival = &ArrivalSpec{Mode: ModePoisson, RatePerSecond: pf(10)}
				in.Measurement = &Measurement{RequestCount: p64(10)}
				in.Scheduler = func(string) (int64, *int64, bool) { return 10, p64(1_250_000_000), true }
			}}, KindScheduledWindow, 1.25, ""},
		{"poisson window without endpoint, no scheduler", reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.ArrivalMode = ModePoisson; w.ScheduledEndpointOffsetNS = nil }),
			[]func(*CaseInput){func(in *CaseInput) {
				in.WorkloadRecorded = true
				in.Arrival = &ArrivalSpec{Mode: ModePoisson, RatePerSecond: pf(10)}
				in.Measurement = &Measurement{RequestCount: p64(10)}
			}}, "", 0, RateReasonEndpointUndeclared},
	}
	for _, c := range cases {
		_, iv := populate(c.requests, c.window, c.mods...)
		reason := ""
		if iv.RateReason != nil {
			reason = *iv.RateReason
		}
		switch {
		case c.kind == "" && iv.Rate != nil:
			t.Errorf("%s: rate interval %+v, want none", c.name, iv.Rate)
		case c.kind != "" && (iv.Rate == nil || iv.Rate.Kind != c.kind || !eq(iv.Rate.Seconds, c.seconds)):
			t.Errorf("%s: rate interval %+v, want %s of %v s", c.name, iv.Rate, c.kind, c.seconds)
		}
		if reason != c.reason {
			t.Errorf("%s: rate_reason %q, want %q", c.name, reason, c.reason)
		}
	}
	// In full: measured_span 2.0, drain 1.0, dispatch_window 0.9, realized 10/s,
	// configured 10/s, arrival cohort.
	_, iv := populate(reqs(10, StatusOK), window(), fixedWorkload)
	if !eq(iv.MeasuredSpan.Seconds, 2) || !eq(iv.Drain.Seconds, 1) || !eq(iv.DispatchWindow.Seconds, 0.9) ||
		!eq(iv.RealizedOfferedRatePerSecond, 10) || !eq(iv.ConfiguredRatePerSecond, 10) || iv.Rate.NumeratorCohort != CohortArrival ||
		iv.MeasuredSpan.NumeratorCohort != CohortAllMeasured || iv.ScheduledWindow != iv.Rate {
		t.Errorf("item 31 intervals %+v", iv)
	}
	// The replay keeps its measured span but has no scheduled window.
	_, iv = populate(reqs(10, StatusOK), window(func(w *artifact.PhaseWindow) { w.ArrivalMode = ModeReplay; w.ScheduledEndpointOffsetNS = nil }))
	if iv.ScheduledWindow != nil || iv.MeasuredSpan == nil {
		t.Errorf("item 33 intervals %+v", iv)
	}
	// The request span ends at the failed last request.
	_, iv = populate(append(reqs(5, StatusOK), req(5, StatusTimeout, func(r *Request) { r.EndedAtNS = p64(start + 9*second) })), nil)
	if iv.Rate.EndedAtNs != start+9*second || iv.Rate.NumeratorCohort != CohortAllMeasured {
		t.Errorf("item 35 request span %+v", iv.Rate)
	}
}

// Server admission is separate from the client's view.
func TestServerAdmission(t *testing.T) {
	admit := func(r *Request) { r.ServerAdmitted = true }
	requests := append(reqs(4, StatusOK), req(4, StatusDeliveryUnknown, admit))
	requests[0].ServerAdmitted = true
	w := window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = p64(5) })
	p, _ := populate(requests, w)
	if p.ServerAdmitted != nil || p.ServerEvidenceCoverage != nil {
		t.Errorf("without a server source: %v %v", p.ServerAdmitted, p.ServerEvidenceCoverage)
	}
	p, _ = populate(requests, w, func(in *CaseInput) { in.ServerSource = true })
	if p.Accepted != 4 || *p.ServerAdmitted != 2 || !eq(p.ServerEvidenceCoverage, 0.25) {
		t.Errorf("accepted %d admitted %d coverage %s", p.Accepted, *p.ServerAdmitted, fstr(p.ServerEvidenceCoverage))
	}
	// A dropped request is never admitted, even with a known id.
	p, _ = populate([]Request{req(0, StatusOK, admit), req(1, StatusDropped, admit)}, window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = p64(2) }),
		func(in *CaseInput) { in.ServerSource = true })
	if *p.ServerAdmitted != 1 {
		t.Errorf("dropped admitted: %d", *p.ServerAdmitted)
	}
	// Coverage never exceeds 1.
	requests = []Request{req(0, StatusOK, admit)}
	for i := 1; i < 5; i++ {
		requests = append(requests, req(i, StatusDeliveryUnknown, admit))
	}
	p, _ = populate(requests, window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = p64(5) }), func(in *CaseInput) { in.ServerSource = true })
	if p.Accepted != 1 || *p.ServerAdmitted != 5 || !eq(p.ServerEvidenceCoverage, 1) {
		t.Errorf("accepted %d admitted %d coverage %s", p.Accepted, *p.ServerAdmitted, fstr(p.ServerEvidenceCoverage))
	}
	// A receiver that ran and got nothing: 0, not null.
	p, _ = populate(reqs(3, StatusOK), window(func(w *artifact.PhaseWindow) { w.ScheduledArrivals = p64(3) }), func(in *CaseInput) { in.ServerSource = true })
	if p.ServerAdmitted == nil || *p.ServerAdmitted != 0 || !eq(p.ServerEvidenceCoverage, 0) {
		t.Errorf("empty receiver: %v %s", p.ServerAdmitted, fstr(p.ServerEvidenceCoverage))
	}
}

// A rate needs an interval with length.
func TestRate(t *testing.T) {
	if r := Rate(5, NewInterval("segment", 0, second, CohortArrival)); !eq(r, 5) {
		t.Errorf("rate = %s", fstr(r))
	}
	if r := Rate(5, NewInterval("segment", second, second, CohortArrival)); r != nil {
		t.Errorf("zero-length rate = %s", fstr(r))
	}
	if r := Rate(5, NewInterval("segment", second, 0, CohortArrival)); r != nil {
		t.Errorf("reversed rate = %s", fstr(r))
	}
	if r := Rate(5, nil); r != nil {
		t.Errorf("nil rate = %s", fstr(r))
	}
}

// Throughput per second of the rate interval, null without one.
func TestThroughput(t *testing.T) {
	requests := reqs(10, StatusOK, func(r *Request) { r.OutputTokens = p64(4); r.TotalTokens = p64(12) })
	_, iv := populate(requests, window(), fixedWorkload)
	tp := ThroughputOf(requests, iv.Rate)
	if *tp.IntervalKind != KindScheduledWindow || *tp.NumeratorCohort != CohortArrival || !eq(tp.IntervalSeconds, 1) ||
		!eq(tp.RequestsPerSecond, 10) || !eq(tp.OutputTokensPerSecond, 40) || !eq(tp.TotalTokensPerSecond, 120) {
		t.Errorf("throughput %+v", tp)
	}
	// A closed loop whose last request timed out at 9 s: 9 successes over 9 s.
	requests = append(reqs(9, StatusOK), req(9, StatusTimeout, func(r *Request) { r.EndedAtNS = p64(start + 9*second) }))
	_, iv = populate(requests, window(func(w *artifact.PhaseWindow) {
		w.ArrivalMode = ModeClosed
		w.DrainedAtNS = p64(start + 9*second)
	}))
	if tp := ThroughputOf(requests, iv.Rate); !eq(tp.RequestsPerSecond, 1) || !eq(tp.IntervalSeconds, 9) {
		t.Errorf("closed loop throughput %+v", tp)
	}
	empty := ThroughputOf(requests, nil)
	if empty != (Throughput{}) {
		t.Errorf("throughput without an interval %+v", empty)
	}
}

// Schedules recomputed from the workload without the generator.
func TestScheduleFromWorkload(t *testing.T) {
	cases := []struct {
		name     string
		a        ArrivalSpec
		m        Measurement
		arrivals *int64
		endpoint *int64
	}{
		{"fixed 4/s count 4", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(4)}, Measurement{RequestCount: p64(4)}, p64(4), p64(second)},
		{"fixed 4/s duration 1 s", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(4)}, Measurement{DurationSeconds: pf(1)}, p64(4), p64(second)},
		{"fixed 2.5/s duration 1 s", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(2.5)}, Measurement{DurationSeconds: pf(1)}, p64(3), p64(second)},
		{"fixed count binds before duration", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(10)}, Measurement{RequestCount: p64(5), DurationSeconds: pf(60)}, p64(5), p64(second / 2)},
		{"fixed duration binds before count", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(10)}, Measurement{RequestCount: p64(500), DurationSeconds: pf(2)}, p64(20), p64(2 * second)},
		{"two at 10/s span 0.2 s", ArrivalSpec{Mode: ModeFixedRate, RatePerSecond: pf(10)}, Measurement{RequestCount: p64(2)}, p64(2), p64(second / 5)},
		{"burst 3 every 2 s, count 7", ArrivalSpec{Mode: ModeBurst, BurstSize: p64(3), BurstIntervalSeconds: pf(2)}, Measurement{RequestCount: p64(7)}, p64(7), p64(6 * second)},
		{"burst 3 every 2 s, duration 4 s", ArrivalSpec{Mode: ModeBurst, BurstSize: p64(3), BurstIntervalSeconds: pf(2)}, Measurement{DurationSeconds: pf(4)}, p64(6), p64(4 * second)},
		{"poisson count", ArrivalSpec{Mode: ModePoisson, RatePerSecond: pf(5)}, Measurement{RequestCount: p64(9)}, p64(9), nil},
		{"poisson duration", ArrivalSpec{Mode: ModePoisson, RatePerSecond: pf(5)}, Measurement{DurationSeconds: pf(3)}, nil, p64(3 * second)},
		{"replay whole trace", ArrivalSpec{Mode: ModeReplay, TraceArrivals: p64(12)}, Measurement{}, p64(12), nil},
		{"replay count", ArrivalSpec{Mode: ModeReplay, TraceArrivals: p64(12)}, Measurement{RequestCount: p64(2)}, p64(2), nil},
		{"replay duration", ArrivalSpec{Mode: ModeReplay, TraceArrivals: p64(12)}, Measurement{DurationSeconds: pf(1)}, nil, p64(second)},
		{"closed", ArrivalSpec{Mode: ModeClosed}, Measurement{RequestCount: p64(10)}, nil, nil},
		{"fixed without rate", ArrivalSpec{Mode: ModeFixedRate}, Measurement{RequestCount: p64(10)}, nil, nil},
	}
	same := func(a, b *int64) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
	for _, c := range cases {
		n, end := ScheduleFromWorkload(c.a, c.m)
		if !same(n, c.arrivals) || !same(end, c.endpoint) {
			t.Errorf("%s: %v, %v", c.name, deref(n), deref(end))
		}
	}
}
