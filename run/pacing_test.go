package run

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
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

// TestRecordGCPercent: the heap may grow by recordHeadroom above the live heap, and never by
// less than the default (GOGC=100).
func TestRecordGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 6400}, {512 << 10, 6400}, {1 << 20, 6400}, {10 << 20, 640}, {48 << 20, 133},
		{64 << 20, 100}, {65 << 20, 100}, {1 << 30, 100},
	} {
		if got := recordGCPercent(c.live); got != c.want {
			t.Errorf("recordGCPercent(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestPaceRecording: while a run records GOGC follows the live heap after every collection;
// a report built meanwhile takes precedence; the caller's setting is back once both ended;
// the user's GOGC or GOMEMLIMIT is left alone.
func TestPaceRecording(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	gogc := gcPercent
	paced := make(chan pacedAt, 64)
	pacing.Lock()
	pacing.paced = func(p int, live uint64) {
		select {
		case paced <- pacedAt{p, live}:
		default: // never block the collector's cleanups; the test collects again
		}
	}
	pacing.Unlock()
	defer func() { pacing.Lock(); pacing.paced = nil; pacing.Unlock() }()

	stop := sync.OnceFunc(paceRecording())
	defer stop() // also when the test fails: later tests start unpaced
	// The live heap of this test binary is a few MiB: recording pacing is well over 100.
	if got := gogc(); got <= 100 {
		t.Fatalf("GOGC %d while recording with a small live heap, want > 100", got)
	}
	// A live heap over recordHeadroom, kept across the next collection: pacing falls to 100.
	big := make([]byte, recordHeadroom+(8<<20))
	for i := range big {
		big[i] = byte(i)
	}
	// A cleanup of an earlier collection may still be on its way: wait for one that saw big.
	n := uint64(len(big))
	got := waitPaced(t, paced, func(a pacedAt) bool { return a.live >= n })
	if got.gogc != 100 || gogc() != 100 {
		t.Fatalf("GOGC %d (hook %d) with %d MiB live, want 100", gogc(), got.gogc, got.live>>20)
	}
	runtime.KeepAlive(big)
	big = nil
	// Every later collection sets GOGC again from what it found live: over 100 once big is
	// gone (unless the rest of this test binary holds more than recordHeadroom).
	for len(paced) > 0 {
		<-paced
	}
	got = waitPaced(t, paced, func(pacedAt) bool { return true })
	if got.gogc != recordGCPercent(got.live) {
		t.Fatalf("hook reports GOGC %d for %d MiB live, want %d", got.gogc, got.live>>20, recordGCPercent(got.live))
	}
	if got.live < recordHeadroom && gogc() <= 100 {
		t.Fatalf("GOGC %d (hook %d) with %d MiB live after the large heap was freed, want over 100", gogc(), got.gogc, got.live>>20)
	}

	report := paceReport()
	if got := gogc(); got != reportGCPercent {
		t.Fatalf("GOGC %d while a report is built during a run, want %d", got, reportGCPercent)
	}
	runtime.GC() // a collection during the report leaves the report's pacing
	if got := gogc(); got != reportGCPercent {
		t.Fatalf("GOGC %d after a collection during the report, want %d", got, reportGCPercent)
	}
	report()
	if got := gogc(); got <= 100 {
		t.Fatalf("GOGC %d after the report while the run still records, want > 100", got)
	}
	stop()
	if got := gogc(); got != 150 {
		t.Fatalf("GOGC %d after the run, want the caller's 150", got)
	}

	t.Setenv("GOGC", "100")
	restore := paceRecording()
	if got := gogc(); got != 150 {
		t.Fatalf("GOGC %d with GOGC set by the user, want 150 untouched", got)
	}
	restore()
}

// pacedAt is one report of the pacing hook: the GOGC set and the live heap it came from.
type pacedAt struct {
	gogc int
	live uint64
}

// waitPaced collects (runtime.GC) until the pacing hook reports a GOGC that ok accepts, and
// returns it (failing after 60 s).
func waitPaced(t *testing.T, paced <-chan pacedAt, ok func(pacedAt) bool) pacedAt {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		for wait := time.After(200 * time.Millisecond); ; {
			select {
			case a := <-paced:
				if ok(a) {
					return a
				}
				continue
			case <-wait:
			}
			break
		}
	}
	t.Fatal("the pacing hook did not report the expected GOGC after a collection")
	return pacedAt{}
}

// TestGCPercentReadsGOGC checks that the GOGC kept before the first run (keepOld reads it
// with gcPercent) is the one in force, "off" included.
func TestGCPercentReadsGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, want := range []int{37, -1, 100} {
		debug.SetGCPercent(want)
		if got := gcPercent(); got != want {
			t.Errorf("GOGC %d: read %d", want, got)
		}
	}
}
