package receiver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/internal/testkit"
)

// fakeTimer is a timerFunc whose timers all fire when fire is closed.
type fakeTimer struct{ fire chan time.Time }

func newFakeTimer() *fakeTimer { return &fakeTimer{fire: make(chan time.Time)} }

func (f *fakeTimer) start(time.Duration) (<-chan time.Time, func() bool) {
	return f.fire, func() bool { return true }
}

// waitingReceiver is a listening receiver with one export slot, held by
// the test, whose admission waits end only when clock fires.
func waitingReceiver(t *testing.T, opts Options) (*Receiver, *fakeTimer) {
	t.Helper()
	opts.MaxConcurrentExports = 1
	r := New(opts)
	clock := newFakeTimer()
	r.timer = clock.start
	if err := r.Listen(context.Background(), "127.0.0.1:0", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	r.slots <- struct{}{}
	return r, clock
}

// postAsync posts an export of n spans and sends its status on the channel.
func postAsync(t *testing.T, r *Receiver, batch, n int) <-chan int {
	body := protoBody(t, vllmTraces(batch, n))
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, tracesURL(r), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

func waitWaiting(t *testing.T, r *Receiver, n int) {
	t.Helper()
	testkit.WaitFor(t, "waiting exports", 10*time.Second, func() bool { return r.waits.waiting() == n })
}

// An export that finds no slot waits, unread, and is admitted when one frees.
func TestHTTPWaitAdmittedWhenRoomFrees(t *testing.T) {
	col := newCollector()
	r, _ := waitingReceiver(t, Options{Sink: col})
	done := postAsync(t, r, 0, 3)
	waitWaiting(t, r, 1)
	r.leave()
	if code := <-done; code != 200 {
		t.Fatalf("status %d, want 200", code)
	}
	testkit.WaitFor(t, "3 spans delivered", 10*time.Second, func() bool { return len(col.all()) == 3 })
	if s := r.Stats(); s.ExportsWaited != 1 || s.Busy != 0 || s.ExportsAccepted != 1 || s.WaitingExports != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Two waiting exports are both admitted when room frees for both: the first
// admitted wakes the next.
func TestHTTPWaitAdmitsInTurn(t *testing.T) {
	r, _ := waitingReceiver(t, Options{})
	first := postAsync(t, r, 0, 2)
	waitWaiting(t, r, 1)
	second := postAsync(t, r, 1, 2)
	waitWaiting(t, r, 2)
	r.leave()
	if a, b := <-first, <-second; a != 200 || b != 200 {
		t.Fatalf("statuses %d %d, want 200 200", a, b)
	}
	if s := r.Stats(); s.ExportsWaited != 2 || s.Busy != 0 || s.ExportsAccepted != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// An export still without room when the wait ends is refused retryably.
func TestHTTPWaitRefusedAfterTheBound(t *testing.T) {
	r, clock := waitingReceiver(t, Options{RetryAfter: time.Second})
	done := postAsync(t, r, 0, 3)
	waitWaiting(t, r, 1)
	close(clock.fire)
	if code := <-done; code != 429 {
		t.Fatalf("status %d, want 429", code)
	}
	if s := r.Stats(); s.ExportsWaited != 1 || s.Busy != 1 || s.ExportsAccepted != 0 || s.WaitingExports != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Past MaxWaitingExports an export without room is refused at once.
func TestHTTPWaitRefusedAtOncePastTheWaiterLimit(t *testing.T) {
	r, clock := waitingReceiver(t, Options{MaxWaitingExports: 1})
	first := postAsync(t, r, 0, 3)
	waitWaiting(t, r, 1)
	if code := <-postAsync(t, r, 1, 3); code != 429 {
		t.Fatalf("second export: status %d, want 429 at once", code)
	}
	if s := r.Stats(); s.ExportsWaited != 1 || s.Busy != 1 || s.WaitingExports != 1 {
		t.Fatalf("stats %+v", s)
	}
	close(clock.fire)
	if code := <-first; code != 429 {
		t.Fatalf("first export: status %d, want 429", code)
	}
}

// A waiting export whose client went away stops waiting, refused.
func TestHTTPWaitEndsWithTheRequest(t *testing.T) {
	r, _ := waitingReceiver(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest(http.MethodPost, TracesPath, bytes.NewReader(protoBody(t, vllmTraces(0, 3)))).WithContext(ctx)
	req.Header.Set("Content-Type", "application/x-protobuf")
	rec := httptest.NewRecorder()
	served := make(chan struct{})
	go func() { r.ServeHTTP(rec, req); close(served) }()
	waitWaiting(t, r, 1)
	cancel()
	<-served
	if rec.Code != 429 {
		t.Fatalf("status %d, want 429", rec.Code)
	}
	if s := r.Stats(); s.ExportsWaited != 1 || s.Busy != 1 || s.WaitingExports != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Shutdown ends every wait: the waiting export is refused as stopping.
func TestHTTPWaitEndsAtShutdown(t *testing.T) {
	r, _ := waitingReceiver(t, Options{})
	done := postAsync(t, r, 0, 3)
	waitWaiting(t, r, 1)
	shut := make(chan error, 1)
	go func() { shut <- r.Shutdown(context.Background()) }()
	if code := <-done; code != 503 {
		t.Fatalf("status %d, want 503", code)
	}
	r.leave()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.AfterStop != 1 || s.Busy != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A waiter that leaves with a wake-up it did not use passes it on.
func TestWaitListPassesAnUnusedWakeUp(t *testing.T) {
	l := waitList{max: 2}
	a, b := l.join(), l.join()
	if l.join() != nil {
		t.Fatal("a third waiter joined a list of 2")
	}
	l.notify()
	select {
	case <-b.wake:
		t.Fatal("the second waiter was woken before the first")
	default:
	}
	l.leave(a)
	select {
	case <-b.wake:
	default:
		t.Fatal("the unused wake-up was not passed on")
	}
	l.close()
	if l.join() != nil {
		t.Fatal("a waiter joined a closed list")
	}
}
