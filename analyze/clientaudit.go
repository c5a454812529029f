package analyze

import (
	"fmt"
	"math"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// The self-audit's bounds: a case is client_limited when its load generator, not the server,
// shaped the numbers.
const (
	// ClientRateFloor is the least achieved/scheduled dispatch rate of an open loop that
	// kept its schedule.
	ClientRateFloor = 0.995
	// ClientCPUCeiling is the process CPU utilisation (of its CPUs) at which the client is
	// saturated: its own queueing then enters every latency it measures.
	ClientCPUCeiling = 0.95
	// ClientLateFloor is the fewest arrivals dispatched later than the dispatch-lag bound
	// that can make a p99 over the bound a reason: in a short run (under 100 arrivals the
	// p99 is interpolated between the two largest lags) one late wake-up alone would
	// otherwise flag it, and one late dispatch shapes one request, not the run.
	ClientLateFloor = 2
	// HostContendedShare is the share of the host's CPUs that other processes (or a
	// hypervisor's steal) kept busy during the phase from which a client-limited case's
	// lateness is put down to the host, not to the client's own work.
	HostContendedShare = 0.5
	// HostContendedRateFloor is the least achieved/scheduled dispatch rate of a
	// host-contended case: a client that fell further behind was overloaded itself (its CPU,
	// averaged over the drain, can read low), not only delayed by the others.
	HostContendedRateFloor = 0.9
)

// OverflowDropAdvice ends the held-arrivals reason: profile's other way out (a tool with no
// --overflow flag removes it).
const OverflowDropAdvice = ", or --overflow drop"

// ClientAudit is a case's self-audit: the load generator's own health over the measured
// phase and whether it shaped the numbers.
//
//   - DispatchLagP99Ms: the p99 (Quantile) of the finite dispatch lags of the open-loop
//     requests (ms; null for closed loops), against DispatchLagBoundMs (ScheduleLagBoundMs);
//     DispatchLagOverBound counts those lags over the bound.
//   - ScheduledRatePerSecond = (n−1)/(last intended − first intended) over every scheduled
//     arrival (dropped included); AchievedRatePerSecond = (m−1)/(last dispatch − first
//     dispatch) over the m arrivals sent (dispatch = intended + dispatch lag);
//     AchievedOverScheduled their ratio. Null for closed loops or with fewer than 2.
//   - CPUUtilization = (user + system CPU seconds) / (phase wall seconds × CPUs), the phase
//     running from its start to the end of its drain; GCPauseShare = GC pause seconds /
//     phase wall seconds; ReceiveStampCoverage = stamped reads / reads. Null without the
//     phase's client_health (older artifacts) or without reads.
//   - HostCPUUtilization = host busy CPU seconds / (phase wall seconds × host CPUs), every
//     process's; OtherCPUUtilization = max(host busy − the process's CPU seconds, 0) / the
//     same: what other processes took. Null without the host figures (older artifacts, or
//     no /proc/stat); both at most 1 (/proc/stat counts 10 ms ticks, read at instants a
//     little apart from the window's). UnheldSent counts the open-loop arrivals sent without
//     waiting for a slot, LateUnheld those of them over the lag bound. HostContended: those
//     arrivals were late (at least ClientLateFloor and over 1% of them: a held arrival's lag
//     is the in-flight cap's doing), other processes took
//     at least HostContendedShare of the host, the process itself stayed under
//     ClientCPUCeiling, and dispatch kept at least HostContendedRateFloor of the schedule:
//     the host's contention, more than the client's own work, delayed it.
//
// ClientLimited is true when any of Reasons holds: dispatch lag p99 over its bound with at
// least ClientLateFloor arrivals over it,
// achieved under ClientRateFloor of the schedule, arrivals that waited for an in-flight
// slot or were dropped (the client's concurrency cap shaped the arrivals), or CPU
// utilisation at or over ClientCPUCeiling.
type ClientAudit struct {
	ClientLimited          bool     `json:"client_limited"`
	Reasons                []string `json:"reasons"`
	DispatchLagP99Ms       *float64 `json:"dispatch_lag_p99_ms"`
	DispatchLagBoundMs     float64  `json:"dispatch_lag_bound_ms"`
	DispatchLagOverBound   int      `json:"dispatch_lag_over_bound"`
	ScheduledRatePerSecond *float64 `json:"scheduled_rate_per_second"`
	AchievedRatePerSecond  *float64 `json:"achieved_rate_per_second"`
	AchievedOverScheduled  *float64 `json:"achieved_over_scheduled"`
	HeldForSlot            int      `json:"held_for_slot"`
	Dropped                int      `json:"dropped"`
	CPUs                   *int     `json:"cpus"`
	CPUSeconds             *float64 `json:"cpu_seconds"`
	CPUUtilization         *float64 `json:"cpu_utilization"`
	HostCPUs               *int     `json:"host_cpus"`
	HostCPUUtilization     *float64 `json:"host_cpu_utilization"`
	OtherCPUUtilization    *float64 `json:"other_cpu_utilization"`
	HostContended          bool     `json:"host_contended"`
	UnheldSent             int      `json:"unheld_sent"`
	LateUnheld             int      `json:"late_unheld"`
	GCCycles               *int64   `json:"gc_cycles"`
	GCPauseSeconds         *float64 `json:"gc_pause_seconds"`
	GCPauseShare           *float64 `json:"gc_pause_share"`
	ReceiveStampCoverage   *float64 `json:"receive_stamp_coverage"`
}

// ClientAuditOf audits one case from its measured requests and phase window (nil: no
// client health).
func ClientAuditOf(requests []Request, w *artifact.PhaseWindow) ClientAudit {
	a := ClientAudit{Reasons: []string{}, DispatchLagBoundMs: ScheduleLagBoundMs}
	a.scheduleFrom(requests)
	if w != nil && w.ClientHealth != nil {
		a.healthFrom(w.ClientHealth, w)
	}
	a.judge()
	return a
}

// scheduleFrom sets the dispatch-lag and rate figures and the held/dropped counts.
func (a *ClientAudit) scheduleFrom(requests []Request) {
	lags := getFloats(len(requests))
	defer func() { putFloats(lags) }()
	var intended, dispatched timeSpan
	for i := range requests {
		r := &requests[i]
		if r.Status == StatusDropped {
			a.Dropped++
		} else if heldForSlot(r) {
			a.HeldForSlot++
		}
		if r.ArrivalMode == ModeClosed || r.IntendedAtNS == nil {
			continue
		}
		intended.add(float64(*r.IntendedAtNS))
		if r.Status == StatusDropped || r.DispatchLagMS == nil || !finite(*r.DispatchLagMS) {
			continue
		}
		lags = append(lags, *r.DispatchLagMS)
		held := heldForSlot(r)
		if !held {
			a.UnheldSent++
		}
		if *r.DispatchLagMS > a.DispatchLagBoundMs {
			a.DispatchLagOverBound++
			if !held {
				a.LateUnheld++
			}
		}
		dispatched.add(float64(*r.IntendedAtNS) + *r.DispatchLagMS*1e6)
	}
	sortFloats(lags)
	if p99, ok := Quantile(lags, 0.99); ok {
		a.DispatchLagP99Ms = f64Ptr(p99)
	}
	a.ScheduledRatePerSecond = intended.rate()
	a.AchievedRatePerSecond = dispatched.rate()
	if a.ScheduledRatePerSecond != nil && a.AchievedRatePerSecond != nil {
		a.AchievedOverScheduled = f64Ptr(*a.AchievedRatePerSecond / *a.ScheduledRatePerSecond)
	}
}

// timeSpan accumulates what spanRate reads of a list of times in ns — their count, least and
// greatest (math.Min and math.Max, in the order added) — without keeping the list.
type timeSpan struct {
	n      int
	lo, hi float64
}

func (s *timeSpan) add(t float64) {
	if s.n == 0 {
		s.lo, s.hi = math.Inf(1), math.Inf(-1)
	}
	s.n++
	s.lo, s.hi = math.Min(s.lo, t), math.Max(s.hi, t)
}

// rate is (n−1)/(max−min) per second of the times added; nil for n < 2 or an empty span.
func (s *timeSpan) rate() *float64 {
	if s.n < 2 || !(s.hi > s.lo) {
		return nil
	}
	return f64Ptr(float64(s.n-1) / ((s.hi - s.lo) / 1e9))
}

// healthFrom sets the CPU, GC and receive-stamp figures from the phase's client health.
func (a *ClientAudit) healthFrom(h *artifact.ClientHealth, w *artifact.PhaseWindow) {
	wall := 0.0
	if w.StartedAtNS != nil && w.DrainedAtNS != nil && *w.DrainedAtNS > *w.StartedAtNS {
		wall = float64(*w.DrainedAtNS-*w.StartedAtNS) / 1e9
	}
	a.GCCycles = i64Ptr(h.GCCycles)
	a.GCPauseSeconds = f64Ptr(h.GCPauseSeconds)
	if h.CPUs > 0 {
		a.CPUs = &h.CPUs
	}
	if h.CPUUserSeconds != nil && h.CPUSystemSeconds != nil {
		a.CPUSeconds = f64Ptr(*h.CPUUserSeconds + *h.CPUSystemSeconds)
		if wall > 0 && h.CPUs > 0 {
			a.CPUUtilization = f64Ptr(*a.CPUSeconds / (wall * float64(h.CPUs)))
		}
	}
	if wall > 0 {
		a.GCPauseShare = f64Ptr(h.GCPauseSeconds / wall)
	}
	if h.HostCPUs > 0 && h.HostCPUBusySeconds != nil && wall > 0 {
		n := h.HostCPUs
		a.HostCPUs = &n
		capacity := wall * float64(n)
		a.HostCPUUtilization = f64Ptr(min(*h.HostCPUBusySeconds/capacity, 1))
		if a.CPUSeconds != nil {
			a.OtherCPUUtilization = f64Ptr(min(max(*h.HostCPUBusySeconds-*a.CPUSeconds, 0)/capacity, 1))
		}
	}
	if h.ReceiveReads > 0 {
		a.ReceiveStampCoverage = f64Ptr(float64(h.ReceiveStampedReads) / float64(h.ReceiveReads))
	}
}

// judge sets ClientLimited and its reasons.
func (a *ClientAudit) judge() {
	if a.late() {
		a.Reasons = append(a.Reasons, fmt.Sprintf("dispatch lag p99 %s ms over the %s ms bound, %d arrivals over it",
			FormatMs(*a.DispatchLagP99Ms), FormatMs(a.DispatchLagBoundMs), a.DispatchLagOverBound))
	}
	if a.AchievedOverScheduled != nil && *a.AchievedOverScheduled < ClientRateFloor {
		a.Reasons = append(a.Reasons, fmt.Sprintf("dispatched at %.1f%% of the scheduled rate (under %.1f%%)", 100**a.AchievedOverScheduled, 100*ClientRateFloor))
	}
	if a.HeldForSlot > 0 {
		a.Reasons = append(a.Reasons, fmt.Sprintf("%d %s for an in-flight slot (every --max-in-flight slot busy: raise it%s)", a.HeldForSlot, Plural(a.HeldForSlot, "arrival waited", "arrivals waited"), OverflowDropAdvice))
	}
	if a.Dropped > 0 {
		a.Reasons = append(a.Reasons, fmt.Sprintf("%d %s dropped", a.Dropped, Plural(a.Dropped, "arrival", "arrivals")))
	}
	if a.CPUUtilization != nil && a.CPUs != nil && *a.CPUUtilization >= ClientCPUCeiling {
		a.Reasons = append(a.Reasons, fmt.Sprintf("client CPU at %.0f%% of its %d CPUs", 100**a.CPUUtilization, *a.CPUs))
	}
	a.ClientLimited = len(a.Reasons) > 0
	a.HostContended = a.lateUnheld() && a.OtherCPUUtilization != nil && *a.OtherCPUUtilization >= HostContendedShare &&
		a.CPUUtilization != nil && *a.CPUUtilization < ClientCPUCeiling &&
		(a.AchievedOverScheduled == nil || *a.AchievedOverScheduled >= HostContendedRateFloor)
}

// late reports whether the dispatch lag is a reason: its p99 over the bound with at least
// ClientLateFloor arrivals over it.
func (a *ClientAudit) late() bool {
	return a.DispatchLagP99Ms != nil && *a.DispatchLagP99Ms > a.DispatchLagBoundMs && a.DispatchLagOverBound >= ClientLateFloor
}

// lateUnheld is late for the arrivals that found a slot free: at least ClientLateFloor of
// them, and more than 1% (their p99), over the bound. A held arrival's lag is its wait for
// a slot, the in-flight cap's doing, not the host's.
func (a *ClientAudit) lateUnheld() bool {
	return a.LateUnheld >= ClientLateFloor && float64(a.LateUnheld) > 0.01*float64(a.UnheldSent)
}

// clientLines renders the self-audit: a health line when there is anything to say (an open
// loop's schedule figures or the phase's client health) and, for a client-limited case, a
// line with every reason, e.g.
//
//	client: dispatch lag p99 3.1 ms (bound 1 ms, 4 over it), 100.0% of the scheduled rate, CPU 23% of 2 CPUs, GC pauses 0.4 ms, receive stamps 100.0%
//	CLIENT-LIMITED: dispatch lag p99 3.1 ms over the 1 ms bound, 4 arrivals over it
//
// and, for a host-contended one, a line saying that other processes took the host.
func clientLines(a ClientAudit) []string {
	var parts []string
	if a.DispatchLagP99Ms != nil {
		over := ""
		if a.DispatchLagOverBound > 0 {
			over = fmt.Sprintf(", %d over it", a.DispatchLagOverBound)
		}
		parts = append(parts, fmt.Sprintf("dispatch lag p99 %s ms (bound %s ms%s)", FormatMs(*a.DispatchLagP99Ms), FormatMs(a.DispatchLagBoundMs), over))
	}
	if a.AchievedOverScheduled != nil {
		parts = append(parts, fmt.Sprintf("%.1f%% of the scheduled rate", 100**a.AchievedOverScheduled))
	}
	if a.CPUUtilization != nil && a.CPUs != nil {
		parts = append(parts, fmt.Sprintf("CPU %.0f%% of %d CPUs", 100**a.CPUUtilization, *a.CPUs))
	}
	if a.HostCPUUtilization != nil {
		host := fmt.Sprintf("host CPU %.0f%% of %d", 100**a.HostCPUUtilization, *a.HostCPUs)
		if a.OtherCPUUtilization != nil {
			host += fmt.Sprintf(" (other processes %.0f%%)", 100**a.OtherCPUUtilization)
		}
		parts = append(parts, host)
	}
	if a.GCPauseSeconds != nil {
		parts = append(parts, fmt.Sprintf("GC pauses %s ms", FormatMs(1000**a.GCPauseSeconds)))
	}
	if a.ReceiveStampCoverage != nil {
		parts = append(parts, fmt.Sprintf("receive stamps %.1f%%", 100**a.ReceiveStampCoverage))
	}
	var lines []string
	if len(parts) > 0 {
		lines = append(lines, "  client: "+strings.Join(parts, ", "))
	}
	if a.ClientLimited {
		lines = append(lines, "  CLIENT-LIMITED: "+strings.Join(a.Reasons, "; "))
	}
	if a.HostContended {
		lines = append(lines, fmt.Sprintf("  HOST-CONTENDED: other processes kept %.0f%% of this host's %d CPUs busy while this client used %.0f%% of its own: they competed with it for the CPUs and, more than its own work, delayed its dispatch (run it where nothing else runs; a server on this host counts)",
			100**a.OtherCPUUtilization, *a.HostCPUs, 100**a.CPUUtilization))
	}
	return lines
}

// FormatMs writes a millisecond figure with three significant digits, without an exponent
// (2290, not 2.29e+03).
func FormatMs(v float64) string {
	if v >= 1000 || v <= -1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
