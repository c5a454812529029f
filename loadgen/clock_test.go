package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// gate is a Chat Completions server whose answers wait until the test opens the gate of the
// request's case (matched on the X-Request-Id): requests stay in flight exactly as long as
// the test wants, whatever the machine's speed.
type gate struct {
	mu    sync.Mutex
	gates map[string]chan struct{} // case id → closed when open
	srv   *httptest.Server
}

func newGate(t *testing.T, cases ...string) *gate {
	g := &gate{gates: map[string]chan struct{}{}}
	for _, c := range cases {
		g.gates[c] = make(chan struct{})
	}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := r.Header.Get("X-Request-Id")
		for c, ch := range g.gates {
			if strings.Contains(x, "-"+c+"_") {
				select {
				case <-ch:
				case <-r.Context().Done():
					return
				}
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(func() {
		g.openAll()
		g.srv.Close()
	})
	return g
}

func (g *gate) open(c string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gates[c]:
	default:
		close(g.gates[c])
	}
}

func (g *gate) openAll() {
	for c := range g.gates {
		g.open(c)
	}
}

// fakeRun runs cfg against g on fc in the background; the returned channel gets Run's error.
func fakeRun(t *testing.T, cfg *Config, fc *clockwork.FakeClock, sink artifact.Sink, started func(*Runner)) <-chan error {
	t.Helper()
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(client.Options{MaxConnsPerHost: 64, Timeout: cfg.Timeout})
	r := NewRunner(cfg, c, tok, sink, "session-1", Hooks{})
	r.SetClock(fc)
	if started != nil {
		started(r)
	}
	done := make(chan error, 1)
	go func() {
		defer c.CloseIdle()
		done <- r.Run(context.Background())
	}()
	return done
}

// advance waits until n timers wait on fc, then moves it by d.
func advance(t *testing.T, fc *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
	fc.Advance(d)
}

func gateConfig(g *gate) *Config {
	return &Config{
		Endpoint: g.srv.URL + "/v1/chat/completions", Model: "m", RunID: "run-1", Timeout: time.Minute,
		Stream: true, InputTokens: []int{64}, OutputTokens: []int{8}, Seed: 3,
	}
}

var fakeT0 = time.Unix(1_800_000_000, 0)

// The drain deadline cancels what still runs exactly DrainTimeout after the window end, and
// the next case waits for those abandoned calls before it starts.
func TestDrainDeadlineCancelsAndNextPhaseWaits(t *testing.T) {
	g := newGate(t, "fixed20_in64_out8", "fixed20_in65_out8")
	cfg := gateConfig(g)
	cfg.Arrival, cfg.Rates, cfg.Duration = schedule.FixedRate, []float64{20}, 100*time.Millisecond
	cfg.DrainTimeout = 100 * time.Millisecond
	cfg.InputTokens = []int{64, 65} // two cases: the second waits for the first's abandoned calls
	fc := clockwork.NewFakeClockAt(fakeT0)
	sink := &memSink{}
	done := fakeRun(t, cfg, fc, sink, nil)
	// Case 1: arrivals at 0 and 50 ms; the drain deadline timer waits from the start.
	advance(t, fc, 2, 50*time.Millisecond) // second arrival
	advance(t, fc, 2, 50*time.Millisecond) // window end
	testkit.WaitFor(t, "two dispatches", 10*time.Second, func() bool { return sent(sink) == 2 })
	advance(t, fc, 2, 100*time.Millisecond) // drain deadline
	testkit.WaitFor(t, "the first case's window", 10*time.Second, func() bool { return len(sink.windows()) == 1 })
	// The second case waits for the first case's two calls, which are still running.
	fc.Advance(300 * time.Millisecond)
	g.open("fixed20_in64_out8")
	advance(t, fc, 2, 50*time.Millisecond)
	advance(t, fc, 2, 50*time.Millisecond)
	testkit.WaitFor(t, "four dispatches", 10*time.Second, func() bool { return sent(sink) == 4 })
	advance(t, fc, 2, 100*time.Millisecond)
	testkit.WaitFor(t, "the second case's window", 10*time.Second, func() bool { return len(sink.windows()) == 2 })
	g.open("fixed20_in65_out8") // the run's end waits for these abandoned calls too
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 4 {
		t.Fatalf("got %d requests, want 2 per case", len(reqs))
	}
	for _, r := range reqs {
		if r.Status != "cancelled" || r.E2ELatencyMS != nil || r.XRequestID == nil {
			t.Fatalf("status %s e2e %v", r.Status, r.E2ELatencyMS)
		}
		if *r.EndedAtNS != *windowOf(sink, r.CaseID).DrainedAtNS {
			t.Fatalf("cancelled at %d, not at the drain deadline", *r.EndedAtNS)
		}
	}
	ws := sink.windows()
	for _, w := range ws {
		if drain := time.Duration(*w.DrainedAtNS - *w.WindowEndedAtNS); drain != 100*time.Millisecond {
			t.Fatalf("drain %v, want exactly the 100 ms drain timeout", drain)
		}
	}
	if got := time.Unix(0, *ws[0].StartedAtNS); !got.Equal(fakeT0) {
		t.Fatalf("first window starts at %v", got)
	}
	ab := ws[1].AbandonedRequests
	if ab.RunningAtStart != 2 || ab.StillRunning != 0 {
		t.Fatalf("second case abandoned_requests %+v", ab)
	}
	if start := *ws[1].StartedAtNS; start < *ws[0].DrainedAtNS+int64(300*time.Millisecond) {
		t.Fatalf("the second case started %v after the first drained, before its abandoned calls ended",
			time.Duration(start-*ws[0].DrainedAtNS))
	}
}

func windowOf(sink *memSink, caseID string) *artifact.PhaseWindow {
	for _, w := range sink.windows() {
		if w.CaseID == caseID {
			return w
		}
	}
	return nil
}

// Arrivals held for a slot when the drain deadline passes are dropped, never sent; the run
// returns only once the abandoned call has ended.
func TestDurationHeldArrivalsDropAtDeadline(t *testing.T) {
	g := newGate(t, "fixed50_in64_out8")
	cfg := gateConfig(g)
	cfg.Arrival, cfg.Rates, cfg.Duration = schedule.FixedRate, []float64{50}, 100*time.Millisecond
	cfg.MaxInFlight, cfg.DrainTimeout = 1, 100*time.Millisecond
	fc := clockwork.NewFakeClockAt(fakeT0)
	sink := &memSink{}
	done := fakeRun(t, cfg, fc, sink, nil)
	// The first arrival takes the one slot; the second (at 20 ms) is held until the deadline.
	testkit.WaitFor(t, "the first dispatch", 10*time.Second, func() bool { return sent(sink) == 1 })
	advance(t, fc, 2, 20*time.Millisecond)
	advance(t, fc, 1, 180*time.Millisecond)
	testkit.WaitFor(t, "the phase window", 10*time.Second, func() bool { return len(sink.windows()) == 1 })
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while the abandoned call was still running: %s", err, strings.Join(statuses(sink.requests(PhaseMeasured)), ","))
	default:
	}
	g.open("fixed50_in64_out8")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if got := strings.Join(statuses(reqs), ","); got != "cancelled,dropped,dropped,dropped,dropped" {
		t.Fatalf("statuses %s", got)
	}
	deadline := fakeT0.Add(200 * time.Millisecond).UnixNano()
	for _, r := range reqs[1:] {
		if !*r.HeldForSlot || !strings.Contains(*r.ErrorMessage, "drain deadline") || *r.EndedAtNS != deadline || r.XRequestID != nil {
			t.Fatalf("dropped %+v", r)
		}
	}
}

