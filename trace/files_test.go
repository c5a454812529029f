package trace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerRank(t *testing.T) {
	cases := map[string]int{
		"rank0.1733.pt.trace.json.gz":                      0,
		"rank12.1733.pt.trace.json":                        12,
		"dp0_pp1_tp2_dcp0_ep3_rank7.1733.pt.trace.json.gz": 7,
	}
	for name, want := range cases {
		if got, ok := workerRank(name); !ok || got != want {
			t.Errorf("workerRank(%q) = %d %v, want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{
		"rank0.async_llm.1733.pt.trace.json.gz", "async_llm.1733.pt.trace.json", "rank0.1733.pt.trace.json.gz.tmp",
		"rankx.1.pt.trace.json", "rank0.pt.trace.json", "notes.txt", "rank99999999999999999999.1.pt.trace.json",
	} {
		if _, ok := workerRank(name); ok {
			t.Errorf("workerRank(%q): a worker trace", name)
		}
	}
}

// TestWindowFindsNewWorkerTraces: the stop writes two worker traces (one first as .tmp,
// renamed later), the front-end's async_llm trace and a non-trace file; a worker trace that
// was there before the window is not taken.
func TestWindowFindsNewWorkerTraces(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rank0.100.pt.trace.json.gz", "old")
	f := newFakeServer(t, statusHandler(200))
	f.onStop = func() {
		writeFile(t, dir, "rank0.200.pt.trace.json.gz", "abcd")
		writeFile(t, dir, "rank0.async_llm.200.pt.trace.json.gz", "front")
		writeFile(t, dir, "dp0_pp0_tp1_dcp0_ep0_rank1.200.pt.trace.json.gz.tmp", "partial")
		writeFile(t, dir, "README", "x")
	}
	fc := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Dir, o.Clock = dir, fc })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	done := async(func() { c.PhaseEnd(ctx, "c1", "measured") })
	// The .tmp keeps the window waiting past Settle; rename it after 8 s.
	for i := 0; i < 40; i++ {
		_ = fc.BlockUntilContext(ctx, 1)
		fc.Advance(DefaultPoll)
	}
	select {
	case <-done:
		t.Fatal("the window stopped waiting while a .tmp trace was pending")
	default:
	}
	if err := os.Rename(filepath.Join(dir, "dp0_pp0_tp1_dcp0_ep0_rank1.200.pt.trace.json.gz.tmp"), filepath.Join(dir, "dp0_pp0_tp1_dcp0_ep0_rank1.200.pt.trace.json.gz")); err != nil {
		t.Fatal(err)
	}
	drive(fc, DefaultPoll, done)
	w := windows(mem)[0]
	want := []artifact.TraceFile{
		{Path: filepath.Join(dir, "dp0_pp0_tp1_dcp0_ep0_rank1.200.pt.trace.json.gz"), Bytes: 7, Rank: 1},
		{Path: filepath.Join(dir, "rank0.200.pt.trace.json.gz"), Bytes: 4, Rank: 0},
	}
	if len(w.TraceFiles) != 2 || w.TraceFiles[0] != want[0] || w.TraceFiles[1] != want[1] {
		t.Fatalf("trace files %+v, want %+v", w.TraceFiles, want)
	}
	if w.StopReason != artifact.StopPhaseEnd {
		t.Fatalf("stop reason %q", w.StopReason)
	}
	// The wait ended Settle after the last new file (the rename, 8 s after the stop).
	if got := fc.Since(time.Unix(1000, 0)); got < 13*time.Second || got > 14*time.Second {
		t.Fatalf("waited %s after the stop, want about 8 s + Settle", got)
	}
}

// TestWindowStopsWaitingWithoutFiles: no file appears; the wait ends Settle after the stop.
func TestWindowStopsWaitingWithoutFiles(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, statusHandler(200))
	fc := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Dir, o.Clock, o.Settle, o.Poll = dir, fc, 2*time.Second, time.Second })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	done := async(func() { c.PhaseEnd(ctx, "c1", "measured") })
	drive(fc, time.Second, done)
	w := windows(mem)[0]
	if len(w.TraceFiles) != 0 || fc.Since(time.Unix(1000, 0)) != 2*time.Second {
		t.Fatalf("files %+v after %s", w.TraceFiles, fc.Since(time.Unix(1000, 0)))
	}
}

// TestStoppedByServer: a worker trace that appears before our stop (max_iterations) makes the
// window's stop_reason stopped_by_server; the stop is still sent, once.
func TestStoppedByServer(t *testing.T) {
	dir := t.TempDir()
	f := newFakeServer(t, statusHandler(200))
	fc := clockwork.NewFakeClock()
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Dir, o.Clock = dir, fc })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	writeFile(t, dir, "rank0.5.pt.trace.json", "{}")
	done := async(func() { c.PhaseEnd(ctx, "c1", "measured") })
	drive(fc, DefaultPoll, done)
	w := windows(mem)[0]
	if _, stops := f.counts(); stops != 1 || w.StopReason != artifact.StopStoppedByServer || len(w.TraceFiles) != 1 || w.TraceFiles[0].Bytes != 2 {
		t.Fatalf("stops %d record %+v", stops, w)
	}
}

// TestMaxSeconds: the window ends at MaxDuration with max_seconds; the phase's end sends no
// second stop and writes no second record.
func TestMaxSeconds(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	fc := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Clock, o.MaxDuration = fc, 30*time.Second })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	_ = fc.BlockUntilContext(ctx, 1)
	fc.Advance(30 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for len(windows(mem)) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the watcher's stop runs on its own goroutine (real HTTP)
	}
	c.PhaseEnd(ctx, "c1", "measured")
	c.Close(ctx)
	ws := windows(mem)
	if _, stops := f.counts(); stops != 1 || len(ws) != 1 {
		t.Fatalf("stops %d records %d", stops, len(ws))
	}
	w := ws[0]
	if w.StopReason != artifact.StopMaxSeconds || *w.StopRequestedAtNS != time.Unix(1030, 0).UnixNano() || w.RequestedAtNS != time.Unix(1000, 0).UnixNano() || *w.StartConfirmedAtNS != w.StartReturnedAtNS {
		t.Fatalf("%+v", w)
	}
}

// TestPhaseEndBeforeMaxSeconds: the phase ends first; the timer is released.
func TestPhaseEndBeforeMaxSeconds(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	fc := clockwork.NewFakeClock()
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Clock, o.MaxDuration = fc, 30*time.Second })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	c.PhaseEnd(ctx, "c1", "measured")
	c.Close(ctx)
	fc.Advance(time.Minute)
	if _, stops := f.counts(); stops != 1 || len(windows(mem)) != 1 || windows(mem)[0].StopReason != artifact.StopPhaseEnd {
		t.Fatalf("stops %d records %+v", stops, windows(mem))
	}
}
