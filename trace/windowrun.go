package trace

import (
	"context"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/jonboulle/clockwork"
)

// window is one trace window: its record so far, the directory as it was before the start,
// and the single stop.
type window struct {
	c      *Controller
	rec    artifact.TraceWindow
	before listing

	timer clockwork.Timer // the MaxDuration timer (nil without one)
	quit  chan struct{}   // closed when the window ends, to release watch

	once sync.Once

	// A delayed window (Options.AfterRunning): waiting is closed when its waiter exits and
	// cancelWait stops it; mu orders the trigger's start against the end: opened once the
	// trigger fired, ended once the end began.
	waiting       chan struct{}
	cancelWait    context.CancelFunc
	mu            sync.Mutex
	opened, ended bool
}

// open reads the directory, sends the start and records its reply. A rejected start writes
// the record at once; the caller ends (stops) an unknown one at once.
func (w *window) open(ctx context.Context) {
	o := &w.c.o
	if w.rec.RequestedAtNS == 0 {
		w.rec.RequestedAtNS = o.Clock.Now().UnixNano()
	}
	w.before = list(o.Dir)
	w.rec.StartRequestedAtNS = o.Clock.Now().UnixNano()
	r := post(ctx, o.HTTP, w.c.start, o.Timeout)
	returned := o.Clock.Now().UnixNano()
	w.rec.StartReturnedAtNS = returned
	w.rec.StartStatus, w.rec.StartError = status(r)
	w.rec.StartOutcome = startOutcome(r)
	switch w.rec.StartOutcome {
	case artifact.StartAcknowledged:
		w.rec.StartConfirmedAtNS = &returned
	case artifact.StartRejected:
		w.once.Do(func() {
			w.rec.StopReason = artifact.StopStartRejected
			w.c.write(&w.rec)
		})
	}
}

// watch ends the window with max_seconds when its timer fires first. The window stays the
// controller's open one, so that PhaseEnd and Close wait for this end to finish.
func (w *window) watch(ctx context.Context) {
	defer w.c.wg.Done()
	select {
	case <-w.timer.Chan():
		w.end(ctx, artifact.StopMaxSeconds)
	case <-w.quit:
	}
}

// end stops the window once: it sends /stop_profile (without ctx's cancellation, bounded by
// the control timeout), waits for the trace files and writes the record. reason becomes
// stopped_by_server when a worker trace appeared before the stop. Later calls return at once.
func (w *window) end(ctx context.Context, reason string) {
	if w.waiting != nil && w.endWaiting(reason) {
		return
	}
	w.once.Do(func() {
		if w.timer != nil {
			w.timer.Stop()
			close(w.quit)
		}
		o := &w.c.o
		if files, _ := list(o.Dir).newSince(w.before); len(files) > 0 && reason != artifact.StopStartUnknown {
			reason = artifact.StopStoppedByServer
		}
		w.rec.StopReason = reason
		sent := o.Clock.Now().UnixNano()
		r := post(context.WithoutCancel(ctx), o.HTTP, w.c.stop, o.Timeout)
		returned := o.Clock.Now().UnixNano()
		w.rec.StopRequestedAtNS, w.rec.StopReturnedAtNS = &sent, &returned
		w.rec.StopStatus, w.rec.StopError = status(r)
		if r.err != nil {
			w.rec.ProfilerMayBeRunning = true
			o.Warn("the trace window of case " + w.rec.CaseID + " (" + w.rec.Phase + "): /stop_profile failed (" + r.err.Error() + "); the profiler may still be running")
		}
		w.rec.TraceFiles = w.awaitFiles(ctx)
		w.c.write(&w.rec)
	})
}

// awaitFiles reads the directory every Poll until Settle has passed since the stop and since
// the last new file, with no worker trace pending; a pending one is waited for up to 10
// Settles after the stop. A cancelled ctx ends the wait with what was found.
func (w *window) awaitFiles(ctx context.Context) []artifact.TraceFile {
	o := &w.c.o
	if o.Dir == "" {
		return []artifact.TraceFile{}
	}
	now := o.Clock.Now()
	quiet, limit := now.Add(o.Settle), now.Add(10*o.Settle)
	seen := 0
	for {
		files, pending := list(o.Dir).newSince(w.before)
		now = o.Clock.Now()
		if len(files) > seen {
			seen, quiet = len(files), now.Add(o.Settle)
		}
		if (!now.Before(quiet) && !pending) || !now.Before(limit) || ctx.Err() != nil {
			if files == nil {
				files = []artifact.TraceFile{}
			}
			return files
		}
		t := o.Clock.NewTimer(o.Poll)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// status is a reply's status (nil without one) and error text (nil for a 2xx).
func status(r reply) (*int, *string) {
	var s *int
	if r.status != 0 {
		s = artifact.Ptr(r.status)
	}
	if r.err != nil {
		return s, artifact.Ptr(r.err.Error())
	}
	return s, nil
}

// delay makes w the open window and waits for its trigger in a goroutine (Options.AfterRunning).
func (c *Controller) delay(ctx context.Context, w *window) {
	o := &c.o
	w.rec.Trigger, w.rec.TriggerThreshold = artifact.TriggerRequestsRunning, artifact.Ptr(o.AfterRunning)
	w.rec.RequestedAtNS = o.Clock.Now().UnixNano()
	wctx, cancel := context.WithCancel(ctx)
	w.waiting, w.cancelWait = make(chan struct{}), cancel
	c.mu.Lock()
	c.cur = w
	c.mu.Unlock()
	c.wg.Add(1)
	go w.await(wctx)
}

// await reads num_requests_running every TriggerPoll until it reaches the threshold (then
// the window opens: trigger) or ctx ends.
func (w *window) await(ctx context.Context) {
	defer w.c.wg.Done()
	defer close(w.waiting)
	o := &w.c.o
	for {
		if v, err := o.Running(ctx); err == nil && v >= o.AfterRunning {
			w.trigger(ctx, v)
			return
		}
		t := o.Clock.NewTimer(o.TriggerPoll)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// trigger opens the delayed window at reading v, unless its end began first.
func (w *window) trigger(ctx context.Context, v float64) {
	o := &w.c.o
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.opened = true
	w.rec.TriggerValue, w.rec.TriggeredAtNS = artifact.Ptr(v), artifact.Ptr(o.Clock.Now().UnixNano())
	w.open(context.WithoutCancel(ctx))
	if w.rec.StartOutcome == artifact.StartAcknowledged && o.MaxDuration > 0 {
		w.timer = o.Clock.NewTimer(o.MaxDuration)
		w.quit = make(chan struct{})
		w.c.wg.Add(1)
		go w.watch(ctx)
	}
	w.mu.Unlock()
	if w.rec.StartOutcome == artifact.StartUnknown {
		w.end(ctx, artifact.StopStartUnknown)
	}
}

// endWaiting ends a delayed window whose trigger never fired — start_outcome
// not_triggered, nothing sent, stop_reason not_triggered at the phase end (else reason) —
// and reports true; false when the trigger fired (the window ends as any other).
func (w *window) endWaiting(reason string) bool {
	w.mu.Lock()
	w.ended = true
	opened := w.opened
	w.mu.Unlock()
	if opened {
		return false
	}
	w.cancelWait()
	w.once.Do(func() {
		if reason == artifact.StopPhaseEnd {
			reason = artifact.StopNotTriggered
		}
		w.rec.StartOutcome, w.rec.StopReason = artifact.StartNotTriggered, reason
		w.rec.TraceFiles = []artifact.TraceFile{}
		w.c.write(&w.rec)
	})
	return true
}
