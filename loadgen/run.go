package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/jonboulle/clockwork"
)

// Hooks let other producers (telemetry scrapers, span receivers) and the terminal observe the
// run without reaching into it. Every field is optional. PhaseStart runs just before a
// phase's first send, PhaseEnd just after its drain; both run on the phase's goroutine and
// delay the phase while they run.
type Hooks struct {
	PhaseStart func(ctx context.Context, caseID, phase string)
	PhaseEnd   func(ctx context.Context, caseID, phase string)
	CaseStart  func(cs Case, offered int)  // offered: scheduled arrivals, or the count (0 for duration closed loops)
	Sent       func(cs Case, phase string) // a request was dispatched (just before its call)
	Request    func(cs Case, phase string, status client.Outcome)
	Warn       func(msg string) // a condition the user should know about (printed as "Warning: …")
}

// Runner executes the cases of a Config against its endpoint.
type Runner struct {
	cfg       *Config
	client    *client.Client
	sink      artifact.Sink
	tok       prompt.Tokenizer
	sessionID string
	hooks     Hooks
	endpoint  string // cfg.Endpoint through artifact.RedactURL: every record's endpoint

	// running counts HTTP calls still running, abandoned ones included, so that the next
	// phase can wait for them (abandoned_requests).
	running   atomic.Int64
	runningMu sync.Mutex
	idle      *sync.Cond

	stats map[string]*CaseStats // by case id, measured phase only

	stop     chan struct{} // closed by Stop
	stopOnce sync.Once

	clock     clockwork.Clock // schedules, windows, deadlines (SetClock)
	realClock bool
}

// ErrStopped is what Run returns after Stop ended the run early.
var ErrStopped = errors.New("the run was stopped before its last phase ended")

// Stop ends the run gracefully (a daemon's SIGTERM): no request is dispatched any more, the
// running phase drains — its requests get until its drain deadline, and at most DrainTimeout
// from now, then what still runs is recorded as cancelled — no later phase starts, and Run
// returns ErrStopped. The stopped phase writes no phase window (like an interrupted one).
// Stop may be called from any goroutine, more than once.
func (r *Runner) Stop() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *Runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// CaseStats are the measured-phase outcome counts of one case (the exit code depends on
// them; everything else a report says comes from the artifact).
type CaseStats struct {
	Case     Case
	ByStatus map[client.Outcome]int
}

// NewRunner prepares a run. cfg must have been completed by Defaults and passed Validate.
// tok sizes prompts and counts tokens when the server reports no usage. Every record the run produces goes to sink, from
// several goroutines: the case's infer.cache_state, an artifact.RequestSent (transient) just
// before each HTTP call, each infer.request, each infer.phase_window. A Write error stops
// the run; records already accepted stay. The runner never closes sink.
func NewRunner(cfg *Config, c *client.Client, tok prompt.Tokenizer, sink artifact.Sink, sessionID string, hooks Hooks) *Runner {
	r := &Runner{cfg: cfg, client: c, tok: tok, sink: sink, sessionID: sessionID, hooks: hooks, stats: map[string]*CaseStats{}, stop: make(chan struct{}),
		clock: clockwork.NewRealClock(), realClock: true, endpoint: artifact.RedactURL(cfg.Endpoint)}
	r.idle = sync.NewCond(&r.runningMu)
	return r
}

// Stats returns the measured-phase tallies per case in case order.
func (r *Runner) Stats() []*CaseStats {
	cases, _ := r.cfg.Cases()
	var out []*CaseStats
	for _, cs := range cases {
		if s := r.stats[cs.ID]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Run executes every case in order: the cache reset (when configured), then warmup and
// measured phases. It returns ctx.Err() when interrupted (the in-flight requests are
// recorded as cancelled) and the first sink error otherwise.
func (r *Runner) Run(ctx context.Context) error {
	cases, err := r.cfg.Cases()
	if err != nil {
		return err
	}
	// dctx ends dispatch: on Stop, or with ctx.
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-dctx.Done():
		}
	}()
	for _, cs := range cases {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.stopped() {
			return ErrStopped
		}
		st := &CaseStats{Case: cs, ByStatus: map[client.Outcome]int{}}
		r.stats[cs.ID] = st
		// A cache reset must not race with calls abandoned by the previous case: the wait
		// happens before it, and the case's first phase records it.
		ab, err := r.waitAbandonedTimed(ctx)
		if err != nil {
			return err
		}
		if err := r.cacheState(ctx, cs); err != nil {
			return err
		}
		if r.hooks.CaseStart != nil {
			n, _ := r.cfg.phaseCount(PhaseMeasured)
			conc := cs.Concurrency
			if s, _ := r.cfg.schedule(cs, PhaseMeasured); s != nil {
				n, conc = len(s.Offsets), 0
			}
			n = r.cfg.ownedCount(conc, n) // this shard's share
			r.hooks.CaseStart(cs, n)
		}
		for i, ph := range r.cfg.phases() {
			if i > 0 {
				if ab, err = r.waitAbandonedTimed(ctx); err != nil {
					return err
				}
			}
			if r.stopped() {
				return ErrStopped
			}
			if err := r.runPhase(ctx, dctx, cs, ph, st, ab); err != nil {
				return err
			}
		}
	}
	_, err = r.waitAbandoned(ctx)
	return err
}

// waitAbandoned blocks until no HTTP call of an earlier phase is running, or ctx ends.
// It returns how many were running at the start.
func (r *Runner) waitAbandoned(ctx context.Context) (int64, error) {
	n := r.running.Load()
	if n == 0 {
		return 0, nil
	}
	done := make(chan struct{})
	go func() {
		r.runningMu.Lock()
		for r.running.Load() > 0 && ctx.Err() == nil {
			r.idle.Wait()
		}
		r.runningMu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return n, nil
	case <-ctx.Done():
		r.runningMu.Lock()
		r.idle.Broadcast()
		r.runningMu.Unlock()
		<-done
		return n, ctx.Err()
	}
}

func (r *Runner) callStarted() { r.running.Add(1) }

func (r *Runner) callEnded() {
	if r.running.Add(-1) == 0 {
		r.runningMu.Lock()
		r.idle.Broadcast()
		r.runningMu.Unlock()
	}
}
