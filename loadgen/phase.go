package loadgen

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// phase is one phase's mutable state.
type phase struct {
	r        *Runner
	cs       Case
	name     string
	dctx     context.Context // dispatch context: ends on Stop or with the run's context
	gen      *prompt.Generator
	start    time.Time
	deadline time.Time // drain deadline; zero while unknown or none
	stats    *CaseStats

	inFlight atomic.Int64
	peak     atomic.Int64
	lastSent atomic.Int64 // unix ns of the latest request start (the client's send time)

	mu      sync.Mutex
	pending map[int]*attempt // in-flight requests by index
	digests map[int]string   // prompt digests by request index (phase window's prompts_digest)
	cutoff  *time.Time       // the drain deadline once it passed: no attempt is sent after it
	sinkErr error
}

// attempt is one request that has been dispatched; exactly one record is written for it,
// by whoever wins done (its own completion, or the drain deadline).
type attempt struct {
	idx      int
	worker   int
	intended time.Time
	held     bool
	inFlight int // in flight at dispatch, this one included
	prompt   prompt.Prompt
	xReqID   string
	traceID  string
	sentNS   atomic.Int64 // unix ns just before the call; 0 until sent
	done     atomic.Bool
}

// write records rec. The first record the sink refuses (an artifact on a full disk) ends
// dispatch as Stop does — a load no longer recorded is only load on the server — and the
// phase, then Run, returns that error.
func (p *phase) write(rec artifact.Record) {
	if err := p.r.sink.Write(rec); err != nil {
		p.mu.Lock()
		first := p.sinkErr == nil
		if first {
			p.sinkErr = err
		}
		p.mu.Unlock()
		if first {
			p.r.Stop()
		}
	}
}

func (p *phase) noteStatus(st client.Outcome) {
	if p.name == PhaseMeasured {
		p.mu.Lock()
		p.stats.ByStatus[st]++
		p.mu.Unlock()
	}
	if p.r.hooks.Request != nil {
		p.r.hooks.Request(p.cs, p.name, st)
	}
}

func (r *Runner) runPhase(ctx, dctx context.Context, cs Case, name string, st *CaseStats, running abandonedWait) error {
	gen, err := prompt.NewGenerator(prompt.Spec{
		Mode: r.cfg.PromptMode, InputTokens: cs.InputTokens, SharedPrefixRatio: r.cfg.SharedPrefixRatio,
		PrefixGroups: r.cfg.PrefixGroups, Seed: r.cfg.Seed, CaseID: cs.ID, Phase: name,
	}, r.tok)
	if err != nil {
		return fmt.Errorf("prompts for %s: %w", cs.ID, err)
	}
	sched, err := r.cfg.schedule(cs, name)
	if err != nil {
		return err
	}
	p := &phase{r: r, cs: cs, name: name, dctx: dctx, gen: gen, stats: st, pending: map[int]*attempt{}, digests: map[int]string{}}
	if r.hooks.PhaseStart != nil {
		r.hooks.PhaseStart(ctx, cs.ID, name)
	}
	health := r.healthNow()
	p.start = r.clock.Now()
	var windowEnd time.Time
	if sched == nil {
		windowEnd = p.runClosed(ctx)
	} else {
		windowEnd = p.runOpen(ctx, sched)
	}
	drained := r.clock.Now()
	if r.hooks.PhaseEnd != nil && ctx.Err() == nil {
		r.hooks.PhaseEnd(ctx, cs.ID, name)
	}
	if err := ctx.Err(); err != nil {
		return err // interrupted: the phase never recorded its window
	}
	if p.sinkErr != nil {
		return p.sinkErr // the sink refused a record (and stopped dispatch)
	}
	if r.stopped() {
		return ErrStopped // stopped: likewise
	}
	w := p.windowRecord(sched, windowEnd, drained, running)
	w.ClientHealth = r.healthNow().healthSince(health)
	return r.sink.Write(w)
}

// abandonedWait is what the phase window records under abandoned_requests.
type abandonedWait struct {
	runningAtStart int64
	waited         time.Duration
	stillRunning   int64
}

func (r *Runner) waitAbandonedTimed(ctx context.Context) (abandonedWait, error) {
	t0 := r.clock.Now()
	n, err := r.waitAbandoned(ctx)
	return abandonedWait{runningAtStart: n, waited: r.clock.Since(t0), stillRunning: r.running.Load()}, err
}

