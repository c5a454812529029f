package loadgen

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// SetClock makes the runner keep its schedule on c: phase starts and window ends, intended
// arrival times, drain deadlines, the wait for abandoned calls and the cache-reset retries
// (a clockwork.FakeClock lets a test move time instead of sleeping). Response times are the
// HTTP client's own and stay on the real clock, so with a fake clock the recorded latencies
// and dispatch lags mean nothing. Call it before Run; the default is the real clock, on
// which arrivals are dispatched by schedule.WaitUntil's pacer (a timerfd wait on Linux).
func (r *Runner) SetClock(c clockwork.Clock) { r.clock, r.realClock = c, false }

// waitUntil blocks until the runner's clock reaches target, or ctx ends (its error).
func (r *Runner) waitUntil(ctx context.Context, target time.Time) error {
	if r.realClock {
		return schedule.WaitUntil(ctx, target)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d := r.clock.Until(target)
	if d <= 0 {
		return nil
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return ctx.Err() // a cancellation that came with the target wins: nothing is sent after it
	case <-ctx.Done():
		return ctx.Err()
	}
}
