package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
	"github.com/inferprobe/inferprobe/sim"
)

// TestMain can run this test binary as a simulated engine in its own process
// (INFERPROBE_SIM_CHILD=<ground-truth path>): it prints the URL, serves until stdin closes.
func TestMain(m *testing.M) {
	if gt, ok := os.LookupEnv("INFERPROBE_SIM_CHILD"); ok {
		cfg := sim.DefaultConfig()
		cfg.Seed = 7
		cfg.GroundTruthPath = gt
		srv, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(srv.URL())
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childSim starts the simulated engine in a separate process writing ground truth to gtPath,
// and returns its URL and a stop function that waits for the ground truth to be flushed.
func childSim(t *testing.T, gtPath string) (string, func()) {
	t.Helper()
	// On a small host the engine and the client share the cores; the engine runs niced so
	// that what is measured is the client's fidelity, not the OS scheduler handing a whole
	// quantum to the co-located server (on a real deployment the server has its own host).
	args := []string{os.Args[0], "-test.run=^$"}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "15"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "INFERPROBE_SIM_CHILD="+gtPath)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("sim child: %v", err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stdin.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return strings.TrimSpace(line), stop
}

// memSink keeps every record in order.
type memSink struct{ artifact.Memory }

func (m *memSink) requests(phase string) []*artifact.Request {
	var out []*artifact.Request
	for _, r := range m.Records() {
		if q, ok := r.(*artifact.Request); ok && (phase == "" || q.Phase == phase) {
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CaseID != out[j].CaseID {
			return out[i].CaseID < out[j].CaseID
		}
		return *out[i].RequestIndex < *out[j].RequestIndex
	})
	return out
}

func (m *memSink) windows() []*artifact.PhaseWindow {
	var out []*artifact.PhaseWindow
	for _, r := range m.Records() {
		if w, ok := r.(*artifact.PhaseWindow); ok {
			out = append(out, w)
		}
	}
	return out
}

func statuses(reqs []*artifact.Request) []string {
	var s []string
	for _, r := range reqs {
		s = append(s, r.Status)
	}
	return s
}

// fastSim is a sim with small, quick latencies.
func fastSim(t *testing.T, mod func(*sim.Config)) *sim.Server {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Seed = 7
	if mod != nil {
		mod(&cfg)
	}
	srv, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func baseConfig(srv *sim.Server) *Config {
	return &Config{
		Endpoint: srv.URL() + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: "run-1",
		Timeout: 10 * time.Second, Stream: true, StreamUsage: true,
		InputTokens: []int{64}, OutputTokens: []int{8}, Seed: 3,
		ExtraBody: map[string]any{"ignore_eos": true},
	}
}

func runConfig(t *testing.T, ctx context.Context, cfg *Config) (*memSink, error) {
	return runWith(t, ctx, cfg, nil)
}

// runWith validates cfg and runs it into a memSink; started, when set, sees the runner
// before its run begins (e.g. to schedule a Stop).
func runWith(t *testing.T, ctx context.Context, cfg *Config, started func(*Runner)) (*memSink, error) {
	t.Helper()
	sink := &memSink{}
	return sink, runInto(t, ctx, cfg, sink, started)
}

// runInto validates cfg and runs it into sink (started as in runWith).
func runInto(t *testing.T, ctx context.Context, cfg *Config, sink artifact.Sink, started func(*Runner)) error {
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
	defer c.CloseIdle()
	r := NewRunner(cfg, c, tok, sink, "session-1", Hooks{})
	if started != nil {
		started(r)
	}
	return r.Run(ctx)
}

var xReqRe = regexp.MustCompile(`^inferprobe-run-1-c2_in64_out8_(warmup|measured)_[01]_\d+$`)

func TestClosedLoopCounted(t *testing.T) {
	srv := fastSim(t, nil)
	cfg := baseConfig(srv)
	cfg.Concurrency = []int{2}
	cfg.Requests = 10
	cfg.WarmupRequests = 2
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	meas := sink.requests(PhaseMeasured)
	if len(meas) != 10 || len(sink.requests(PhaseWarmup)) != 2 {
		t.Fatalf("measured %d warmup %d, want 10 and 2", len(meas), len(sink.requests(PhaseWarmup)))
	}
	seenX := map[string]bool{}
	for i, r := range meas {
		if r.Status != "ok" || *r.RequestIndex != int64(i) {
			t.Fatalf("request %d: status %s index %d", i, r.Status, *r.RequestIndex)
		}
		if !xReqRe.MatchString(*r.XRequestID) || seenX[*r.XRequestID] {
			t.Fatalf("bad or repeated x_request_id %q", *r.XRequestID)
		}
		seenX[*r.XRequestID] = true
		if len(*r.TraceID) != 32 {
			t.Fatalf("trace id %q", *r.TraceID)
		}
		if *r.PromptTokens != 64 || r.PromptTokenSource != SourceServerUsage || !r.PromptTokenExact {
			t.Fatalf("prompt tokens %d from %s", *r.PromptTokens, r.PromptTokenSource)
		}
		if *r.OutputTokens != 8 || *r.FinishReason != "length" {
			t.Fatalf("output tokens %d finish %s, want 8 length (ignore_eos)", *r.OutputTokens, *r.FinishReason)
		}
		if *r.Concurrency != 2 || r.MaxInFlight != nil {
			t.Fatal("closed loop records concurrency, not max_in_flight")
		}
		if r.TTFTMS == nil || *r.TTFTMS <= 0 || *r.E2ELatencyMS < *r.TTFTMS {
			t.Fatalf("ttft %v e2e %v", r.TTFTMS, r.E2ELatencyMS)
		}
		if len(r.ChunkInterarrivalMS) != 7 {
			t.Fatalf("8 one-token chunks give 7 gaps, got %d", len(r.ChunkInterarrivalMS))
		}
	}
	ws := sink.windows()
	if len(ws) != 2 || ws[0].Phase != PhaseWarmup || ws[1].Phase != PhaseMeasured {
		t.Fatalf("windows %+v", ws)
	}
	w := ws[1]
	if *w.StartedAtNS > *w.WindowEndedAtNS || *w.WindowEndedAtNS > *w.DrainedAtNS {
		t.Fatal("window times out of order")
	}
	if w.ScheduledArrivals != nil || w.ScheduledEndpointOffsetNS != nil {
		t.Fatal("a closed loop has no schedule")
	}
	// The window of a counted closed loop ends at the last send.
	var lastStart int64
	for _, r := range meas {
		lastStart = max(lastStart, *r.StartedAtNS)
	}
	if d := *w.WindowEndedAtNS - lastStart; d != 0 {
		t.Fatalf("window end %d is %d ns from the last send", *w.WindowEndedAtNS, d)
	}
}

func TestFixedRateSchedule(t *testing.T) {
	srv := fastSim(t, nil)
	cfg := baseConfig(srv)
	cfg.Arrival = schedule.FixedRate
	cfg.Rates = []float64{50}
	cfg.Requests = 10
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 10 {
		t.Fatalf("got %d requests", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if gap := *reqs[i].IntendedAtNS - *reqs[i-1].IntendedAtNS; gap != int64(20*time.Millisecond) {
			t.Fatalf("intended gap %d ns, want exactly 20 ms", gap)
		}
	}
	for _, r := range reqs {
		if *r.DispatchLagMS < 0 || r.Concurrency != nil || *r.MaxInFlight != 128 || *r.HeldForSlot {
			t.Fatalf("lag %v conc %v mif %v held %v", *r.DispatchLagMS, r.Concurrency, *r.MaxInFlight, *r.HeldForSlot)
		}
	}
	w := sink.windows()[0]
	if *w.ScheduledArrivals != 10 || *w.ScheduledEndpointOffsetNS != int64(200*time.Millisecond) {
		t.Fatalf("scheduled %d endpoint %d", *w.ScheduledArrivals, *w.ScheduledEndpointOffsetNS)
	}
}

func TestPoissonSeededAndDigest(t *testing.T) {
	srv := fastSim(t, nil)
	offsets := func(seed int64) ([]int64, string) {
		cfg := baseConfig(srv)
		cfg.Arrival, cfg.Rates, cfg.Requests, cfg.Seed = schedule.Poisson, []float64{100}, 12, seed
		cfg.PromptMode = prompt.Unique
		sink, err := runConfig(t, context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		reqs := sink.requests(PhaseMeasured)
		var out []int64
		for _, r := range reqs {
			out = append(out, *r.IntendedAtNS-*reqs[0].IntendedAtNS)
		}
		return out, *sink.windows()[0].PromptsDigest
	}
	a, da := offsets(5)
	b, db := offsets(5)
	c, dc := offsets(6)
	if strings.Join(fmtInts(a), ",") != strings.Join(fmtInts(b), ",") || da != db {
		t.Fatal("same seed must give the same schedule and prompts")
	}
	if strings.Join(fmtInts(a), ",") == strings.Join(fmtInts(c), ",") || da == dc {
		t.Fatal("another seed must give another schedule and prompts")
	}
}

func fmtInts(v []int64) []string {
	var s []string
	for _, x := range v {
		b, _ := json.Marshal(x)
		s = append(s, string(b))
	}
	return s
}

func slowSim(t *testing.T, headerDelay time.Duration) *sim.Server {
	return fastSim(t, func(c *sim.Config) {
		c.Faults.SlowHeaders = 1
		c.Faults.SlowHeadersDuration = headerDelay
	})
}

func TestOverflowDrop(t *testing.T) {
	srv := slowSim(t, 150*time.Millisecond)
	cfg := baseConfig(srv)
	cfg.Arrival, cfg.Rates, cfg.Requests = schedule.FixedRate, []float64{100}, 3
	cfg.MaxInFlight, cfg.Overflow = 1, OverflowDrop
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if got := strings.Join(statuses(reqs), ","); got != "ok,dropped,dropped" {
		t.Fatalf("statuses %s", got)
	}
	for _, r := range reqs[1:] {
		if r.E2ELatencyMS != nil || r.XRequestID != nil || *r.ErrorMessage != "in-flight limit of 1 reached" {
			t.Fatalf("dropped record %+v", r)
		}
		if r.PromptTokens == nil || r.PromptTokenExact {
			t.Fatal("dropped requests carry the planned, non-exact prompt length")
		}
	}
}

func TestOverflowWaitHolds(t *testing.T) {
	srv := slowSim(t, 100*time.Millisecond)
	cfg := baseConfig(srv)
	cfg.Arrival, cfg.BurstSize, cfg.BurstInterval, cfg.Requests = schedule.Burst, 3, time.Second, 3
	cfg.MaxInFlight = 1
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	var held []bool
	for _, r := range reqs {
		held = append(held, *r.HeldForSlot)
	}
	if held[0] || !held[1] || !held[2] {
		t.Fatalf("held flags %v, want [false true true]", held)
	}
	if !(*reqs[1].DispatchLagMS >= 90 && *reqs[2].DispatchLagMS >= 190) {
		t.Fatalf("lags %v %v should grow by ~100 ms", *reqs[1].DispatchLagMS, *reqs[2].DispatchLagMS)
	}
	for _, r := range reqs {
		if r.Status != "ok" || *r.InFlightAtDispatch != 1 {
			t.Fatalf("status %s in flight %d", r.Status, *r.InFlightAtDispatch)
		}
	}
}

func TestOutcomeClassesThroughFaults(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(*sim.Config)
		status string
		errTyp string
		http   int64
	}{
		{"rejected429", func(c *sim.Config) { c.Faults.Reject429 = 1 }, "rejected", client.ErrTypeRejected, 429},
		{"rejected503", func(c *sim.Config) { c.Faults.Reject503 = 1 }, "rejected", client.ErrTypeRejected, 503},
		{"reset", func(c *sim.Config) { c.Faults.Reset = 1 }, "delivery_unknown", client.ErrTypeNoResponse, 0},
		{"streamError", func(c *sim.Config) { c.Faults.StreamError = 1 }, "error", client.ErrTypeStreamError, 200},
		{"truncated", func(c *sim.Config) { c.Faults.Truncate = 1 }, "error", client.ErrTypeTruncated, 200},
		{"timeout", func(c *sim.Config) { c.Faults.SlowHeaders = 1; c.Faults.SlowHeadersDuration = time.Second }, "timeout", client.ErrTypeTimeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fastSim(t, tc.mod)
			cfg := baseConfig(srv)
			cfg.Concurrency, cfg.Requests = []int{1}, 2
			cfg.Timeout = 300 * time.Millisecond
			sink, err := runConfig(t, context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range sink.requests(PhaseMeasured) {
				if r.Status != tc.status || r.ErrorType == nil || *r.ErrorType != tc.errTyp {
					t.Fatalf("status %s error_type %v, want %s %s (%v)", r.Status, r.ErrorType, tc.status, tc.errTyp, r.ErrorMessage)
				}
				if (tc.http == 0) != (r.HTTPStatus == nil) || (tc.http != 0 && *r.HTTPStatus != tc.http) {
					t.Fatalf("http status %v, want %d", r.HTTPStatus, tc.http)
				}
				if r.E2ELatencyMS == nil {
					t.Fatal("a failure records how long it ran")
				}
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cfg := &Config{Endpoint: "http://" + addr + "/v1/chat/completions", Model: "m", RunID: "run-1", Timeout: time.Second,
			Stream: true, InputTokens: []int{8}, OutputTokens: []int{4}, Requests: 1}
		sink, err := runConfig(t, context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(sink.requests(PhaseMeasured)); len(got) != 1 || got[0] != "unreachable" {
			t.Fatalf("statuses %v", got)
		}
	})
}

func TestReplayOffsetsAndArtifactTrace(t *testing.T) {
	srv := fastSim(t, nil)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(trace, []byte("{\"offset_ms\": 1500}\n{\"offset_ms\": 1000}\n{\"offset_ms\": 1100.5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(srv)
	cfg.Arrival = schedule.Replay
	if err := LoadArrivalTrace(cfg, trace, ""); err != nil {
		t.Fatal(err)
	}
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 3 || reqs[0].CaseID != "replay_in64_out8" {
		t.Fatalf("got %d requests of %s", len(reqs), reqs[0].CaseID)
	}
	if g := *reqs[1].IntendedAtNS - *reqs[0].IntendedAtNS; g != int64(100500*time.Microsecond) {
		t.Fatalf("replayed gap %d", g)
	}
	if sink.windows()[0].ScheduledEndpointOffsetNS != nil {
		t.Fatal("a replay without duration has no scheduled endpoint")
	}

	// Write that run as an artifact and replay it.
	art := filepath.Join(dir, "a.jsonl")
	w, err := artifact.NewWriter(art)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sink.Records() {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cfg2 := baseConfig(srv)
	cfg2.Arrival = schedule.Replay
	if err := LoadArrivalTrace(cfg2, art, ""); err != nil {
		t.Fatal(err)
	}
	if len(cfg2.Trace) != 3 || cfg2.Trace[1] != 100500*time.Microsecond || cfg2.TraceCase != "replay_in64_out8" {
		t.Fatalf("artifact trace %v case %s", cfg2.Trace, cfg2.TraceCase)
	}
	if err := LoadArrivalTrace(baseConfig(srv), art, "nope"); !IsUsage(err) {
		t.Fatalf("unknown case: %v, want a usage error", err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"offset_ms\": -1}\n"), 0o644)
	var te *TraceInputError
	if err := LoadArrivalTrace(baseConfig(srv), bad, ""); err == nil || !asTraceErr(err, &te) {
		t.Fatalf("negative offset: %v, want a TraceInputError", err)
	}
}

func asTraceErr(err error, te **TraceInputError) bool {
	e, ok := err.(*TraceInputError)
	*te = e
	return ok
}

func TestInterruptRecordsInFlightAsCancelled(t *testing.T) {
	srv := slowSim(t, 2*time.Second)
	cfg := baseConfig(srv)
	cfg.Concurrency, cfg.Requests = []int{3}, 6
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	sink, err := runConfig(t, ctx, cfg)
	if err == nil {
		t.Fatal("an interrupted run returns the context's error")
	}
	reqs := sink.requests(PhaseMeasured)
	if len(reqs) != 3 {
		t.Fatalf("%d records, want the 3 in flight", len(reqs))
	}
	for _, r := range reqs {
		if r.Status != "cancelled" {
			t.Fatalf("status %s", r.Status)
		}
	}
	if len(sink.windows()) != 0 {
		t.Fatal("an interrupted phase records no window")
	}
}

func TestCacheResetAnswers(t *testing.T) {
	srv := fastSim(t, nil)
	cfg := baseConfig(srv)
	cfg.Requests, cfg.CacheState = 1, CacheCold
	cfg.CacheResetURL = srv.URL() + "/reset_prefix_cache"
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cs *artifact.CacheState
	for _, r := range sink.Records() {
		if c, ok := r.(*artifact.CacheState); ok {
			cs = c
		}
	}
	if cs == nil || !cs.Attempted || !cs.Acknowledged || cs.Reset.Answer != ResetAcknowledged || cs.RunKind != RunColdStart {
		t.Fatalf("cache state %+v", cs)
	}
	// An answer without a success field is accepted_unverified; a 404 fails.
	empty := fastSim(t, func(c *sim.Config) { c.ResetAnswer = "empty" })
	cfg = baseConfig(empty)
	cfg.Requests, cfg.CacheState, cfg.CacheResetURL = 1, CacheCold, empty.URL()+"/reset_prefix_cache"
	sink, _ = runConfig(t, context.Background(), cfg)
	if c := cacheStateOf(t, sink); c.Reset.Answer != ResetAcceptedUnverified || c.RunKind != RunColdStart {
		t.Fatalf("empty answer: %+v", c.Reset)
	}
	cfg = baseConfig(srv)
	cfg.Requests, cfg.CacheState, cfg.CacheResetURL = 1, CacheCold, srv.URL()+"/no_such_route"
	sink, _ = runConfig(t, context.Background(), cfg)
	if c := cacheStateOf(t, sink); c.Reset.Answer != "" || c.Reset.Status == nil || *c.Reset.Status != 404 || c.RunKind != RunUnspecified || c.Acknowledged {
		t.Fatalf("404 answer: %+v", c.Reset)
	}
}

// cacheStateOf returns the run's one infer.cache_state record (a single case), failing the
// test when there is not exactly one or it records no reset attempt.
func cacheStateOf(t *testing.T, sink *memSink) *artifact.CacheState {
	t.Helper()
	var found []*artifact.CacheState
	for _, r := range sink.Records() {
		if c, ok := r.(*artifact.CacheState); ok {
			found = append(found, c)
		}
	}
	if len(found) != 1 || !found[0].Attempted || found[0].Reset == nil {
		t.Fatalf("cache state records %+v, want one with a reset attempt", found)
	}
	return found[0]
}

// TestFidelityAgainstGroundTruth checks that measured TTFT and e2e land within 1 ms (p99) of
// the engine's true socket writes of the first content event and of [DONE], at 200 req/s.
// A write's true time is an interval — from just before the engine's Write to just after
// its Flush returned: the bytes reached the kernel inside it — and the error of a
// measurement is its distance to that interval (0 inside). The intervals' own widths are
// reported beside it: they are the ground truth's uncertainty.
//
// Linux gives one receive timestamp per read, the newest segment's: when the reading
// goroutine is late enough that the engine's next segment (after [DONE], the HTTP chunked
// terminator, written when the handler returns) is already queued, [DONE] is dated by that
// segment. On a busy shared host this puts a few requests 0.3–1.5 ms late, so a run may miss
// the bound for reasons outside the client: the test measures up to three runs and passes when
// one of them meets it (each run is logged). A client that timed reads after parsing, or
// fell back to time.Now(), misses it in every run.
func TestFidelityAgainstGroundTruth(t *testing.T) {
	if os.Getenv("INFERPROBE_FIDELITY") == "" {
		t.Skip("timing fidelity needs the machine to itself: scripts/test.sh runs it alone, with INFERPROBE_FIDELITY=1")
	}
	const attempts = 3
	for i := 1; i <= attempts; i++ {
		ttft, e2e := fidelityRun(t)
		if ttft < 1 && e2e < 1 {
			return
		}
		t.Logf("run %d of %d: p99 distance TTFT %.3f ms, e2e %.3f ms; want < 1 ms", i, attempts, ttft, e2e)
	}
	t.Fatalf("fidelity: p99 distance ≥ 1 ms in all %d runs", attempts)
}

// fidelityRun runs 600 Poisson requests against a child sim and returns the p99 distance
// (ms) of the measured TTFT and e2e to the engine's true writes.
func fidelityRun(t *testing.T) (ttftP99, e2eP99 float64) {
	t.Helper()
	gtPath := filepath.Join(t.TempDir(), "gt.jsonl")
	url, stop := childSim(t, gtPath)
	cfg := &Config{
		Endpoint: url + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: "run-1",
		Timeout: 10 * time.Second, Stream: true, StreamUsage: true,
		InputTokens: []int{64}, Seed: 3, ExtraBody: map[string]any{"ignore_eos": true},
	}
	rate := 200.0
	if v, err := strconv.ParseFloat(os.Getenv("INFERPROBE_FIDELITY_RATE"), 64); err == nil {
		rate = v
	}
	cfg.Arrival, cfg.Rates, cfg.Requests = schedule.Poisson, []float64{rate}, 600
	cfg.OutputTokens = []int{16}
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	f, err := os.Open(gtPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	truth := map[string]sim.GroundTruth{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var g sim.GroundTruth
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		truth[g.RequestID] = g
	}
	var dTTFT, dE2E, signed, widths []float64
	for _, r := range sink.requests(PhaseMeasured) {
		if r.Status != "ok" {
			t.Fatalf("status %s", r.Status)
		}
		g, ok := truth[*r.XRequestID]
		if !ok || len(g.ChunkNs) < 3 || len(g.ChunkStartNs) != len(g.ChunkNs) {
			t.Fatalf("no ground truth for %s", *r.XRequestID)
		}
		start := float64(*r.StartedAtNS)
		firstToken := start + *r.TTFTMS*1e6
		end := start + *r.E2ELatencyMS*1e6
		last := len(g.ChunkNs) - 1
		dTTFT = append(dTTFT, outside(firstToken, g.ChunkStartNs[1], g.ChunkNs[1])/1e6)
		dE2E = append(dE2E, outside(end, g.ChunkStartNs[last], g.ChunkNs[last])/1e6)
		signed = append(signed, (firstToken-float64(g.ChunkNs[1]))/1e6)
		widths = append(widths, float64(g.ChunkNs[1]-g.ChunkStartNs[1])/1e6, float64(g.ChunkNs[last]-g.ChunkStartNs[last])/1e6)
	}
	if os.Getenv("INFERPROBE_FIDELITY_DEBUG") != "" {
		for _, r := range sink.requests(PhaseMeasured) {
			g := truth[*r.XRequestID]
			last := len(g.ChunkNs) - 1
			end := float64(*r.StartedAtNS) + *r.E2ELatencyMS*1e6
			if d := outside(end, g.ChunkStartNs[last], g.ChunkNs[last]); d > 2e5 {
				t.Logf("e2e off by %.3f ms: end-DONEend %.3f ms, DONE interval %.3f ms, finished-DONEend %.3f ms", d/1e6,
					(end-float64(g.ChunkNs[last]))/1e6, float64(g.ChunkNs[last]-g.ChunkStartNs[last])/1e6, float64(*g.FinishedNs-g.ChunkNs[last])/1e6)
			}
		}
	}
	for _, v := range [][]float64{dTTFT, dE2E, signed, widths} {
		sort.Float64s(v)
	}
	q := func(v []float64, p float64) float64 { return v[int(p*float64(len(v)-1))] }
	t.Logf("measured − write end: min %.3f p1 %.3f p50 %.3f p99 %.3f max %.3f ms; write intervals p50 %.3f p99 %.3f max %.3f ms",
		signed[0], q(signed, 0.01), q(signed, 0.5), q(signed, 0.99), signed[len(signed)-1], q(widths, 0.5), q(widths, 0.99), widths[len(widths)-1])
	t.Logf("n=%d distance to the true write: TTFT p50 %.3f p90 %.3f p99 %.3f ms; e2e ([DONE]) p50 %.3f p90 %.3f p99 %.3f ms",
		len(dTTFT), q(dTTFT, 0.5), q(dTTFT, 0.9), q(dTTFT, 0.99), q(dE2E, 0.5), q(dE2E, 0.9), q(dE2E, 0.99))
	return q(dTTFT, 0.99), q(dE2E, 0.99)
}

// outside returns how far x lies outside [lo, hi] (0 inside), in ns.
func outside(x float64, lo, hi int64) float64 {
	switch {
	case x < float64(lo):
		return float64(lo) - x
	case x > float64(hi):
		return x - float64(hi)
	}
	return 0
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestDurationWindowLastsItsDuration(t *testing.T) {
	srv := fastSim(t, nil)
	cfg := baseConfig(srv)
	cfg.Arrival, cfg.Rates, cfg.Duration = schedule.Poisson, []float64{5}, 600*time.Millisecond
	cfg.InputTokens = []int{64, 65}
	sink, err := runConfig(t, context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws := sink.windows()
	if len(ws) != 2 {
		t.Fatalf("%d windows", len(ws))
	}
	for _, w := range ws {
		if got := time.Duration(*w.WindowEndedAtNS - *w.StartedAtNS); got != 600*time.Millisecond {
			t.Fatalf("window %v, want exactly the duration", got)
		}
		if *w.DrainedAtNS < *w.WindowEndedAtNS {
			t.Fatal("drained before the window ended")
		}
	}
	if *ws[1].StartedAtNS < *ws[0].DrainedAtNS {
		t.Fatal("the next case started inside the previous window")
	}
}

// failingSink refuses every record after the first ok ones, as an artifact on a full disk.
type failingSink struct {
	memSink
	mu       sync.Mutex
	ok, seen int
}

var errDiskFull = errors.New("write run.jsonl: no space left on device")

func (f *failingSink) Write(rec artifact.Record) error {
	f.mu.Lock()
	f.seen++
	fail := f.seen > f.ok
	f.mu.Unlock()
	if fail {
		return errDiskFull
	}
	return f.memSink.Write(rec)
}

// A sink that refuses a record ends dispatch at once: the run returns its error, and far
// fewer requests than planned were sent.
func TestSinkErrorStopsDispatch(t *testing.T) {
	srv := fastSim(t, nil)
	cfg := baseConfig(srv)
	cfg.Concurrency = []int{2}
	cfg.Requests = 400
	sink := &failingSink{ok: 5}
	if err := runInto(t, context.Background(), cfg, sink, nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("run error %v, want the sink's", err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.seen > 20 {
		t.Fatalf("%d records offered after the sink failed at the 6th (400 planned)", sink.seen)
	}
}
