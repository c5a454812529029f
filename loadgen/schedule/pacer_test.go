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
	// The last two are longer than IdleWakeThreshold: the timerfd until IdleWakeLead before, then the spin.
	for _, ahead := range []time.Duration{-time.Second, 0, 200 * time.Microsecond, 3 * time.Millisecond,
		IdleWakeThreshold + time.Millisecond, 3 * IdleWakeThreshold} {
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
	// Cancelled in the spin after an idle wake-up (spinUntil).
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Microsecond); cancel() }()
	if err := spinUntil(ctx, ctx.Done(), time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled in spinUntil: err = %v", err)
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

// BenchmarkWaitUntilLag measures how late the pacer returns (its own dispatch lag) waiting
// each time for a target 0.3–4.3 ms ahead: WaitUntil itself ("timerfd" on Linux, else the
// fallback) and the fallback wait with several timer/spin leads ("spin-only" polls the clock
// for the whole lead, no nanosleep phase). It reports p50/p99/max lag in µs and the process
// CPU time per wait in µs. Run it on an idle and on a busy process (e.g. beside the client
// benchmarks) to see the two wake-up paths.
//
//	go test -run '^$' -bench WaitUntilLag -benchtime 2000x ./loadgen/schedule
func BenchmarkWaitUntilLag(b *testing.B) {
	type wait struct {
		name string
		fn   func(context.Context, time.Time) error
	}
	fallback := func(timer, spin time.Duration) wait {
		name := fmt.Sprintf("fallback/timer=%v/spin-only", timer)
		if spin < timer {
			name = fmt.Sprintf("fallback/timer=%v/nanosleep/spin=%v", timer, spin)
		}
		return wait{name, func(ctx context.Context, t time.Time) error { return waitUntil(ctx, t, timer, spin) }}
	}
	cases := []wait{{"WaitUntil", WaitUntil}, fallback(0, 0), fallback(500*time.Microsecond, 500*time.Microsecond),
		fallback(time.Millisecond, time.Millisecond), fallback(TimerLead, TimerLead), fallback(2*time.Millisecond, 2*time.Millisecond)}
	if fineSleepSupported {
		cases = append(cases, fallback(TimerLead, 100*time.Microsecond), fallback(TimerLead, SpinLead), fallback(TimerLead, 400*time.Microsecond))
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			lags := make([]float64, 0, b.N)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ahead := 300*time.Microsecond + time.Duration(i%17)*250*time.Microsecond
				target := time.Now().Add(ahead)
				if err := c.fn(ctx, target); err != nil {
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