// A Stop shortens the drain deadline to DrainTimeout from the stop: what still runs then is
// cancelled, and no later arrival is dispatched.
func TestStopCancelsAtShortenedDrainDeadline(t *testing.T) {
	g := newGate(t, "fixed20_in64_out8")
	cfg := gateConfig(g)
	cfg.Arrival, cfg.Rates, cfg.Duration = schedule.FixedRate, []float64{20}, 30*time.Second
	cfg.MaxInFlight, cfg.Overflow = 5, OverflowWait
	cfg.DrainTimeout = 300 * time.Millisecond
	fc := clockwork.NewFakeClockAt(fakeT0)
	sink := &memSink{}
	var runner *Runner
	done := fakeRun(t, cfg, fc, sink, func(r *Runner) { runner = r })
	for i := 0; i < 5; i++ { // arrivals at 0 … 200 ms take the five slots; the one at 250 ms is held
		testkit.WaitFor(t, "a dispatch", 10*time.Second, func() bool { return sent(sink) == i+1 })
		advance(t, fc, 2, 50*time.Millisecond)
	}
	waitHeld(t)                             // the arrival at 250 ms waits for a slot
	runner.Stop()                           // at 250 ms: the held arrival, due, is dropped
	advance(t, fc, 2, 300*time.Millisecond) // the drain's shortened deadline: 250 + 300 ms
	testkit.WaitFor(t, "six records", 10*time.Second, func() bool { return len(sink.requests(PhaseMeasured)) == 6 })
	g.open("fixed20_in64_out8")
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run returned %v, want ErrStopped", err)
	}
	stopDeadline := fakeT0.Add(550 * time.Millisecond).UnixNano()
	stopped := fakeT0.Add(250 * time.Millisecond).UnixNano()
	for _, r := range sink.requests(PhaseMeasured) {
		if *r.RequestIndex == 5 {
			if r.Status != "dropped" || !*r.HeldForSlot || *r.IntendedAtNS != stopped || *r.EndedAtNS != stopped ||
				*r.ErrorMessage != "dispatch stopped (interrupt or stop) while held for a slot" || r.XRequestID != nil {
				t.Fatalf("the held arrival: %s at %d, held %v, %q", r.Status, *r.EndedAtNS, *r.HeldForSlot, *r.ErrorMessage)
			}
			continue
		}
		if r.Status != "cancelled" || *r.EndedAtNS != stopDeadline {
			t.Fatalf("status %s ended %d, want cancelled at the shortened drain deadline %d", r.Status, *r.EndedAtNS, stopDeadline)
		}
	}
	if sent(sink) != 5 || len(sink.windows()) != 0 {
		t.Fatalf("%d dispatches, %d windows after the stop", sent(sink), len(sink.windows()))
	}
}

