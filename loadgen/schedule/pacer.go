package schedule

import (
	"context"
	"runtime"
	"time"
)

// Pacer timing. A Go timer shorter than 1 ms fires after about 1.07 ms on Linux, and a
// longer one typically ~0.6 ms and at times more than 1 ms late (golang/go#53824: the
// netpoller waits with millisecond resolution), so WaitUntil sleeps on a Go timer only until
// TimerLead before its target. On Linux it then sleeps in nanosleep(2), which wakes
// ~0.1 ms late here (the kernel's 50 µs timer slack plus wake-up latency), until SpinLead
// before the target, and finally polls the clock. Elsewhere it polls from TimerLead on.
// Both were chosen with BenchmarkWaitUntilLag (pacer_test.go), which reports lag
// percentiles and CPU per wait for each setting: a shorter lead lets the sleeps' lateness
// through as dispatch lag, a longer one burns more CPU (and, on a loaded machine, invites
// preemption while spinning).
const (
	TimerLead = 1500 * time.Microsecond
	SpinLead  = 250 * time.Microsecond
)

// WaitUntil blocks until target (an absolute time, e.g. phaseStart.Add(offset)) or until
// ctx is done, whichever comes first. It returns ctx.Err() when ctx ended the wait (also
// when ctx is already done on entry) and nil once the clock has reached target; a target in
// the past returns at once. See TimerLead and SpinLead for how it waits: it typically
// returns within microseconds after target, using up to about SpinLead of CPU per call
// (TimerLead where nanosleep is unavailable); a cancellation that arrives during the
// nanosleep phase is seen within about a millisecond. Measure the resulting dispatch lag (sent −
// intended); never assume it.
func WaitUntil(ctx context.Context, target time.Time) error {
	return waitUntil(ctx, target, TimerLead, SpinLead)
}

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
	for time.Now().Before(target) {
		if cancelled(done) {
			return ctx.Err()
		}
		runtime.Gosched()
	}
	return nil
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
