package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestWaitUntilReturnsAfterTarget(t *testing.T) {
	ctx := context.Background()
	for _, ahead := range []time.Duration{-time.Second, 0, 200 * time.Microsecond, 3 * time.Millisecond} {
		target := time.Now().Add(ahead)
		if err := WaitUntil(ctx, target); err != nil {
			t.Fatal(err)
		}
		// Never early (an ordering fact, not a speed assertion).
		if now := time.Now(); now.Before(target) {
			t.Fatalf("returned %v before its target", target.Sub(now))
		}
	}
}

func TestWaitUntilContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitUntil(ctx, time.Now().Add(-time.Second)); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context, past target: err = %v", err)
	}
	// Cancelled during the sleep phase.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	target := time.Now().Add(time.Hour)
	if err := WaitUntil(ctx, target); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while sleeping: err = %v", err)
	}
	// Cancelled during the spin phase: the whole wait is inside the spin window.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Microsecond); cancel() }()
	if err := waitUntil(ctx, time.Now().Add(time.Hour), 2*time.Hour, 2*time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while spinning: err = %v", err)
	}
	// Cancelled during the nanosleep phase (seen when a short sleep returns).
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Microsecond); cancel() }()
	if err := waitUntil(ctx, time.Now().Add(time.Hour), 2*time.Hour, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled in the fine sleep: err = %v", err)
	}
	// A deadline that passes before the target.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	if err := WaitUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: err = %v", err)
	}
}

// BenchmarkWaitUntilLag measures how late WaitUntil returns (the pacer's own dispatch lag)
// for several timer/spin leads, waiting each time for a target 0.3–4.3 ms ahead, and
// reports p50/p99/max lag in µs and the process CPU time per wait in µs. "spin-only" polls
// the clock for the whole lead (no nanosleep phase).
//
//	go test -run '^$' -bench WaitUntilLag -benchtime 2000x ./loadgen/schedule
func BenchmarkWaitUntilLag(b *testing.B) {
	type lead struct{ timer, spin time.Duration }
	cases := []lead{
		{0, 0},
		{500 * time.Microsecond, 500 * time.Microsecond},
		{time.Millisecond, time.Millisecond},
		{TimerLead, TimerLead},
		{2 * time.Millisecond, 2 * time.Millisecond},
	}
	if fineSleepSupported {
		cases = append(cases, lead{TimerLead, 100 * time.Microsecond}, lead{TimerLead, SpinLead}, lead{TimerLead, 400 * time.Microsecond})
	}
	for _, c := range cases {
		name := fmt.Sprintf("timer=%v/spin-only", c.timer)
		if c.spin < c.timer {
			name = fmt.Sprintf("timer=%v/nanosleep/spin=%v", c.timer, c.spin)
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			lags := make([]float64, 0, b.N)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ahead := 300*time.Microsecond + time.Duration(i%17)*250*time.Microsecond
				target := time.Now().Add(ahead)
				if err := waitUntil(ctx, target, c.timer, c.spin); err != nil {
					b.Fatal(err)
				}
				lags = append(lags, float64(time.Since(target))/float64(time.Microsecond))
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			slices.Sort(lags)
			q := func(p float64) float64 { return lags[int(p*float64(len(lags)-1))] }
			b.ReportMetric(q(0.5), "p50-lag-µs")
			b.ReportMetric(q(0.99), "p99-lag-µs")
			b.ReportMetric(lags[len(lags)-1], "max-lag-µs")
			b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/wait")
			b.ReportMetric(0, "ns/op")
		})
	}
}
