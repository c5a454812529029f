package analyze

import (
	"math"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// openRequest is a measured open-loop request intended at ms (from 0) with a dispatch lag.
func openRequest(status string, intendedMs, lagMs float64) Request {
	var r Request
	r.Status, r.ArrivalMode = status, ModeFixedRate
	r.IntendedAtNS = artifact.Ptr(int64(intendedMs * 1e6))
	if status != StatusDropped {
		r.DispatchLagMS = artifact.Ptr(lagMs)
	}
	return r
}

func near(got *float64, want float64) bool {
	return got != nil && math.Abs(*got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func healthWindow(user, sys, wallSeconds float64, cpus int, pause float64, reads, stamped int64) *artifact.PhaseWindow {
	return &artifact.PhaseWindow{
		StartedAtNS: artifact.Ptr(int64(1e9)), DrainedAtNS: artifact.Ptr(int64(1e9 + wallSeconds*1e9)),
		ClientHealth: &artifact.ClientHealth{CPUUserSeconds: &user, CPUSystemSeconds: &sys, CPUs: cpus,
			GCCycles: 3, GCPauseSeconds: pause, ReceiveReads: reads, ReceiveStampedReads: stamped},
	}
}

func TestClientAuditKeptSchedule(t *testing.T) {
	var reqs []Request
	for i, lag := range []float64{0.1, 0.2, 0.1, 0.3, 0.2} {
		reqs = append(reqs, openRequest(StatusOK, float64(10*i), lag))
	}
	a := ClientAuditOf(reqs, healthWindow(0.5, 0.1, 1, 2, 0.002, 100, 99))
	// p99 of [0.1 0.1 0.2 0.2 0.3]: rank 3.96 → 0.2 + 0.96·0.1.
	// scheduled 4/0.040 s; dispatched 0.1 … 40.2 ms: 4/0.0401 s.
	if a.ClientLimited || len(a.Reasons) != 0 || !near(a.DispatchLagP99Ms, 0.296) ||
		!near(a.ScheduledRatePerSecond, 100) || !near(a.AchievedRatePerSecond, 4/0.0401) ||
		!near(a.AchievedOverScheduled, 0.04/0.0401) || !near(a.CPUSeconds, 0.6) || !near(a.CPUUtilization, 0.3) ||
		!near(a.GCPauseShare, 0.002) || !near(a.ReceiveStampCoverage, 0.99) || *a.CPUs != 2 || *a.GCCycles != 3 {
		t.Fatalf("audit %+v", a)
	}
	lines := clientLines(a)
	if len(lines) != 1 || lines[0] != "  client: dispatch lag p99 0.296 ms (bound 1 ms), 99.8% of the scheduled rate, CPU 30% of 2 CPUs, GC pauses 2 ms, receive stamps 99.0%" {
		t.Fatalf("lines %q", lines)
	}
}

func TestClientAuditLimited(t *testing.T) {
	var reqs []Request
	for i := range 5 {
		reqs = append(reqs, openRequest(StatusOK, float64(10*i), float64(2*i)))
	}
	held := openRequest(StatusOK, 50, 8)
	held.HeldForSlot = artifact.Ptr(true)
	reqs = append(reqs, held, openRequest(StatusDropped, 60, 0))
	a := ClientAuditOf(reqs, healthWindow(1.5, 0.4, 1, 2, 0, 0, 0))
	// lags [0 2 4 6 8 8]: p99 rank 4.95 → 8; scheduled 6/0.060 s (the dropped arrival
	// included); dispatched 0, 12, 24, 36, 48, 58 ms: 5/0.058 s; CPU 1.9/(1·2).
	if !a.ClientLimited || !near(a.DispatchLagP99Ms, 8) || !near(a.ScheduledRatePerSecond, 100) ||
		!near(a.AchievedOverScheduled, (5/0.058)/100) || a.HeldForSlot != 1 || a.Dropped != 1 ||
		!near(a.CPUUtilization, 0.95) || a.ReceiveStampCoverage != nil {
		t.Fatalf("audit %+v", a)
	}
	want := []string{"dispatch lag p99 8 ms over the 1 ms bound, 5 arrivals over it", "dispatched at 86.2% of the scheduled rate (under 99.5%)",
		"1 arrival waited for an in-flight slot (every --max-in-flight slot busy: raise it, or --overflow drop)", "1 arrival dropped", "client CPU at 95% of its 2 CPUs"}
	if strings.Join(a.Reasons, "|") != strings.Join(want, "|") {
		t.Fatalf("reasons %q", a.Reasons)
	}
	if lines := clientLines(a); len(lines) != 2 || lines[1] != "  CLIENT-LIMITED: "+strings.Join(want, "; ") {
		t.Fatalf("lines %q", lines)
	}
}

// One late wake-up in a short run puts its p99 over the bound (interpolated between the two
// largest lags) but is not a pattern: it is counted and shown, not a reason; a second one is.
func TestClientAuditOneLateArrivalIsNotAReason(t *testing.T) {
	var reqs []Request
	for i := range 49 {
		reqs = append(reqs, openRequest(StatusOK, float64(200*i), 0.2))
	}
	reqs = append(reqs, openRequest(StatusOK, 200*49, 2.5))
	a := ClientAuditOf(reqs, nil)
	// lags: 49 × 0.2 then 2.5; p99 rank 0.99·49 = 48.51 → 0.2 + 0.51·2.3.
	if a.ClientLimited || len(a.Reasons) != 0 || !near(a.DispatchLagP99Ms, 0.2+0.51*2.3) || a.DispatchLagOverBound != 1 {
		t.Fatalf("audit %+v", a)
	}
	if lines := clientLines(a); len(lines) != 1 || !strings.HasPrefix(lines[0], "  client: dispatch lag p99 1.37 ms (bound 1 ms, 1 over it), ") {
		t.Fatalf("lines %q", lines)
	}
	reqs[0].DispatchLagMS = artifact.Ptr(1.5) // sorted lags end 1.5, 2.5: p99 1.5 + 0.51·1
	a = ClientAuditOf(reqs, nil)
	if !a.ClientLimited || a.DispatchLagOverBound != 2 || len(a.Reasons) != 1 ||
		a.Reasons[0] != "dispatch lag p99 2.01 ms over the 1 ms bound, 2 arrivals over it" {
		t.Fatalf("audit %+v", a)
	}
}

func TestClientAuditClosedLoopAndOldArtifact(t *testing.T) {
	var r Request
	r.Status, r.ArrivalMode = StatusOK, ModeClosed
	a := ClientAuditOf([]Request{r, r}, nil)
	if a.ClientLimited || a.DispatchLagP99Ms != nil || a.ScheduledRatePerSecond != nil || a.CPUUtilization != nil ||
		a.GCPauseSeconds != nil || len(clientLines(a)) != 0 || a.Reasons == nil {
		t.Fatalf("audit %+v", a)
	}
}

func TestFormatMs(t *testing.T) {
	for v, want := range map[float64]string{2290.4: "2290", 0.296: "0.296", 1: "1", 12.345: "12.3", -1500: "-1500"} {
		if got := FormatMs(v); got != want {
			t.Errorf("FormatMs(%v) = %q, want %q", v, got, want)
		}
	}
}

// The host's busy CPU, less the process's own, is what other processes took; a
// client-limited case on a host they kept busy, with the client itself far from saturated,
// is host-contended and says so; one the client saturated, or a clean one, is not.
func TestClientAuditHostContention(t *testing.T) {
	var late []Request
	for i := range 10 {
		late = append(late, openRequest(StatusOK, float64(10*i), 3))
	}
	host := func(w *artifact.PhaseWindow, cpus int, busy float64) *artifact.PhaseWindow {
		w.ClientHealth.HostCPUs, w.ClientHealth.HostCPUBusySeconds = cpus, &busy
		return w
	}
	// 2 s × 4 host CPUs = 8 CPU-s; the process 0.3 s, the host 6.7 s busy: others 6.4 s.
	a := ClientAuditOf(late, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 6.7))
	if !a.ClientLimited || !a.HostContended || *a.HostCPUs != 4 || !near(a.HostCPUUtilization, 6.7/8) || !near(a.OtherCPUUtilization, 0.8) ||
		a.UnheldSent != 10 || a.LateUnheld != 10 {
		t.Fatalf("audit %+v", a)
	}
	lines := clientLines(a)
	if len(lines) != 3 || !strings.HasSuffix(lines[0], ", CPU 8% of 2 CPUs, host CPU 84% of 4 (other processes 80%), GC pauses 0 ms") ||
		lines[2] != "  HOST-CONTENDED: other processes kept 80% of this host's 4 CPUs busy while this client used 8% of its own: they competed with it for the CPUs and, more than its own work, delayed its dispatch (run it where nothing else runs; a server on this host counts)" {
		t.Fatalf("lines %q", lines)
	}
	// Others under half the host: not contended.
	if a := ClientAuditOf(late, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 3.9)); !a.ClientLimited || a.HostContended || !near(a.OtherCPUUtilization, 0.45) {
		t.Fatalf("others 45%%: %+v", a)
	}
	// The client saturated its CPUs: its own work, whatever the others did.
	if a := ClientAuditOf(late, host(healthWindow(3.0, 0.8, 2, 2, 0, 0, 0), 8, 15)); !a.ClientLimited || a.HostContended {
		t.Fatalf("client saturated: %+v", a)
	}
	// On schedule: a busy host is only a figure.
	var onTime []Request
	for i := range 10 {
		onTime = append(onTime, openRequest(StatusOK, float64(10*i), 0.1))
	}
	if a := ClientAuditOf(onTime, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 7.9)); a.ClientLimited || a.HostContended || len(clientLines(a)) != 1 {
		t.Fatalf("on schedule: %+v", a)
	}
	// Limited only by the in-flight cap (arrivals dropped, none sent late): not the host's doing.
	var capped []Request
	for i := range 10 {
		status := StatusOK
		if i%2 == 1 {
			status = StatusDropped
		}
		capped = append(capped, openRequest(status, float64(10*i), 0.1))
	}
	if a := ClientAuditOf(capped, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 7.9)); !a.ClientLimited || a.HostContended {
		t.Fatalf("capped: %+v", a)
	}
	// Late only while held for a slot (the in-flight cap's wait): not the host's doing.
	var heldLate []Request
	for i := range 10 {
		r := openRequest(StatusOK, float64(10*i), 128)
		r.HeldForSlot = artifact.Ptr(i > 0)
		heldLate = append(heldLate, r)
	}
	if a := ClientAuditOf(heldLate, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 7.9)); !a.ClientLimited || a.HostContended ||
		a.UnheldSent != 1 || a.LateUnheld != 1 || a.DispatchLagOverBound != 10 {
		t.Fatalf("held late: %+v", a)
	}
	// Late and far behind the schedule (12% of it): the client was overloaded itself.
	var behind []Request
	for i := range 10 {
		behind = append(behind, openRequest(StatusOK, float64(i), float64(60*i)))
	}
	if a := ClientAuditOf(behind, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 7.9)); !a.ClientLimited || a.HostContended || *a.AchievedOverScheduled >= 0.9 {
		t.Fatalf("far behind: %+v", a)
	}
	// Busy time over the window's capacity (10 ms ticks, other instants): at most 100%.
	if a := ClientAuditOf(late, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 8.5)); !near(a.HostCPUUtilization, 1) || !near(a.OtherCPUUtilization, 1) {
		t.Fatalf("over capacity: %+v", a)
	}
	// Busy time under the process's own (counters read at different instants): others 0.
	if a := ClientAuditOf(late, host(healthWindow(0.2, 0.1, 2, 2, 0, 0, 0), 4, 0.25)); !near(a.OtherCPUUtilization, 0) {
		t.Fatalf("busy under own: %+v", a)
	}
	// Older artifacts: no host figures, no line part.
	if a := ClientAuditOf(late, healthWindow(0.2, 0.1, 2, 2, 0, 0, 0)); a.HostCPUs != nil || a.HostCPUUtilization != nil || a.HostContended ||
		strings.Contains(clientLines(a)[0], "host CPU") {
		t.Fatalf("no host figures: %+v", a)
	}
}
