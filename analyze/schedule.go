package analyze

import (
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// ScheduleLagBoundMs is the dispatch-lag bound of a run that kept its schedule: the p99 of
// the measured open-loop requests' dispatch lag, in ms.
const ScheduleLagBoundMs = 1.0

// scheduleKept reports whether the load generator kept the schedule of the measured phases:
// no arrival was dropped or held for a slot, and the p99 (Quantile) of the finite dispatch
// lags of the measured open-loop requests, all cases pooled, is within ScheduleLagBoundMs.
// A run without open-loop requests keeps its schedule when nothing was dropped or held.
func scheduleKept(in *Input) bool {
	var lags []float64
	for _, list := range in.Cases {
		for i := range list {
			r := &list[i]
			if r.Status == StatusDropped || heldForSlot(r) {
				return false
			}
			if r.ArrivalMode == ModeClosed || r.IntendedAtNS == nil || r.DispatchLagMS == nil {
				continue
			}
			if v := *r.DispatchLagMS; !math.IsNaN(v) && !math.IsInf(v, 0) {
				lags = append(lags, v)
			}
		}
	}
	sort.Float64s(lags)
	p99, ok := Quantile(lags, 0.99)
	return !ok || p99 <= ScheduleLagBoundMs
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
// cannot. AnalyzeInput computes cases concurrently, so it may be called from several
// goroutines at once (loadgen.WorkloadScheduler is safe for that).
type ScheduleFunc func(caseID string) (arrivals int64, endpointNs *int64, ok bool)

// ScheduleFromWorkload recomputes what an open-loop schedule implies without running its
// generator: the number of arrivals
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

// Arrival modes.
const (
	ModeClosed    = artifact.ArrivalClosed
	ModeFixedRate = "fixed-rate"
	ModePoisson   = "poisson"
	ModeBurst     = "burst"
	ModeReplay    = "replay"
)