// A Stop lets the requests in flight finish within the drain deadline and dispatches no more.
func TestStopDrainsInFlightRequests(t *testing.T) {
	g := newGate(t, "c3_in64_out8")
	cfg := gateConfig(g)
	cfg.Concurrency, cfg.Requests = []int{3}, 30
	fc := clockwork.NewFakeClockAt(fakeT0)
	sink := &memSink{}
	var runner *Runner
	done := fakeRun(t, cfg, fc, sink, func(r *Runner) { runner = r })
	testkit.WaitFor(t, "three dispatches", 10*time.Second, func() bool { return sent(sink) == 3 })
	runner.Stop()
	testkit.WaitFor(t, "the drain timer", 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		return fc.BlockUntilContext(ctx, 1) == nil
	})
	g.open("c3_in64_out8")
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run returned %v, want ErrStopped", err)
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 3 {
		t.Fatalf("%d records, want the 3 dispatched before Stop", len(reqs))
	}
	for _, r := range reqs {
		if r.Status != "ok" {
			t.Fatalf("status %s: a stop lets in-flight requests finish within the drain deadline", r.Status)
		}
	}
	if len(sink.windows()) != 0 {
		t.Fatal("a stopped phase records no window")
	}
}

// waitHeld waits until the dispatch loop holds an arrival for a slot (it is inside takeSlot,
// every slot busy), read from the goroutines' stacks: no clock waiter tells a held arrival
// from one whose timer has fired but not yet been taken.
func waitHeld(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	testkit.WaitFor(t, "an arrival held for a slot", 10*time.Second, func() bool {
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("loadgen.(*phase).takeSlot"))
	})
}

// sent counts the RequestSent records of the sink.
func sent(sink *memSink) int {
	n := 0
	for _, r := range sink.Records() {
		if _, ok := r.(*artifact.RequestSent); ok {
			n++
		}
	}
	return n
}
