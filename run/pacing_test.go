package run

import (
	"runtime/debug"
	"testing"
)

// TestPaceReport: GOGC is reportGCPercent while any report is being built, the caller's
// setting again once the last one is done (nested or overlapping), and untouched when the
// user set GOGC or GOMEMLIMIT.
func TestPaceReport(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	gogc := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	outer := paceReport()
	if got := gogc(); got != reportGCPercent {
		t.Fatalf("GOGC %d while a report is built, want %d", got, reportGCPercent)
	}
	inner := paceReport()
	outer() // the first one ends while the second still runs
	if got := gogc(); got != reportGCPercent {
		t.Fatalf("GOGC %d while a second report is built, want %d", got, reportGCPercent)
	}
	inner()
	if got := gogc(); got != 150 {
		t.Fatalf("GOGC %d after the reports, want the caller's 150", got)
	}
	t.Setenv("GOGC", "100")
	paceReport()()
	restore := paceReport()
	if got := gogc(); got != 150 {
		t.Fatalf("GOGC %d with GOGC set by the user, want 150 untouched", got)
	}
	restore()
}
