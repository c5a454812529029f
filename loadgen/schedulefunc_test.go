package loadgen

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// The scheduler must be usable as analyze.Options.Scheduler.
var _ analyze.ScheduleFunc = WorkloadScheduler(nil)

// measuredWindow returns the measured phase window of caseID.
func measuredWindow(t *testing.T, sink *memSink, caseID string) *artifact.PhaseWindow {
	t.Helper()
	for _, w := range sink.windows() {
		if w.CaseID == caseID && w.Phase == PhaseMeasured {
			return w
		}
	}
	t.Fatalf("no measured window for %s", caseID)
	return nil
}

// roundTrip passes the workload record through its JSON line, as analysis reads it.
func roundTrip(t *testing.T, w *artifact.Workload) *artifact.Workload {
	t.Helper()
	line, err := artifact.MarshalLine(w)
	if err != nil {
		t.Fatal(err)
	}
	var out artifact.Workload
	if err := json.Unmarshal(line, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestWorkloadSchedulerMatchesPoissonRun runs Poisson cases against the sim (count-limited,
// with a warmup phase that must not shift the measured stream, and duration-limited) and
// checks that the recomputed arrivals and endpoint equal the phase window's
// scheduled_arrivals and scheduled_endpoint_offset_ns.
func TestWorkloadSchedulerMatchesPoissonRun(t *testing.T) {
	srv := fastSim(t, nil)
	for _, tc := range []struct {
		name     string
		requests int
		duration time.Duration
		warmup   int
		rates    []float64
	}{
		{name: "count", requests: 15, warmup: 2, rates: []float64{150, 40}},
		{name: "duration", duration: 250 * time.Millisecond, rates: []float64{120}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(srv)
			cfg.Arrival, cfg.Rates, cfg.Requests, cfg.Duration = schedule.Poisson, tc.rates, tc.requests, tc.duration
			cfg.WarmupRequests, cfg.Seed = tc.warmup, 11
			cfg.Timeout = 5 * time.Second
			sink, err := runConfig(t, context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			w, err := cfg.WorkloadRecord("session-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			sched := WorkloadScheduler(roundTrip(t, w))
			cases, _ := cfg.Cases()
			if len(cases) != len(tc.rates) {
				t.Fatalf("%d cases", len(cases))
			}
			for _, cs := range cases {
				win := measuredWindow(t, sink, cs.ID)
				if win.ScheduledArrivals == nil || win.ScheduledEndpointOffsetNS == nil {
					t.Fatalf("%s: window without a schedule: %+v", cs.ID, win)
				}
				n, end, ok := sched(cs.ID)
				if !ok || end == nil {
					t.Fatalf("%s: not recomputed (ok %v, end %v)", cs.ID, ok, end)
				}
				if n != *win.ScheduledArrivals || *end != *win.ScheduledEndpointOffsetNS {
					t.Errorf("%s: recomputed %d arrivals ending at %d ns, recorded %d ending at %d ns",
						cs.ID, n, *end, *win.ScheduledArrivals, *win.ScheduledEndpointOffsetNS)
				}
				if tc.requests > 0 && n != int64(tc.requests) {
					t.Errorf("%s: %d arrivals, want the count %d", cs.ID, n, tc.requests)
				}
				if tc.duration > 0 && *end != int64(tc.duration) {
					t.Errorf("%s: endpoint %d, want the duration %d", cs.ID, *end, tc.duration)
				}
				// The recorded requests carry the same schedule: their number is the count.
				got := 0
				for _, r := range sink.requests(PhaseMeasured) {
					if r.CaseID == cs.ID {
						got++
					}
				}
				if int64(got) != n {
					t.Errorf("%s: %d measured requests recorded, %d scheduled", cs.ID, got, n)
				}
				// A second call returns the same values (memoised), in a fresh pointer.
				n2, end2, ok2 := sched(cs.ID)
				if !ok2 || n2 != n || end2 == end || *end2 != *end {
					t.Errorf("%s: second call %d %v %v", cs.ID, n2, end2, ok2)
				}
			}
		})
	}
}

// TestWorkloadSchedulerAnalyticModes checks fixed-rate and burst against the closed forms of
// analyze.ScheduleFromWorkload, and the cases that cannot be recomputed.
func TestWorkloadSchedulerAnalyticModes(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name    string
		arrival artifact.ArrivalSpec
		m       artifact.Measurement
	}{
		{"fixed count", artifact.ArrivalSpec{Mode: "fixed-rate", RatePerSecond: f(3)}, artifact.Measurement{RequestCount: i(10)}},
		{"fixed duration", artifact.ArrivalSpec{Mode: "fixed-rate", RatePerSecond: f(3)}, artifact.Measurement{DurationSeconds: f(2.5)}},
		{"fixed both count binds", artifact.ArrivalSpec{Mode: "fixed-rate", RatePerSecond: f(4)}, artifact.Measurement{RequestCount: i(3), DurationSeconds: f(10)}},
		{"burst count", artifact.ArrivalSpec{Mode: "burst", BurstSize: i(4), BurstIntervalSeconds: f(1.5)}, artifact.Measurement{RequestCount: i(10)}},
		{"burst duration", artifact.ArrivalSpec{Mode: "burst", BurstSize: i(4), BurstIntervalSeconds: f(0.4)}, artifact.Measurement{DurationSeconds: f(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &artifact.Workload{Seed: 1, Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: tc.arrival}}, Measurement: tc.m}
			n, end, ok := WorkloadScheduler(w)("x")
			if !ok || end == nil {
				t.Fatalf("not recomputed: %v %v", ok, end)
			}
			a := analyze.ArrivalSpec{Mode: tc.arrival.Mode, RatePerSecond: tc.arrival.RatePerSecond, BurstSize: tc.arrival.BurstSize, BurstIntervalSeconds: tc.arrival.BurstIntervalSeconds}
			wantN, wantEnd := analyze.ScheduleFromWorkload(a, analyze.Measurement{RequestCount: tc.m.RequestCount, DurationSeconds: tc.m.DurationSeconds})
			if wantN == nil || wantEnd == nil || n != *wantN || *end != *wantEnd {
				t.Errorf("recomputed %d, %d; closed form %v, %v", n, *end, wantN, wantEnd)
			}
		})
	}
	poisson := artifact.ArrivalSpec{Mode: "poisson", RatePerSecond: f(5)}
	for _, tc := range []struct {
		name string
		w    *artifact.Workload
		id   string
	}{
		{"nil workload", nil, "x"},
		{"unknown case", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: poisson}}, Measurement: artifact.Measurement{RequestCount: i(3)}}, "y"},
		{"closed", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: artifact.ArrivalSpec{Mode: "closed"}}}, Measurement: artifact.Measurement{RequestCount: i(3)}}, "x"},
		{"replay", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: artifact.ArrivalSpec{Mode: "replay", Trace: &artifact.ArrivalTrace{Arrivals: 3}}}}, Measurement: artifact.Measurement{DurationSeconds: f(1)}}, "x"},
		{"no bound", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: poisson}}}, "x"},
		{"no rate", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: artifact.ArrivalSpec{Mode: "poisson"}}}, Measurement: artifact.Measurement{RequestCount: i(3)}}, "x"},
		{"negative rate", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: artifact.ArrivalSpec{Mode: "poisson", RatePerSecond: f(-1)}}}, Measurement: artifact.Measurement{RequestCount: i(3)}}, "x"},
		{"too many", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: poisson}}, Measurement: artifact.Measurement{RequestCount: i(schedule.MaxArrivals + 1)}}, "x"},
		{"too long", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: poisson}}, Measurement: artifact.Measurement{DurationSeconds: f(1e300)}}, "x"},
		{"burst of zero", &artifact.Workload{Cases: []artifact.WorkloadCase{{CaseID: "x", Arrival: artifact.ArrivalSpec{Mode: "burst", BurstSize: i(0), BurstIntervalSeconds: f(1)}}}, Measurement: artifact.Measurement{RequestCount: i(3)}}, "x"},
	} {
		if n, end, ok := WorkloadScheduler(tc.w)(tc.id); ok || n != 0 || end != nil {
			t.Errorf("%s: got %d %v %v, want not ok", tc.name, n, end, ok)
		}
	}
}
