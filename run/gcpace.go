package run

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The run package is the one owner of the collector's pacing (GOGC) while runs record and
// while their reports are built; nothing changes when the user set GOGC or GOMEMLIMIT.
//
// While a run records, a collection's mark phase takes the client's one core from the stream
// readers for 10–17 ms (measured at 2,000/s with 5 ms between events, 150–200 streams open,
// 10 MiB live): at the default pacing (GOGC=100, a cycle every 0.4 s) 1% of requests were
// read more than 5 ms late, and Linux then stamps their first content with the next event's
// arrival (coalesced segments carry the newest receive time), so TTFT p99 read 5 ms over the
// truth. Recording pacing lets the heap grow by at least recordHeadroom above the live heap
// between collections — GOGC = max(100, 100·recordHeadroom/live), recomputed after every
// cycle — so a small live heap is collected every 64 MiB of allocation instead of every 10,
// and a live heap over recordHeadroom is paced exactly as by default (2× live): the memory
// of a large or overloaded run does not grow. A report being built takes precedence.

// reportGCPercent is the collector's GOGC while a run's report is built (readBack).
const reportGCPercent = 25

// recordHeadroom is the least heap growth between two collections while a run records.
const recordHeadroom = 64 << 20

// pacing counts the runs recording and the reports being built, and keeps the GOGC that was
// in force before the first of them began.
var pacing struct {
	sync.Mutex
	runs, reports int
	old           int
	armed         bool // a gcTick is waiting for the next collection
	live          []metrics.Sample
	// paced, when set (tests), is called with the GOGC set after each collection and the
	// live heap it was set from.
	paced func(gogc int, live uint64)
}

// userPacing reports whether the user set the collector's pacing (GOGC or GOMEMLIMIT): the
// run then leaves it alone.
func userPacing() bool { return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" }

// recordGCPercent is the GOGC that lets a heap with live bytes grow by recordHeadroom (at
// least 100, the default; live under 1 MiB counts as 1 MiB).
func recordGCPercent(live uint64) int {
	live = max(live, 1<<20)
	return max(100, int(recordHeadroom*100/live))
}

// paceRecording applies recording pacing until the returned function is called (once per run;
// runs may overlap: the last one to end restores the GOGC in force before the first began).
func paceRecording() (restore func()) {
	if userPacing() {
		return func() {}
	}
	pacing.Lock()
	keepOld()
	pacing.runs++
	if pacing.reports == 0 {
		setRecordPacing()
	}
	armGCTick()
	pacing.Unlock()
	return func() {
		pacing.Lock()
		pacing.runs--
		settle()
		pacing.Unlock()
	}
}

// paceReport lowers the collector's pacing for the report about to be built and returns the
// function that restores it: the heap of the run that recorded the artifact is returned to
// the system first (debug.FreeOSMemory), and GOGC is reportGCPercent until the last of the
// reports being built at once (a daemon's runs) is done. The read-back view is almost all
// live memory, so the default pacing (GOGC=100) would let the heap grow to twice it: an
// artifact of 30,000 streamed requests (43 MB) took the run's process from 63 MiB while
// recording to 154 MiB, and to about 120 MiB with this pacing, for ~0.2 s more CPU. The
// report is the same.
func paceReport() (restore func()) {
	if userPacing() {
		return func() {}
	}
	pacing.Lock()
	keepOld()
	if pacing.reports == 0 {
		debug.FreeOSMemory()
		debug.SetGCPercent(reportGCPercent)
	}
	pacing.reports++
	pacing.Unlock()
	return func() {
		pacing.Lock()
		pacing.reports--
		settle()
		pacing.Unlock()
	}
}

// keepOld keeps the GOGC in force when the first run or report begins (pacing held), read
// from runtime/metrics: a getter, so no collection in progress is waited for.
func keepOld() {
	if pacing.runs+pacing.reports == 0 {
		pacing.old = gcPercent()
	}
}

// gcPercent returns the GOGC in force (-1 for off), from runtime/metrics.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return int(int64(s[0].Value.Uint64())) // off (-1) reads as 2⁶⁴−1
	}
	p := debug.SetGCPercent(-1) // a runtime without the metric
	debug.SetGCPercent(p)
	return p
}

// settle sets the pacing that follows a run's or a report's end (pacing held): the report's
// while one is built, recording pacing while a run records, else the GOGC from before.
func settle() {
	switch {
	case pacing.reports > 0:
	case pacing.runs > 0:
		setRecordPacing()
	default:
		debug.SetGCPercent(pacing.old)
	}
}

// setRecordPacing sets GOGC from the live heap of the last collection (pacing held) and
// returns both.
func setRecordPacing() (int, uint64) {
	if pacing.live == nil {
		pacing.live = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	metrics.Read(pacing.live)
	live := uint64(0)
	if v := pacing.live[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	p := recordGCPercent(live)
	debug.SetGCPercent(p)
	return p, live
}

// gcTick is an object whose cleanup runs after the collection that found it unreachable:
// the hook by which recording pacing is recomputed once per cycle. It holds a pointer so that
// it is not a tiny allocation (those are freed in batches).
type gcTick struct{ _ *byte }

// armGCTick makes the next collection call onGC (pacing held; once armed, no second tick).
func armGCTick() {
	if pacing.armed {
		return
	}
	pacing.armed = true
	runtime.AddCleanup(&gcTick{}, func(struct{}) { onGC() }, struct{}{})
}

// onGC recomputes recording pacing after a collection and waits for the next one while a
// run records.
func onGC() {
	pacing.Lock()
	defer pacing.Unlock()
	pacing.armed = false
	if pacing.runs == 0 {
		return
	}
	if pacing.reports == 0 {
		p, live := setRecordPacing()
		if pacing.paced != nil {
			pacing.paced(p, live)
		}
	}
	armGCTick()
}
