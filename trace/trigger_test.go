package trace

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

// running is a fake num_requests_running: the readings in turn (the last one repeats),
// an error where a reading is negative.
type running struct {
	mu     sync.Mutex
	values []float64
	reads  int
}

func (r *running) read(context.Context) (float64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.values[min(r.reads, len(r.values)-1)]
	r.reads++
	if v < 0 {
		return 0, errors.New("scrape failed")
	}
	return v, nil
}

// A delayed window opens at the first reading at or above the threshold (a failed reading
// is retried) and records what fired it.
func TestTriggerOpensAtThreshold(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	fc := clockwork.NewFakeClockAt(time.Unix(100, 0))
	run := &running{values: []float64{0, 3, -1, 7, 9}}
	c, mem := newController(t, f.srv.URL, func(o *Options) {
		o.AfterRunning, o.Running, o.Clock, o.TriggerPoll = 8, run.read, fc, 50*time.Millisecond
	})
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	if starts, _ := f.counts(); starts != 0 {
		t.Fatalf("%d starts before the trigger", starts)
	}
	started := async(func() {
		for starts, _ := f.counts(); starts == 0; starts, _ = f.counts() {
			time.Sleep(time.Millisecond) // the trigger's start call is real HTTP
		}
	})
	drive(fc, 50*time.Millisecond, started)
	c.PhaseEnd(ctx, "c1", "measured")
	ws := windows(mem)
	if len(ws) != 1 {
		t.Fatalf("%d windows", len(ws))
	}
	w := ws[0]
	// readings at 0, 50, 100, 150, 200 ms: 9 at the fifth.
	if w.Trigger != artifact.TriggerRequestsRunning || *w.TriggerThreshold != 8 || *w.TriggerValue != 9 ||
		*w.TriggeredAtNS != time.Unix(100, 0).Add(200*time.Millisecond).UnixNano() || w.RequestedAtNS != time.Unix(100, 0).UnixNano() ||
		w.StartOutcome != artifact.StartAcknowledged || w.StopReason != artifact.StopPhaseEnd {
		t.Fatalf("window %+v", w)
	}
	if starts, stops := f.counts(); starts != 1 || stops != 1 {
		t.Fatalf("%d starts, %d stops", starts, stops)
	}
}

// A phase that ends before the trigger fires records not_triggered and sends nothing; a
// cancelled run's waiting window says cancelled.
func TestTriggerNeverFires(t *testing.T) {
	for _, end := range []string{"phase_end", "close"} {
		f := newFakeServer(t, statusHandler(200))
		run := &running{values: []float64{1}}
		c, mem := newController(t, f.srv.URL, func(o *Options) {
			o.AfterRunning, o.Running, o.Clock = 4, run.read, clockwork.NewFakeClock()
		})
		ctx := context.Background()
		c.PhaseStart(ctx, "c1", "measured")
		if end == "close" {
			c.Close(ctx)
		} else {
			c.PhaseEnd(ctx, "c1", "measured")
			c.Close(ctx)
		}
		ws := windows(mem)
		want := map[string]string{"phase_end": artifact.StopNotTriggered, "close": artifact.StopCancelled}[end]
		if len(ws) != 1 || ws[0].StartOutcome != artifact.StartNotTriggered || ws[0].StopReason != want || ws[0].TriggerValue != nil ||
			ws[0].StopRequestedAtNS != nil || len(ws[0].TraceFiles) != 0 {
			t.Fatalf("%s: windows %+v", end, ws)
		}
		if starts, stops := f.counts(); starts != 0 || stops != 0 {
			t.Fatalf("%s: %d starts, %d stops", end, starts, stops)
		}
	}
}

func TestTriggerOptionsRefused(t *testing.T) {
	for _, mod := range []func(*Options){
		func(o *Options) { o.AfterRunning = 2 }, // no reading
		func(o *Options) { o.AfterRunning = -1 },
		func(o *Options) {
			o.AfterRunning, o.Running, o.TriggerPoll = 1, (&running{values: []float64{0}}).read, -time.Second
		},
	} {
		o := Options{ControlBase: "http://127.0.0.1:1", Phase: "measured", Sink: &artifact.Memory{}}
		mod(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
