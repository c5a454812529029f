package analyze

import (
	"math"
	"sort"
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
			if r.ArrivalMode == "closed" || r.IntendedAtNS == nil || r.DispatchLagMS == nil {
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