// runClosed runs a closed loop: Concurrency workers, each sending its next request when its
// previous one finished. Counted phases end their window at the last send and have no drain
// deadline (every request finishes or times out); duration phases end at the duration and
// cancel what still runs at the drain deadline. It returns the window end.
func (p *phase) runClosed(ctx context.Context) time.Time {
	cfg := p.r.cfg
	count, dur := cfg.phaseCount(p.name)
	var next atomic.Int64
	windowClose := time.Time{}
	if dur > 0 {
		windowClose = p.start.Add(dur)
		p.deadline = windowClose.Add(cfg.DrainTimeout)
	}
	workers := cfg.ShardWorkers(p.cs.Concurrency)
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	finished := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			for p.dctx.Err() == nil {
				now := p.r.clock.Now()
				if dur > 0 && !now.Before(windowClose) {
					return
				}
				idx := cfg.closedIndex(p.cs.Concurrency, int(next.Add(1)-1))
				if count > 0 && idx >= count {
					return
				}
				a := &attempt{idx: idx, worker: cfg.globalWorker(worker), intended: now, inFlight: int(p.inFlight.Add(1))}
				p.notePeak(int64(a.inFlight))
				p.r.callStarted()
				p.send(ctx, a)
			}
		}(w)
	}
	go func() { wg.Wait(); close(finished) }()
	if dur > 0 {
		p.drain(ctx, finished)
		return windowClose
	}
	select {
	case <-finished:
	case <-p.dctx.Done():
		if ctx.Err() != nil {
			<-finished
			break
		}
		// Stopped: what runs gets DrainTimeout from now.
		p.deadline = p.r.clock.Now().Add(cfg.DrainTimeout)
		p.drain(ctx, finished)
	}
	if ns := p.lastSent.Load(); ns != 0 {
		return time.Unix(0, ns) // the last counted request's send, as its record gives it
	}
	return p.start
}

