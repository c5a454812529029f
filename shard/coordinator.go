package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Registration is what a shard tells the coordinator: its index, the shard count, the run id
// and the workload digest (every shard of a run has the same digest).
type Registration struct {
	Shard          int    `json:"shard"`
	Shards         int    `json:"shards"`
	RunID          string `json:"run_id"`
	WorkloadDigest string `json:"workload_digest"`
}

// Options configure a Coordinator. Zero durations take the defaults.
type Options struct {
	Shards int
	// StartDelay is how long after the last registration the run starts (default 2 s): time
	// for every shard's start poll to return and its offset to be applied.
	StartDelay time.Duration
	// StartDeadline is how long after NewCoordinator every shard must have registered
	// (default 5 min); a shard missing then aborts the run.
	StartDeadline time.Duration
	// PollWait bounds one start poll (default 20 s).
	PollWait time.Duration
	// ClockDomain names the coordinator's clock in /v1/time answers.
	ClockDomain string
	Clock       clockwork.Clock // default the real clock
}

// Coordinator registers a run's shards and announces their start.
type Coordinator struct {
	opts    Options
	clock   clockwork.Clock
	mu      sync.Mutex
	reg     map[int]Registration
	first   *Registration
	startAt time.Time // set once every shard registered
	abort   string    // set when the run aborted
	decided chan struct{}
}

// NewCoordinator returns a coordinator for opts.Shards shards (≥ 1) whose start deadline
// runs from now. Errors: a shard count below 1.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.Shards < 1 {
		return nil, fmt.Errorf("coordinate: --shards must be at least 1, not %d", opts.Shards)
	}
	if opts.StartDelay <= 0 {
		opts.StartDelay = 2 * time.Second
	}
	if opts.StartDeadline <= 0 {
		opts.StartDeadline = 5 * time.Minute
	}
	if opts.PollWait <= 0 {
		opts.PollWait = 20 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	c := &Coordinator{opts: opts, clock: opts.Clock, reg: map[int]Registration{}, decided: make(chan struct{})}
	go c.deadline(opts.Clock.NewTimer(opts.StartDeadline))
	return c, nil
}

// deadline aborts the run when t fires before every shard registered.
func (c *Coordinator) deadline(t clockwork.Timer) {
	select {
	case <-t.Chan():
	case <-c.decided:
		t.Stop()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isDecided() {
		return
	}
	var missing []string
	for k := 0; k < c.opts.Shards; k++ {
		if _, ok := c.reg[k]; !ok {
			missing = append(missing, strconv.Itoa(k))
		}
	}
	c.abort = fmt.Sprintf("shard %s did not register within the start deadline (%s): the run is aborted on every shard", strings.Join(missing, ", "), c.opts.StartDeadline)
	close(c.decided)
}

func (c *Coordinator) isDecided() bool {
	select {
	case <-c.decided:
		return true
	default:
		return false
	}
}

// Register records a shard. Errors (the 409 answers): see the package comment.
func (c *Coordinator) Register(r Registration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.abort != "":
		return fmt.Errorf("the run was aborted: %s", c.abort)
	case !c.startAt.IsZero():
		return fmt.Errorf("shard %d registered after the run started", r.Shard)
	case r.Shards != c.opts.Shards:
		return fmt.Errorf("shard %d says %d shards; the coordinator runs %d", r.Shard, r.Shards, c.opts.Shards)
	case r.Shard < 0 || r.Shard >= c.opts.Shards:
		return fmt.Errorf("shard index %d is outside 0..%d", r.Shard, c.opts.Shards-1)
	case r.RunID == "" || r.WorkloadDigest == "":
		return fmt.Errorf("shard %d gave no run id or workload digest", r.Shard)
	}
	if f := c.first; f != nil {
		if r.RunID != f.RunID {
			return fmt.Errorf("shard %d is of run %q; shard %d registered run %q", r.Shard, r.RunID, f.Shard, f.RunID)
		}
		if r.WorkloadDigest != f.WorkloadDigest {
			return fmt.Errorf("shard %d has workload digest %s; shard %d registered %s (the shards were given different workloads)", r.Shard, r.WorkloadDigest, f.Shard, f.WorkloadDigest)
		}
	}
	if _, dup := c.reg[r.Shard]; dup {
		return fmt.Errorf("shard %d is already registered (two shards were given the same index)", r.Shard)
	}
	c.reg[r.Shard] = r
	if c.first == nil {
		c.first = &r
	}
	if len(c.reg) == c.opts.Shards {
		c.startAt = c.clock.Now().Add(c.opts.StartDelay)
		close(c.decided)
	}
	return nil
}

// Outcome waits up to wait for the run's start: the start time, or the abort reason, or
// neither when wait passed first.
func (c *Coordinator) Outcome(ctx context.Context, wait time.Duration) (start time.Time, abort string, decided bool) {
	t := c.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.decided:
	case <-t.Chan():
		return time.Time{}, "", false
	case <-ctx.Done():
		return time.Time{}, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startAt, c.abort, true
}

// Registered lists the registered shard indexes, in order.
func (c *Coordinator) Registered() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.reg))
	for k := range c.reg {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// Handler serves the coordinator's HTTP API (the package comment).
func (c *Coordinator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/register", func(w http.ResponseWriter, r *http.Request) {
		var reg Registration
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&reg); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "the body is not a registration: " + err.Error()})
			return
		}
		if err := c.Register(reg); err != nil {
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "registered"})
	})
	mux.HandleFunc("GET /v1/start", func(w http.ResponseWriter, r *http.Request) {
		start, abort, decided := c.Outcome(r.Context(), c.opts.PollWait)
		switch {
		case !decided:
			writeJSON(w, http.StatusAccepted, map[string]any{"status": "waiting"})
		case abort != "":
			writeJSON(w, http.StatusGone, map[string]any{"error": abort})
		default:
			writeJSON(w, http.StatusOK, map[string]any{"start_at_ns": start.UnixNano()})
		}
	})
	mux.HandleFunc("GET /v1/time", func(w http.ResponseWriter, r *http.Request) {
		t1 := c.clock.Now().UnixNano()
		body := map[string]any{"receive_ns": t1, "clock_domain": c.opts.ClockDomain}
		body["send_ns"] = c.clock.Now().UnixNano()
		writeJSON(w, http.StatusOK, body)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
