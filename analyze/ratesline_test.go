package analyze

import (
	"bytes"
	"strings"
	"testing"
)

// TestRatesLineDrainNote: when the drain outlasts a rate interval that ends before it (an
// open loop's scheduled window), the rates line says the rates count requests finished
// during the drain but divide by the window alone; never for an interval that includes the
// drain (a closed loop's measured span), nor for a drain shorter than the window.
func TestRatesLineDrainNote(t *testing.T) {
	const s = int64(1e9)
	start := int64(1_700_000_000) * s
	window := NewInterval(KindScheduledWindow, start, start+5*s, CohortArrival)
	cases := []struct {
		name string
		iv   Intervals
		want string
	}{
		{"drain longer than the window", Intervals{Rate: window, Drain: NewInterval(KindDrain, start+5*s, start+35*s, CohortAllMeasured)},
			"rates per scheduled window of 5.00 s (arrival cohort); drain 30.00 s > window 5.00 s: the rates count the requests that finished during the drain but divide by the window alone"},
		{"drain shorter than the window", Intervals{Rate: window, Drain: NewInterval(KindDrain, start+5*s, start+8*s, CohortAllMeasured)},
			"rates per scheduled window of 5.00 s (arrival cohort)"},
		{"drain as long as the window", Intervals{Rate: window, Drain: NewInterval(KindDrain, start+5*s, start+10*s, CohortAllMeasured)},
			"rates per scheduled window of 5.00 s (arrival cohort)"},
		{"measured span includes the drain", Intervals{Rate: NewInterval(KindMeasuredSpan, start, start+35*s, CohortAllMeasured),
			Drain: NewInterval(KindDrain, start+5*s, start+35*s, CohortAllMeasured)},
			"rates per measured span of 35.00 s (all measured)"},
		{"no drain recorded", Intervals{Rate: window}, "rates per scheduled window of 5.00 s (arrival cohort)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ratesLine(tc.iv); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}

	// Through the report: a 10 ms Poisson window drained for 61 s.
	r, err := Analyze(syntheticArtifact(10), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := RenderText(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "  rates per scheduled window of 0.01 s (arrival cohort); drain 61.00 s > window 0.01 s: the rates count the requests that finished during the drain but divide by the window alone\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("text lacks %q:\n%s", want, b.String())
	}
}

// TestDispatchNote: a scheduled window whose client dispatched under ClientRateFloor of the
// scheduled rate says the rates are the schedule's; at the floor, for a closed loop's
// measured span, or without the audit's figures, nothing.
func TestDispatchNote(t *testing.T) {
	const s = int64(1e9)
	window := Intervals{Rate: NewInterval(KindScheduledWindow, 0, 2*s, CohortArrival)}
	behind := ClientAudit{AchievedRatePerSecond: f64Ptr(2793.4), AchievedOverScheduled: f64Ptr(0.5587),
		DispatchLagP99Ms: f64Ptr(1568), DispatchLagBoundMs: 1, DispatchLagOverBound: 9958}
	want := "; sends fell behind the schedule, dispatched at 2793.40 req/s (55.9% of the scheduled rate): the requests sent late count in the rates, which divide by the window alone, so they are the schedule's, not what reached the server"
	if got := dispatchNote(window, behind); got != want {
		t.Fatalf("behind:\ngot  %q\nwant %q", got, want)
	}
	onTime := ClientAudit{AchievedRatePerSecond: f64Ptr(4975), AchievedOverScheduled: f64Ptr(ClientRateFloor)}
	span := Intervals{Rate: NewInterval(KindMeasuredSpan, 0, 2*s, CohortAllMeasured)}
	for name, got := range map[string]string{
		"at the floor":  dispatchNote(window, onTime),
		"measured span": dispatchNote(span, behind),
		"no figures":    dispatchNote(window, ClientAudit{}),
		"no interval":   dispatchNote(Intervals{}, behind),
		// Late sends, but drops account for the shortfall.
		"dropped, a few late": dispatchNote(window, ClientAudit{AchievedRatePerSecond: f64Ptr(6.9), AchievedOverScheduled: f64Ptr(0.069),
			DispatchLagP99Ms: f64Ptr(5.51), DispatchLagBoundMs: 1, DispatchLagOverBound: 3, Dropped: 186}),
		// Under the schedule because the in-flight cap dropped arrivals: nothing was sent late.
		"dropped, none late": dispatchNote(window, ClientAudit{AchievedRatePerSecond: f64Ptr(26.64), AchievedOverScheduled: f64Ptr(0.266),
			DispatchLagP99Ms: f64Ptr(0.366), DispatchLagBoundMs: 1, Dropped: 146}),
	} {
		if got != "" {
			t.Errorf("%s: %q", name, got)
		}
	}
}