// runOpen dispatches a fixed schedule at absolute target times, limited by MaxInFlight with
// the overflow policy, then drains. It returns the window end.
func (p *phase) runOpen(ctx context.Context, s *schedule.Schedule) time.Time {
	cfg := p.r.cfg
	_, dur := cfg.phaseCount(p.name)
	slots := make(chan struct{}, cfg.MaxInFlight)
	var windowEnd time.Time
	if dur > 0 {
		windowEnd = p.start.Add(dur)
		p.deadline = windowEnd.Add(cfg.DrainTimeout)
	}
	var deadlineC <-chan time.Time
	if dur > 0 {
		t := p.r.clock.NewTimer(p.r.clock.Until(p.deadline))
		defer t.Stop()
		deadlineC = t.Chan()
	}
	var wg sync.WaitGroup
	lastSend := p.start
	for i, off := range s.Offsets {
		if !cfg.Owns(0, i) {
			continue // another shard's arrival
		}
		target := p.start.Add(off)
		if err := p.r.waitUntil(p.dctx, target); err != nil {
			break
		}
		a := &attempt{idx: i, intended: target}
		ok, stop := p.takeSlot(a, slots, &deadlineC, s)
		if stop {
			break
		}
		if !ok {
			continue
		}
		a.inFlight = int(p.inFlight.Add(1))
		p.notePeak(int64(a.inFlight))
		lastSend = p.r.clock.Now()
		wg.Add(1)
		p.r.callStarted() // counted from dispatch, so that no wait for running calls misses it
		go func(a *attempt) {
			defer wg.Done()
			defer func() { <-slots }()
			p.send(ctx, a)
		}(a)
	}
	if dur == 0 {
		windowEnd = lastSend
		p.deadline = windowEnd.Add(cfg.DrainTimeout)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	if deadlineC == nil && dur > 0 {
		// The deadline already fired while holding: everything still running is cancelled now.
		p.cancelPending(p.deadline)
		return windowEnd
	}
	if dur > 0 {
		// A duration window lasts its duration even when every request is done early: the
		// drain starts at the window end, never before it.
		if err := p.r.waitUntil(p.dctx, windowEnd); err != nil && ctx.Err() != nil {
			<-finished
			return windowEnd
		}
	}
	p.drain(ctx, finished)
	return windowEnd
}

// takeSlot takes an in-flight slot for arrival a of schedule s (ok), applying the overflow
// policy when every slot is busy: drop records a as dropped (ok false); wait holds it until a
// slot frees. A hold that reaches the drain deadline drops a and every arrival behind it,
// never sent, and clears *deadlineC (the deadline has fired); a hold that the dispatch
// context ends (Ctrl+C, Stop) drops a and every arrival behind it already due, and stops the
// dispatch (stop).
func (p *phase) takeSlot(a *attempt, slots chan struct{}, deadlineC *<-chan time.Time, s *schedule.Schedule) (ok, stop bool) {
	cfg := p.r.cfg
	select {
	case slots <- struct{}{}:
		return true, false
	default:
	}
	if cfg.Overflow == OverflowDrop {
		p.drop(a, fmt.Sprintf("in-flight limit of %d reached", cfg.MaxInFlight), p.r.clock.Now())
		return false, false
	}
	a.held = true
	select {
	case slots <- struct{}{}:
		return true, false
	case <-*deadlineC:
		p.dropHeld(a.idx, s, "drain deadline passed while held for a slot", false)
		*deadlineC = nil
		return false, true
	case <-p.dctx.Done():
		p.dropHeld(a.idx, s, "dispatch stopped (interrupt or stop) while held for a slot", true)
		return false, true
	}
}

// dropHeld records the held arrival from and the owned arrivals of s after it as dropped
// (held for a slot, never sent) at the clock's now; dueOnly keeps to those whose intended
// time has come (a stopped dispatch: the later ones were never offered).
func (p *phase) dropHeld(from int, s *schedule.Schedule, why string, dueOnly bool) {
	now := p.r.clock.Now()
	for j := from; j < len(s.Offsets); j++ {
		if !p.r.cfg.Owns(0, j) {
			continue
		}
		intended := p.start.Add(s.Offsets[j])
		if dueOnly && intended.After(now) {
			break // offsets are in order: no later one is due either
		}
		p.drop(&attempt{idx: j, intended: intended, held: true}, why, now)
	}
}

// drain waits until every request of the phase has finished (finished closes) or the drain
// deadline passes, when what still runs is recorded as cancelled. On Ctrl+C (ctx ends) the
// calls themselves are cancelled, so it waits for them to record that.
//
// A Stop shortens the deadline to DrainTimeout from the moment it came.
func (p *phase) drain(ctx context.Context, finished <-chan struct{}) {
	stop := p.dctx.Done()
	for {
		select {
		case <-stop: // a Stop that came already shortens the deadline before any timer is set
			stop = nil
			p.shortenDeadline(ctx)
		default:
		}
		t := p.r.clock.NewTimer(p.r.clock.Until(p.deadline))
		select {
		case <-finished:
			t.Stop()
			return
		case <-t.Chan():
			p.cancelPending(p.deadline)
			return
		case <-ctx.Done():
			t.Stop()
			<-finished
			return
		case <-stop:
			t.Stop()
			stop = nil
			p.shortenDeadline(ctx)
		}
	}
}

// shortenDeadline moves the drain deadline to DrainTimeout from now when that is earlier
// (a Stop), unless the run's context has ended.
func (p *phase) shortenDeadline(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	if d := p.r.clock.Now().Add(p.r.cfg.DrainTimeout); d.Before(p.deadline) {
		p.deadline = d
	}
}

// noteSent keeps the latest send time of the phase (the window end of a counted closed loop).
func (p *phase) noteSent(t time.Time) {
	ns := t.UnixNano()
	for {
		old := p.lastSent.Load()
		if ns <= old || p.lastSent.CompareAndSwap(old, ns) {
			return
		}
	}
}

func (p *phase) notePeak(n int64) {
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			return
		}
	}
}

// cancelPending records every request still running at the drain deadline as cancelled. The
// HTTP calls run on (abandoned) until they finish or time out; their results are discarded.
//
// An attempt dispatched but not yet sent when the deadline passes is never sent: send records
// it dropped.
func (p *phase) cancelPending(at time.Time) {
	p.mu.Lock()
	if p.cutoff == nil {
		p.cutoff = &at
	}
	var list []*attempt
	for _, a := range p.pending {
		list = append(list, a)
	}
	p.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].idx < list[j].idx })
	for _, a := range list {
		if a.done.CompareAndSwap(false, true) {
			p.write(p.cancelledRecord(a, at))
			p.noteStatus(client.Cancelled)
		}
	}
}

