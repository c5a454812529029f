package schedule

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// freeWakers is how many idle wakers the pool holds.
func freeWakers() int {
	wakers.mu.Lock()
	defer wakers.mu.Unlock()
	return len(wakers.free)
}

func TestTimerfdWaitUsed(t *testing.T) {
	target := time.Now().Add(2 * time.Millisecond)
	err, ok := timerfdWait(context.Background(), target)
	if !ok || err != nil {
		t.Fatalf("timerfdWait: ok %v err %v, want the timerfd wait to be used", ok, err)
	}
	if time.Now().Before(target) {
		t.Fatal("returned before its target")
	}
	if n := freeWakers(); n < 1 {
		t.Fatalf("%d idle wakers after a completed wait, want the waker kept", n)
	}
}

func TestTimerfdWaitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err, ok := timerfdWait(ctx, time.Now().Add(time.Hour)); !ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during the wait: ok %v err %v", ok, err)
	}
	// A deadline before the target.
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := WaitUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: err = %v", err)
	}
	// The pool still serves waits that end at their target, never before it.
	for range 3 {
		target := time.Now().Add(time.Millisecond)
		if err := WaitUntil(context.Background(), target); err != nil || time.Now().Before(target) {
			t.Fatalf("after a cancelled wait: err %v, early %v", err, time.Now().Before(target))
		}
	}
}

// A waker whose timer already expired unread (a tick pending, as after a wait the deadline
// ended first) must not end the next wait early.
func TestTimerfdWaitStaleExpiry(t *testing.T) {
	w := getWaker()
	if w == nil {
		t.Fatal("no timerfd waker")
	}
	spec := unix.ItimerSpec{Value: unix.Timespec{Nsec: 1}} // relative 1 ns: expires at once
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Microsecond) // let it expire (the tick stays unread)
	putWaker(w)
	for range 2 * maxFreeWakers { // whichever waker the next wait takes
		target := time.Now().Add(500 * time.Microsecond)
		if err := WaitUntil(context.Background(), target); err != nil {
			t.Fatal(err)
		}
		if now := time.Now(); now.Before(target) {
			t.Fatalf("returned %v before its target", target.Sub(now))
		}
	}
}

func TestTimerfdWaitConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	early := make(chan time.Duration, 64)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				target := time.Now().Add(time.Duration(100+37*g+11*i) * time.Microsecond)
				if err := WaitUntil(context.Background(), target); err != nil {
					t.Error(err)
				}
				if now := time.Now(); now.Before(target) {
					early <- target.Sub(now)
				}
			}
		}()
	}
	wg.Wait()
	close(early)
	for d := range early {
		t.Errorf("a wait returned %v before its target", d)
	}
	if n := freeWakers(); n > maxFreeWakers {
		t.Fatalf("%d idle wakers, want at most %d", n, maxFreeWakers)
	}
}

// Without timerfds (timerfd_create failing) WaitUntil keeps its contract on the fallback.
func TestWaitUntilWithoutTimerfd(t *testing.T) {
	wakers.mu.Lock()
	saved := wakers.free
	wakers.free = nil
	wakers.mu.Unlock()
	create := newTimerfd
	newTimerfd = func() (int, error) { return -1, unix.EMFILE }
	t.Cleanup(func() {
		newTimerfd = create
		wakers.mu.Lock()
		wakers.free, wakers.off = saved, false
		wakers.mu.Unlock()
	})
	if _, ok := timerfdWait(context.Background(), time.Now().Add(time.Millisecond)); ok {
		t.Fatal("timerfdWait used a timerfd that could not be created")
	}
	target := time.Now().Add(2 * time.Millisecond)
	if err := WaitUntil(context.Background(), target); err != nil || time.Now().Before(target) {
		t.Fatalf("fallback: err %v, early %v", err, time.Now().Before(target))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := WaitUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("fallback cancelled: err = %v", err)
	}
}
