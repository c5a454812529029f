package receiver

import (
	"context"
	"sync"
	"time"
)

// Backpressure: an OTLP/HTTP export that finds no room (the queue near
// full, or MaxConcurrentExports exports in flight) waits for it, its body
// unread, rather than being refused at once. The unread bytes stay in the
// kernel's socket buffers, so TCP flow control throttles the sender, and a
// waiting export costs no CPU; a refused one costs its headers, its answer
// and the sender's reconnection (about 200 µs of the receiver's core for a
// 300 kB export), which under a 10× flood took a third of the core. At most
// MaxWaitingExports wait at once (beyond, an export is refused at once, as
// without waiting), each at most AdmissionWait (then refused retryably:
// 429/503 with Retry-After). No body is read before admission, so waiting
// holds no decode memory: a waiting export costs its connection's
// goroutine and buffers (about 20 KiB). gRPC exports never wait: the tap
// that refuses them runs on the connection's reader and must not block.

// waiter is one export waiting for room; wake holds at most one wake-up.
type waiter struct {
	wake chan struct{}
}

// waitList is the FIFO of exports waiting for room. notify wakes its head
// when room may have freed; a woken export that is admitted wakes the next
// (room for one may be room for several), one that is not waits on.
type waitList struct {
	mu      sync.Mutex
	max     int // most waiters at once
	waiters []*waiter
	closed  bool // stopping: every waiter is woken, none joins
}

// join adds a waiter at the tail; nil when max are waiting or the list is
// closed.
func (l *waitList) join() *waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.waiters) >= l.max {
		return nil
	}
	w := &waiter{wake: make(chan struct{}, 1)}
	l.waiters = append(l.waiters, w)
	return w
}

// leave removes w; a wake-up it took but did not use is passed to the next
// waiter.
func (l *waitList) leave(w *waiter) {
	l.mu.Lock()
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	select {
	case <-w.wake:
		l.notify()
	default:
	}
}

// notify wakes the head waiter (all of them once closed).
func (l *waitList) notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range l.waiters {
		if i > 0 && !l.closed {
			return
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// close wakes every waiter; none joins after it.
func (l *waitList) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.notify()
}

// waiting returns the number of exports waiting now.
func (l *waitList) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

// timerFunc starts a timer of d: its channel and its stop.
type timerFunc func(d time.Duration) (<-chan time.Time, func() bool)

func realTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// enterWaiting admits an export as enter does, but when it finds no room
// (outcomeBusy or outcomeQueueFull) it waits for room, at most
// Options.AdmissionWait and while ctx lasts, when fewer than
// MaxWaitingExports exports wait already. The refusal it returns is the
// last check's: after the wait, at once past the waiter limit, or
// outcomeStopping when the receiver began to stop. Only the final answer
// is counted (and ExportsWaited for an export that waited).
func (r *Receiver) enterWaiting(ctx context.Context, expect int64) *refusal {
	o, msg := r.tryEnter(expect)
	if o == outcomeAccepted || r.opts.AdmissionWait < 0 {
		return r.refusedUnless(o, msg)
	}
	w := r.waits.join()
	if w == nil {
		return r.refuse(o, msg)
	}
	admitted := false
	defer func() {
		r.waits.leave(w)
		if admitted { // room for one may be room for the next
			r.waits.notify()
		}
	}()
	r.c.exportsWaited.Add(1)
	timeout, stop := r.timer(r.opts.AdmissionWait)
	defer stop()
	for {
		if o, msg = r.tryEnter(expect); o == outcomeAccepted {
			admitted = true
			return nil
		}
		select {
		case <-w.wake:
			if ref := r.checkStopping(); ref != nil {
				return ref
			}
		case <-timeout:
			return r.refuse(o, msg)
		case <-ctx.Done():
			return r.refuse(o, msg)
		}
	}
}

// refusedUnless counts and returns the refusal of o, or nil for
// outcomeAccepted.
func (r *Receiver) refusedUnless(o outcome, msg string) *refusal {
	if o == outcomeAccepted {
		return nil
	}
	return r.refuse(o, msg)
}