// drop records an arrival that was never sent.
func (p *phase) drop(a *attempt, why string, at time.Time) {
	pr := p.gen.Prompt(a.idx)
	a.prompt = pr
	p.mu.Lock()
	p.digests[a.idx] = pr.Digest
	p.mu.Unlock()
	a.prompt.Text = ""
	p.write(p.droppedRecord(a, why, at))
	p.noteStatus(client.Dropped)
}

// send builds the request at send time, runs it, and records its result unless the drain
// deadline already recorded it as cancelled. The caller counted the attempt as a running call
// (callStarted); send ends it. Building (prepare) and recording (settle) run in their own
// frames, so that the goroutine's stack under the call, which stays in place while the
// answer streams in (thousands of such goroutines at high rates), holds only send's small
// frame.
func (p *phase) send(ctx context.Context, a *attempt) {
	defer p.r.callEnded()
	call, berr, ok := p.prepare(a)
	if !ok {
		return
	}
	res := new(client.Result)
	if berr != nil {
		now := p.r.clock.Now() // fields set one by one: a Result literal would be a temporary in this frame
		res.Outcome, res.ErrorType, res.ErrorMessage = client.Error, client.ErrTypeInvalidRequest, berr.Error()
		res.Start, res.End = now, now
	} else {
		p.r.client.DoInto(ctx, call, res)
	}
	p.settle(a, res)
}

// prepare builds a's call (berr: its body could not be built), registers a as pending and
// records it as sent; ok is false when the drain deadline had already passed (a is then
// recorded as dropped).
func (p *phase) prepare(a *attempt) (call client.Call, berr error, ok bool) {
	cfg := p.r.cfg
	a.prompt = p.gen.Prompt(a.idx)
	a.xReqID = artifact.XRequestIDPrefix(cfg.RunID) + p.requestID(a)
	a.traceID = newTraceID()
	body, berr := buildBody(cfg, a.prompt.Text, p.cs.OutputTokens)
	call = client.Call{URL: cfg.Endpoint, Header: buildHeader(cfg, a.xReqID, a.traceID), Body: body, Stream: cfg.Stream, Timeout: cfg.Timeout}
	p.mu.Lock()
	if cutoff := p.cutoff; cutoff != nil {
		p.mu.Unlock()
		p.inFlight.Add(-1)
		a.done.Store(true)
		p.drop(a, "drain deadline passed before it was sent", *cutoff)
		return client.Call{}, nil, false
	}
	p.pending[a.idx] = a
	p.digests[a.idx] = a.prompt.Digest
	p.mu.Unlock()
	sentNS := p.r.clock.Now().UnixNano()
	a.sentNS.Store(sentNS)
	p.write(&artifact.RequestSent{SessionID: p.r.sessionID, CaseID: p.cs.ID, Phase: p.name, XRequestID: a.xReqID, TraceID: a.traceID, SentAtNS: sentNS})
	if p.r.hooks.Sent != nil {
		p.r.hooks.Sent(p.cs, p.name)
	}
	return call, berr, true
}

// settle ends a's call with res: it is no longer pending, and its record is written unless
// the drain deadline already recorded it as cancelled.
func (p *phase) settle(a *attempt, res *client.Result) {
	p.noteSent(res.Start)
	p.inFlight.Add(-1)
	p.mu.Lock()
	delete(p.pending, a.idx)
	p.mu.Unlock()
	if !a.done.CompareAndSwap(false, true) {
		return // recorded as cancelled at the drain deadline; this call was abandoned
	}
	rec := p.resultRecord(a, res)
	a.prompt.Text = "" // prompts are freed once the request is done
	p.write(rec)
	p.noteStatus(res.Outcome)
}

// requestID is "<case_id>_<phase>_<worker>_<index>" (the contract's request_id).
func (p *phase) requestID(a *attempt) string {
	b := make([]byte, 0, len(p.cs.ID)+len(p.name)+24)
	b = append(append(append(append(b, p.cs.ID...), '_'), p.name...), '_')
	b = append(strconv.AppendInt(b, int64(a.worker), 10), '_')
	return string(strconv.AppendInt(b, int64(a.idx), 10))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
