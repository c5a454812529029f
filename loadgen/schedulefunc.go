package loadgen

import (
	"math"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// WorkloadScheduler returns a function that recomputes the measured-phase schedule of a case
// of the recorded workload w exactly as the run built it: schedule.Build with the case's
// arrival spec (mode, rate, burst size and interval), the measurement's request count and
// duration, w.Seed and the stream caseID+"/measured" (Config.schedule). The function returns
// the number of scheduled arrivals and the scheduled endpoint offset in nanoseconds (nil when
// the schedule declares none), the phase window's scheduled_arrivals and
// scheduled_endpoint_offset_ns. It has the shape of the analysis's ScheduleFunc, so analysis can
// check a Poisson case's endpoint (the (N+1)-th cumulative draw) and a duration-limited
// Poisson case's arrival count, which need the generator itself.
//
// ok is false for a nil workload, an unknown case, a closed loop, a replay (its offsets are
// not in the artifact, only their count and digest), and a spec or bound that Build refuses
// (including more than schedule.MaxArrivals arrivals). Results are computed once per case;
// the function is safe for concurrent use.
func WorkloadScheduler(w *artifact.Workload) func(caseID string) (arrivals int64, endpointNs *int64, ok bool) {
	type result struct {
		arrivals int64
		endpoint *int64
		ok       bool
	}
	var mu sync.Mutex
	memo := map[string]result{}
	return func(caseID string) (int64, *int64, bool) {
		if w == nil {
			return 0, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if r, done := memo[caseID]; done {
			return r.arrivals, copyPtr(r.endpoint), r.ok
		}
		var r result
		r.arrivals, r.endpoint, r.ok = recompute(w, caseID)
		memo[caseID] = r
		return r.arrivals, copyPtr(r.endpoint), r.ok
	}
}

func recompute(w *artifact.Workload, caseID string) (int64, *int64, bool) {
	var wc *artifact.WorkloadCase
	for i := range w.Cases {
		if w.Cases[i].CaseID == caseID {
			wc = &w.Cases[i]
			break
		}
	}
	if wc == nil {
		return 0, nil, false
	}
	spec, ok := specOf(wc.Arrival)
	if !ok {
		return 0, nil, false
	}
	n := 0
	if c := w.Measurement.RequestCount; c != nil {
		if *c < 0 || *c > schedule.MaxArrivals {
			return 0, nil, false
		}
		n = int(*c)
	}
	var d time.Duration
	if s := w.Measurement.DurationSeconds; s != nil {
		var ok bool
		if d, ok = durationOf(*s); !ok {
			return 0, nil, false
		}
	}
	s, err := schedule.Build(spec, n, d, w.Seed, caseID+"/"+PhaseMeasured)
	if err != nil {
		return 0, nil, false
	}
	var end *int64
	if s.EndpointOffset != nil {
		end = artifact.Ptr(int64(*s.EndpointOffset))
	}
	return int64(len(s.Offsets)), end, true
}

// specOf rebuilds the schedule.Spec of a recorded arrival spec (Config.arrivalSpec ↔
// Config.arrivalRecord); ok is false for closed loops, replays and anything incomplete.
func specOf(a artifact.ArrivalSpec) (schedule.Spec, bool) {
	switch schedule.Mode(a.Mode) {
	case schedule.FixedRate, schedule.Poisson:
		if a.RatePerSecond == nil {
			return schedule.Spec{}, false
		}
		return schedule.Spec{Mode: schedule.Mode(a.Mode), Rate: *a.RatePerSecond}, true
	case schedule.Burst:
		if a.BurstSize == nil || a.BurstIntervalSeconds == nil || *a.BurstSize < 1 || *a.BurstSize > math.MaxInt32 {
			return schedule.Spec{}, false
		}
		iv, ok := durationOf(*a.BurstIntervalSeconds)
		if !ok {
			return schedule.Spec{}, false
		}
		return schedule.Spec{Mode: schedule.Burst, BurstSize: int(*a.BurstSize), BurstInterval: iv}, true
	}
	return schedule.Spec{}, false
}

// durationOf converts recorded seconds (time.Duration.Seconds()) back to the Duration they
// came from, rounding to the nanosecond; ok is false for NaN, negative or out-of-range values.
func durationOf(seconds float64) (time.Duration, bool) {
	ns := math.Round(seconds * 1e9)
	if !(ns >= 0) || ns >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(ns), true
}

func copyPtr(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
