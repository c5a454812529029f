package schedule

import (
	"context"
	"runtime"
	"time"
)

// How WaitUntil waits. On Linux it arms a timerfd (CLOCK_MONOTONIC, TFD_TIMER_ABSTIME) at
// the target and reads it through the runtime's netpoller (timerfdWait): the goroutine is
// parked, no thread sleeps in a system call (a thread in nanosleep(2) kept the runtime's
// monitor thread waking every 20 µs to take its P back) and nothing spins; the read's
// deadline, also the target, wakes it when the process is too busy to poll the network.
// Where no timerfd can be used (another OS, or timerfd_create or the netpoller refusing
// one) it falls back to sleeping on a Go timer until TimerLead before the target — a Go
// timer shorter than 1 ms fires after about 1.07 ms on Linux, and a longer one typically
// ~0.6 ms and at times more than 1 ms late (golang/go#53824: the netpoller waits with
// millisecond resolution) — then, on Linux, in nanosleep(2) (~0.1 ms late: the kernel's
// 50 µs timer slack plus wake-up latency) until SpinLead before the target, and finally
// polling the clock (elsewhere it polls from TimerLead on). BenchmarkWaitUntilLag
// (pacer_test.go) reports lag percentiles and CPU per wait for the timerfd wait and for
// fallback settings: a shorter lead lets the sleeps' lateness through as dispatch lag, a
// longer one burns more CPU (and, on a loaded machine, invites preemption while spinning).
const (
	TimerLead = 1500 * time.Microsecond
	SpinLead  = 250 * time.Microsecond
)

// WaitUntil blocks until target (an absolute time, e.g. phaseStart.Add(offset)) or until
// ctx is done, whichever comes first. It returns ctx.Err() when ctx ended the wait (also
// when ctx is already done on entry, and when the cancellation and the target come
// together) and nil once the clock has reached target; a target in the past returns at
// once; it never returns before target. On Linux it waits on a timerfd (see TimerLead),
// typically returning some µs after target with a few µs of CPU per call, and sees a
// cancellation at once; the fallback returns within µs after target using up to about
// SpinLead of CPU per call (TimerLead without nanosleep) and sees a cancellation within
// about a millisecond. Measure the resulting dispatch lag (sent − intended); never assume it.
func WaitUntil(ctx context.Context, target time.Time) error {
	if cancelled(ctx.Done()) {
		return ctx.Err()
	}
	if !time.Now().Before(target) {
		return nil
	}
	wake := target
	if time.Until(target) > IdleWakeThreshold {
		wake = target.Add(-IdleWakeLead)
	}
	if err, ok := timerfdWait(ctx, wake); ok {
		if err != nil || !wake.Before(target) {
			return err
		}
		return spinUntil(ctx, ctx.Done(), target)
	}
	return waitUntil(ctx, target, TimerLead, SpinLead)
}

// A wait longer than IdleWakeThreshold lets the process go idle, and a wake-up from idle
// is late (measured here at 20 and 100 arrivals/s: dispatch lag p50 0.26–0.44 ms, p99
// 0.64–1.42 ms on the timerfd alone, against 0.11–0.23 and 0.31–0.68 ms for the old spinning
// wait), so such a wait parks on the timerfd only until IdleWakeLead before its target and
// polls the clock from there (p50 0.12–0.21 ms, p99 0.35–0.71 ms): at most IdleWakeLead of CPU
// per arrival, only at rates under 1/IdleWakeThreshold (250/s), where arrivals are few.
const (
	IdleWakeThreshold = 4 * time.Millisecond
	IdleWakeLead      = 300 * time.Microsecond
)

// spinUntil polls the clock, yielding the P between reads, until target (nil) or until done
// is closed (ctx.Err()).
func spinUntil(ctx context.Context, done <-chan struct{}, target time.Time) error {
	for time.Now().Before(target) {
		if cancelled(done) {
			return ctx.Err()
		}
		runtime.Gosched()
	}
	return nil
}

// waitUntil is the fallback wait: a Go timer until timerLead before target, then (where
// fineSleepSupported and spinLead < timerLead) nanosleep until spinLead before it, then a
// Gosched spin on the clock.
func waitUntil(ctx context.Context, target time.Time, timerLead, spinLead time.Duration) error {
	done := ctx.Done()
	if cancelled(done) {
		return ctx.Err()
	}
	if d := time.Until(target) - timerLead; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return ctx.Err()
		}
	}
	if spinLead < timerLead && fineSleepSupported {
		for {
			rem := time.Until(target) - spinLead
			if rem <= 0 {
				break
			}
			fineSleep(min(rem, maxFineSleep))
			if cancelled(done) {
				return ctx.Err()
			}
		}
	}
	return spinUntil(ctx, done, target)
}

// maxFineSleep bounds one nanosleep, so that a cancellation is seen within about that long.
const maxFineSleep = time.Millisecond

func cancelled(done <-chan struct{}) bool {
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}
