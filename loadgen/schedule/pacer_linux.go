package schedule

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const fineSleepSupported = true

// fineSleep sleeps about d in nanosleep(2), blocking this goroutine's thread (the runtime
// hands its P to other goroutines meanwhile). Interrupted sleeps just return early: the
// caller loops on the clock. Only the fallback wait (no timerfd) uses it.
func fineSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}

// waker is one timerfd (CLOCK_MONOTONIC, TFD_NONBLOCK) wrapped in an *os.File, so that a read
// on it parks the reading goroutine in the runtime's netpoller until the timer expires: no
// thread sleeps in a system call and nothing spins.
type waker struct {
	f  *os.File
	fd int
}

// maxFreeWakers bounds the idle wakers kept for reuse (one per concurrent WaitUntil is
// needed; more idle than this are closed).
const maxFreeWakers = 16

var wakers struct {
	mu   sync.Mutex
	free []*waker
	off  bool // creating or arming a timerfd failed once: every later wait uses the fallback
}

// newTimerfd creates the timer of a waker (a variable so that a test can make it fail).
var newTimerfd = func() (int, error) {
	return unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
}

// getWaker returns an idle waker or a new one; nil when timerfds are unavailable.
func getWaker() *waker {
	wakers.mu.Lock()
	if wakers.off {
		wakers.mu.Unlock()
		return nil
	}
	if n := len(wakers.free); n > 0 {
		w := wakers.free[n-1]
		wakers.free = wakers.free[:n-1]
		wakers.mu.Unlock()
		return w
	}
	wakers.mu.Unlock()
	fd, err := newTimerfd()
	if err != nil {
		disableWakers()
		return nil
	}
	w := &waker{f: os.NewFile(uintptr(fd), "pacer-timerfd"), fd: fd}
	if w.f.SetReadDeadline(time.Time{}) != nil { // not in the netpoller: a read would block a thread
		_ = w.f.Close()
		disableWakers()
		return nil
	}
	return w
}

func disableWakers() {
	wakers.mu.Lock()
	wakers.off = true
	wakers.mu.Unlock()
}

// putWaker keeps w for the next wait, or closes it when enough are idle.
func putWaker(w *waker) {
	wakers.mu.Lock()
	if len(wakers.free) < maxFreeWakers && !wakers.off {
		wakers.free = append(wakers.free, w)
		w = nil
	}
	wakers.mu.Unlock()
	if w != nil {
		_ = w.f.Close()
	}
}

// monoBase pairs a time.Time with CLOCK_MONOTONIC read just after it (Go's monotonic clock
// on Linux is CLOCK_MONOTONIC), so that an absolute target converts to the timer's clock
// without a system call per wait; the pairing errs late by the gap between the two reads
// (well under a microsecond), never early.
var monoBase = sync.OnceValues(func() (time.Time, int64) {
	t := time.Now()
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return t, -1
	}
	return t, ts.Nano()
})

// timerfdWait is WaitUntil on a timerfd: ok is false when no timerfd could be used (the
// caller falls back), else err is WaitUntil's result. The timer is armed at target with
// TFD_TIMER_ABSTIME; the read's deadline is also target, a backstop that the runtime's
// scheduler checks on every scheduling round (so a busy process, whose netpoller is polled
// only when a P runs out of work, still wakes the pacer on time, and first: a deadline wakes
// its goroutine into the P's next slot). A cancellation moves the deadline to the past.
// A wake-up before target (a stale expiry) reads again, so it never returns early.
func timerfdWait(ctx context.Context, target time.Time) (err error, ok bool) {
	base, baseNS := monoBase()
	if baseNS < 0 {
		return nil, false
	}
	w := getWaker()
	if w == nil {
		return nil, false
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(baseNS + int64(target.Sub(base)))}
	if unix.TimerfdSettime(w.fd, unix.TFD_TIMER_ABSTIME, &spec, nil) != nil || w.f.SetReadDeadline(target) != nil {
		_ = w.f.Close()
		disableWakers()
		return nil, false
	}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Unix(1, 0)) })
	}
	var buf [8]byte
	var rerr error
	for ctx.Err() == nil && time.Now().Before(target) {
		if _, rerr = w.f.Read(buf[:]); rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) {
			break
		}
		rerr = nil
	}
	if !stop() {
		// The cancellation's deadline may land after this wait: the waker is not reused.
		_ = w.f.Close()
		return ctx.Err(), true
	}
	if rerr != nil { // the timerfd failed under us: finish on the fallback
		_ = w.f.Close()
		disableWakers()
		return waitUntil(ctx, target, TimerLead, SpinLead), true
	}
	putWaker(w)
	if err := ctx.Err(); err != nil {
		return err, true
	}
	return nil, true
}
