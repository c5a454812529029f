package shard

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/jonboulle/clockwork"
)

func TestMinRTTPicksTheShortestProbe(t *testing.T) {
	// The shard's clock is 5 ms behind the coordinator's. Probe A: 200 ns out, 50 ns in the
	// coordinator, 300 ns back (rtt 500); probe B: 2 µs out, 1 µs back (rtt 3000).
	const off = 5_000_000
	a := Probe{T0: 1000, T1: 1000 + 200 + off, T2: 1000 + 200 + off + 50, T3: 1000 + 200 + 50 + 300}
	b := Probe{T0: 9000, T1: 9000 + 2000 + off, T2: 9000 + 2000 + off, T3: 9000 + 3000}
	got, ok := MinRTT([]Probe{b, a})
	if !ok || got.RTTNS != 500 || got.UncertaintyNS != 250 || got.Probes != 2 {
		t.Fatalf("estimate %+v", got)
	}
	// ((t1−t0)+(t2−t3))/2 = ((200+off) + (off−300))/2 = off − 50: off by half the path
	// asymmetry (200−300)/2, within the uncertainty.
	want := int64(((200 + off) + (off + 200 + 50 - 550)) / 2)
	if got.OffsetNS != want || abs64(got.OffsetNS-off) > got.UncertaintyNS {
		t.Fatalf("offset %d, want %d (true %d ± %d)", got.OffsetNS, want, off, got.UncertaintyNS)
	}
	if _, ok := MinRTT([]Probe{{T0: 10, T1: 0, T2: 100, T3: 20}}); ok {
		t.Fatal("a negative round trip is no estimate")
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func TestCoordinatorRefusesAndStarts(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	c, err := NewCoordinator(Options{Shards: 3, StartDelay: 2 * time.Second, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	reg := func(k int) Registration { return Registration{Shard: k, Shards: 3, RunID: "r", WorkloadDigest: "d"} }
	if err := c.Register(reg(0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    Registration
		want string
	}{
		{reg(0), "shard 0 is already registered"},
		{Registration{Shard: 1, Shards: 4, RunID: "r", WorkloadDigest: "d"}, "says 4 shards; the coordinator runs 3"},
		{Registration{Shard: 1, Shards: 3, RunID: "other", WorkloadDigest: "d"}, `is of run "other"`},
		{Registration{Shard: 1, Shards: 3, RunID: "r", WorkloadDigest: "x"}, "has workload digest x"},
		{Registration{Shard: 3, Shards: 3, RunID: "r", WorkloadDigest: "d"}, "outside 0..2"},
	} {
		if err := c.Register(tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.r, err, tc.want)
		}
	}
	if _, _, decided := c.Outcome(context.Background(), 0); decided {
		t.Fatal("decided before every shard registered")
	}
	c.Register(reg(2))
	fc.Advance(700 * time.Millisecond)
	last := fc.Now()
	c.Register(reg(1))
	start, abort, decided := c.Outcome(context.Background(), time.Second)
	if !decided || abort != "" || !start.Equal(last.Add(2*time.Second)) {
		t.Fatalf("start %v abort %q decided %v, want %v", start, abort, decided, last.Add(2*time.Second))
	}
	if err := c.Register(reg(1)); err == nil || !strings.Contains(err.Error(), "after the run started") {
		t.Fatalf("late registration: %v", err)
	}
}

func TestCoordinatorAbortsAtTheDeadline(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c, _ := NewCoordinator(Options{Shards: 3, StartDeadline: time.Minute, Clock: fc})
	c.Register(Registration{Shard: 1, Shards: 3, RunID: "r", WorkloadDigest: "d"})
	fc.BlockUntilContext(context.Background(), 1) // the deadline timer
	fc.Advance(time.Minute)
	_, abort, decided := c.Outcome(context.Background(), time.Hour)
	if !decided || abort != "shard 0, 2 did not register within the start deadline (1m0s): the run is aborted on every shard" {
		t.Fatalf("abort %q decided %v", abort, decided)
	}
	if err := c.Register(Registration{Shard: 0, Shards: 3, RunID: "r", WorkloadDigest: "d"}); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("registration after the abort: %v", err)
	}
}

// TestGateOverHTTP: two shards whose clocks are 3 s behind and 1.5 s ahead of the
// coordinator's register, record their offsets exactly (the fake clocks do not move during
// a probe: round trip 0), and each wakes at the coordinator's start time on its own clock.
func TestGateOverHTTP(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	coord := clockwork.NewFakeClockAt(base)
	c, _ := NewCoordinator(Options{Shards: 2, StartDelay: 2 * time.Second, PollWait: time.Hour, Clock: coord, ClockDomain: "coord/unix_epoch_ns"})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	offsets := []time.Duration{3 * time.Second, -1500 * time.Millisecond} // coordinator − shard
	clocks := make([]*clockwork.FakeClock, 2)
	sinks := make([]*artifact.Memory, 2)
	done := make([]chan error, 2)
	for k := range clocks {
		clocks[k] = clockwork.NewFakeClockAt(base.Add(-offsets[k]))
		sinks[k] = &artifact.Memory{}
		done[k] = make(chan error, 1)
		g := &Gate{Client: &Client{Base: srv.URL, Clock: clocks[k], Probes: 3}, Shard: k, Shards: 2}
		head := artifact.Context{RunID: "run-g", SessionID: "s", ClockDomain: "shard/unix_epoch_ns"}
		go func(k int) { done[k] <- g.Wait(context.Background(), sinks[k], head, "digest") }(k)
	}
	testkit.WaitFor(t, "both shards registered", 10*time.Second, func() bool { return len(c.Registered()) == 2 })
	start, _, _ := c.Outcome(context.Background(), time.Second)
	for k, fc := range clocks {
		fc.BlockUntilContext(context.Background(), 1) // the gate's sleep
		local := start.Add(-offsets[k])
		fc.Advance(local.Sub(fc.Now()) - time.Nanosecond)
		select {
		case err := <-done[k]:
			t.Fatalf("shard %d woke before the start: %v", k, err)
		default:
		}
		fc.Advance(time.Nanosecond)
		if err := <-done[k]; err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
		recs := sinks[k].Records()
		ca, ok := recs[0].(*artifact.ClockAlignment)
		if len(recs) != 1 || !ok || ca.OffsetNS != int64(offsets[k]) || ca.UncertaintyNS != 0 ||
			ca.Metadata["method"] != artifact.ClockMethodShardCoordinator || ca.ToClockDomain != "coord/unix_epoch_ns" || ca.Context.RunID != "run-g" {
			t.Fatalf("shard %d records %+v", k, recs)
		}
	}
}

func TestGateRefusedAndAborted(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c, _ := NewCoordinator(Options{Shards: 2, StartDeadline: time.Minute, PollWait: time.Hour, Clock: fc})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	head := artifact.Context{RunID: "run-a", ClockDomain: "shard/unix_epoch_ns"}
	g := &Gate{Client: &Client{Base: srv.URL, Probes: 1}, Shard: 0, Shards: 2}
	errc := make(chan error, 1)
	go func() { errc <- g.Wait(context.Background(), &artifact.Memory{}, head, "d") }()
	testkit.WaitFor(t, "shard 0 registered", 10*time.Second, func() bool { return len(c.Registered()) == 1 })
	// A second shard 0 is refused.
	dup := &Gate{Client: &Client{Base: srv.URL, Probes: 1}, Shard: 0, Shards: 2}
	if err := dup.Wait(context.Background(), &artifact.Memory{}, head, "d"); err == nil || !strings.Contains(err.Error(), "shard 0 is already registered") {
		t.Fatalf("duplicate: %v", err)
	}
	fc.BlockUntilContext(context.Background(), 2) // the deadline timer and shard 0's poll
	fc.Advance(time.Minute)
	if err := <-errc; !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "shard 1 did not register") {
		t.Fatalf("aborted start: %v", err)
	}
	unreachable := &Gate{Client: &Client{Base: "http://127.0.0.1:1", RegisterRetry: 600 * time.Millisecond}, Shard: 1, Shards: 2}
	began := time.Now()
	if err := unreachable.Wait(context.Background(), &artifact.Memory{}, head, "d"); err == nil || !strings.Contains(err.Error(), "coordinator http://127.0.0.1:1") {
		t.Fatalf("unreachable coordinator: %v", err)
	}
	if waited := time.Since(began); waited < 500*time.Millisecond {
		t.Fatalf("an unreachable coordinator was given up after %v, not retried for 600 ms", waited)
	}
}
