package trace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

// fakeServer answers /start_profile with start (a handler) and /stop_profile with 200 after
// onStop; it counts both calls.
type fakeServer struct {
	mu            sync.Mutex
	starts, stops int
	start         http.HandlerFunc
	stopStatus    int
	onStop        func()
	srv           *httptest.Server
}

func newFakeServer(t *testing.T, start http.HandlerFunc) *fakeServer {
	f := &fakeServer{start: start, stopStatus: 200}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start_profile", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.starts++
		f.mu.Unlock()
		f.start(w, r)
	})
	mux.HandleFunc("POST /stop_profile", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.stops++
		on, st := f.onStop, f.stopStatus
		f.mu.Unlock()
		if on != nil {
			on()
		}
		w.WriteHeader(st)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, f.stops
}

func statusHandler(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
}

// newController is a controller of the measured phase against base, its records in mem.
func newController(t *testing.T, base string, mod func(*Options)) (*Controller, *artifact.Memory) {
	t.Helper()
	mem := &artifact.Memory{}
	o := Options{ControlBase: base, Phase: "measured", Sink: mem, SessionID: "s1", RunID: "r1", Timeout: 2 * time.Second}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, mem
}

// windows are the infer.trace_window records in mem.
func windows(mem *artifact.Memory) []*artifact.TraceWindow {
	var out []*artifact.TraceWindow
	for _, r := range mem.Records() {
		if w, ok := r.(*artifact.TraceWindow); ok {
			out = append(out, w)
		}
	}
	return out
}

// drive advances fc by step whenever something waits on it, until done is closed.
func drive(fc *clockwork.FakeClock, step time.Duration, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := fc.BlockUntilContext(ctx, 1)
		cancel()
		if err == nil {
			fc.Advance(step)
		}
	}
}

// async runs f in a goroutine and returns a channel closed when it returns.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return done
}
