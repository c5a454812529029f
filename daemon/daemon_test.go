package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/receiver"
	"github.com/inferprobe/inferprobe/sim"
)

var simModel = sim.DefaultConfig().Model

// readArtifact reads a run's artifact and its spans.
func readArtifact(t *testing.T, path string) (*artifact.Artifact, []artifact.Span) {
	t.Helper()
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spans []artifact.Span
	for _, r := range a.Others {
		if r.Kind.EventType != artifact.EventSpan {
			continue
		}
		s, err := artifact.DecodeSpanRaw(r)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	return a, spans
}

func measured(a *artifact.Artifact) []artifact.Request {
	var out []artifact.Request
	for _, r := range a.Requests {
		if r.Phase == artifact.PhaseMeasured {
			out = append(out, r)
		}
	}
	return out
}

// checkRunArtifact checks a completed run's artifact: its ids, its measured requests (all
// ok) and that every span in it carries the run's ids and belongs to one of its requests.
// It returns the number of spans.
func checkRunArtifact(t *testing.T, res RunResult, dir string, wantMeasured int) int {
	t.Helper()
	if res.Err != nil || res.Outcome != exporter.RunCompleted || res.Report == nil {
		t.Fatalf("run %+v", res)
	}
	if filepath.Dir(res.Path) != filepath.Join(dir, res.Probe) || !strings.HasSuffix(res.Path, "-"+res.RunID[:8]+".jsonl") {
		t.Fatalf("artifact path %s", res.Path)
	}
	a, spans := readArtifact(t, res.Path)
	fin := a.FinalSession()
	if fin == nil || fin.Status != artifact.StatusCompleted || a.Header == nil || a.Header.Context.RunID != res.RunID || a.Header.Context.SessionID != fin.SessionID {
		t.Fatalf("final session %+v header %+v", fin, a.Header)
	}
	m := measured(a)
	if len(m) != wantMeasured {
		t.Fatalf("%d measured requests, want %d", len(m), wantMeasured)
	}
	xrids := map[string]bool{}
	for _, r := range a.Requests {
		if r.Status != artifact.RequestOK || r.XRequestID == nil || !strings.HasPrefix(*r.XRequestID, "inferprobe-"+res.RunID+"-") {
			t.Fatalf("request %+v", r)
		}
		xrids[*r.XRequestID] = true
	}
	for _, s := range spans {
		if s.SessionID != fin.SessionID || s.RunID != res.RunID {
			t.Fatalf("span of session %q run %q in the artifact of session %q run %q", s.SessionID, s.RunID, fin.SessionID, res.RunID)
		}
		id, _ := s.String(artifact.AttrRequestID)
		found := false
		for _, c := range join.CandidateRequestIDs(id) {
			found = found || xrids[c]
		}
		if !found {
			t.Fatalf("span with request id %q belongs to none of the run's requests", id)
		}
	}
	return len(spans)
}

// TestDaemonRunsAndRoutesSpans: two probes against the sim, which exports its spans over
// gRPC to the daemon's receiver: each run's artifact holds its own requests' spans, the
// exporter holds both runs, and a span of no probe run is counted unrouted.
func TestDaemonRunsAndRoutesSpans(t *testing.T) {
	grpcAddr := freeAddr(t)
	srv := startSim(t, func(c *sim.Config) {
		c.OTLPProtocol = sim.ProtocolGRPC
		c.OTLPBatchDelay = 200 * time.Millisecond
		c.OTLPTracesEndpoint = grpcAddr
	})
	dir := t.TempDir()
	d, _, runs := startDaemon(t, fmt.Sprintf(`
listen: 127.0.0.1:0
receiver:
  http_listen: ""
  grpc_listen: %s
artifacts:
  dir: %s
slos:
  - name: chat
    criteria: ["ttft:2000"]
targets:
  - name: sim
    base_url: %s/v1
    model: %s
    metrics_url: default
    scrape_interval: 200ms
probes:
  - name: p1
    target: sim
    slo: chat
    every: 1h
    spans_drain: 2s
    tables: true
    workload: {concurrency: [2], requests: 4, warmup-requests: 1}
  - name: p2
    target: sim
    every: 1h
    spans_drain: 2s
    workload: {concurrency: [1], requests: 3}
`, grpcAddr, dir, srv.URL(), simModel))
	if d.OTLPGRPCAddr() != grpcAddr || d.OTLPHTTPAddr() != "" {
		t.Fatalf("receiver addresses %q %q", d.OTLPGRPCAddr(), d.OTLPHTTPAddr())
	}

	byProbe := map[string]RunResult{}
	for len(byProbe) < 2 {
		r := nextRun(t, runs, "", 120*time.Second)
		byProbe[r.Probe] = r
	}
	n1 := checkRunArtifact(t, byProbe["p1"], dir, 4)
	n2 := checkRunArtifact(t, byProbe["p2"], dir, 3)
	// Every request's span arrives within the drain (the engine batches every 200 ms) and
	// reaches its own run: p1 sent 5 requests (1 warmup), p2 3.
	if n1 != 5 || n2 != 3 {
		t.Fatalf("spans routed: p1 %d, p2 %d; want 5 and 3, each run's own", n1, n2)
	}
	// p1 (tables: true) wrote its run's tables beside its artifact: its 4 measured requests,
	// each with its joined span's columns; p2 wrote none.
	tdir := TablesDir(byProbe["p1"].Path)
	if b, err := os.ReadFile(filepath.Join(tdir, "request_metrics.csv")); err != nil ||
		strings.Count(string(b), "\n") != 5 || !strings.Contains(string(b), "request_unaccounted_time") {
		t.Errorf("p1's tables (%s): %v\n%s", tdir, err, b)
	}
	if _, err := os.Stat(filepath.Join(tdir, "index.html")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(TablesDir(byProbe["p2"].Path)); !os.IsNotExist(err) {
		t.Errorf("p2 (no tables) has a tables directory: %v", err)
	}

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"inferprobe_requests_total", map[string]string{"probe": "p1", "status": "ok", "target": "sim", "model": simModel, "case": "c2_in32_out8"}, 4},
		{"inferprobe_requests_total", map[string]string{"probe": "p2", "status": "ok", "case": "c1_in32_out8"}, 3},
		{"inferprobe_probe_runs_total", map[string]string{"probe": "p1", "outcome": "completed"}, 1},
		{"inferprobe_probe_runs_total", map[string]string{"probe": "p2", "outcome": "completed"}, 1},
		{"inferprobe_probe_runs_total", map[string]string{"probe": "p1", "outcome": "failed"}, 0},
		{"inferprobe_probe_running", map[string]string{"probe": "p1"}, 0},
		{"inferprobe_probe_interval_seconds", map[string]string{"probe": "p2"}, 3600},
		{"inferprobe_slo_objective_ratio", map[string]string{"probe": "p1", "slo": "chat"}, 0.99},
		{"inferprobe_ttft_seconds", map[string]string{"probe": "p1"}, 4},
	} {
		if got, ok := metric(t, d, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	ev := byProbe["p1"].Report.Cases["c2_in32_out8"].SLO
	if got := sumMetric(t, d, "inferprobe_slo_requests_total", map[string]string{"probe": "p1"}); ev == nil || got != 4 ||
		float64(ev.Met+ev.Missed+ev.Unknown) != got {
		t.Errorf("inferprobe_slo_requests_total of p1 = %v, evaluation %+v", got, ev)
	}
	if got, ok := metric(t, d, "inferprobe_server_e2e_seconds", map[string]string{"probe": "p1"}); !ok || got < 1 || got > 4 {
		t.Errorf("joined server spans of p1's measured requests: %v", got)
	}
	if _, ok := metric(t, d, "inferprobe_slo_objective_ratio", map[string]string{"probe": "p2"}); ok {
		t.Error("a probe without an slo has an objective")
	}
	waitFor(t, "the sim's /metrics to be scraped", 10*time.Second, func() bool {
		v, ok := metric(t, d, "inferprobe_scrape_up", map[string]string{"target": "sim"})
		return ok && v == 1
	})
	if got := sumMetric(t, d, "inferprobe_receiver_spans_received_total", map[string]string{"transport": "grpc"}); got < float64(n1+n2) {
		t.Errorf("received %v spans over gRPC, routed %d", got, n1+n2)
	}

	// Requests of no probe run: an inferprobe id of another run and a foreign id.
	before, _ := metric(t, d, "inferprobe_receiver_spans_unrouted_total", nil)
	for _, xrid := range []string{"inferprobe-00000000-0000-4000-8000-000000000000-c1_in32_out8_measured_0_0", "someone-else-1"} {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello there"}],"max_tokens":2}`, simModel)
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", xrid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("sim answered %d", resp.StatusCode)
		}
	}
	waitFor(t, "two unrouted spans", 10*time.Second, func() bool {
		v, _ := metric(t, d, "inferprobe_receiver_spans_unrouted_total", nil)
		return v >= before+2
	})
	// The artifacts are unchanged: closed before, and the spans went nowhere.
	if n := checkRunArtifact(t, byProbe["p1"], dir, 4); n != n1 {
		t.Fatalf("p1's artifact has %d spans now, %d before", n, n1)
	}
}

// TestSpanFeedRouting: a span goes to the run whose X-Request-Id prefix (in any of vLLM's
// forms) or trace id (learnt from the run's records) it carries; others, and spans of
// detached runs, are unrouted.
func TestSpanFeedRouting(t *testing.T) {
	cfg := mustParse(t, baseYAML)
	d := New(cfg, Options{Logger: quietLogger()})
	type got struct {
		run string
		rec *artifact.Span
	}
	var mu sync.Mutex
	var written []got
	attach := func(runID string) (artifact.Sink, func()) {
		return d.feed.Attach(runID, artifact.SinkFunc(func(rec artifact.Record) error {
			mu.Lock()
			defer mu.Unlock()
			written = append(written, got{runID, rec.(*artifact.Span)})
			return nil
		}))
	}
	// Run ids are UUIDs (uuid.NewString in execute).
	const ra, rb = "9b2f4c1e-0a7d-4f3e-9c51-6f0e2d8b1a01", "9b2f4c1e-0a7d-4f3e-9c51-6f0e2d8b1a02"
	_, detachA := attach(ra)
	recordsB, detachB := attach(rb)
	defer detachB()
	if err := recordsB.Write(&artifact.RequestSent{CaseID: "c1", TraceID: "0123456789abcdef0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	span := func(id string, trace string) *artifact.Span {
		s := &artifact.Span{Name: artifact.RequestSpanName, Attributes: map[string]any{}}
		if id != "" {
			s.Attributes[artifact.AttrRequestID] = id
		}
		if trace != "" {
			s.TraceID = &trace
		}
		return s
	}
	unrouted := func() float64 {
		v, _ := metric(t, d, "inferprobe_receiver_spans_unrouted_total", nil)
		return v
	}
	for _, s := range []*artifact.Span{
		span("chatcmpl-inferprobe-"+ra+"-c1_in32_out8_measured_0_3", ""),
		span("inferprobe-"+rb+"-c1_in32_out8_warmup_0_1-1a2b3c4d", ""),
		span("chatcmpl-x", "0123456789abcdef0123456789abcdef"),
		span("inferprobe-"+ra[:35]+"3-c1_in32_out8_measured_0_1", "ffffffffffffffffffffffffffffffff"),
		span("", ""),
	} {
		if err := d.feed.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(written) != 3 || written[0].run != ra || written[1].run != rb || written[2].run != rb {
		t.Fatalf("routed %+v", written)
	}
	mu.Unlock()
	if u := unrouted(); u != 2 {
		t.Fatalf("unrouted %v, want 2", u)
	}
	detachA()
	if err := d.feed.Write(span("chatcmpl-inferprobe-"+ra+"-c1_in32_out8_measured_0_4", "")); err != nil {
		t.Fatal(err)
	}
	if u := unrouted(); u != 3 {
		t.Fatalf("a span of a detached run: unrouted %v, want 3", u)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 3 {
		t.Fatalf("a span was written after its run was detached: %+v", written[3:])
	}
}

// TestSpanFeedWithoutRuns: with no run attached the feed wants no span (the receiver then
// hands it counts), and every skipped span counts as unrouted, exactly.
func TestSpanFeedWithoutRuns(t *testing.T) {
	d := New(mustParse(t, baseYAML), Options{Logger: quietLogger()})
	var _ receiver.SpanFilter = d.feed
	if d.feed.WantsSpans() {
		t.Fatal("a feed without runs wants spans")
	}
	d.feed.SkipSpans(512)
	d.feed.SkipSpans(3)
	if v, _ := metric(t, d, "inferprobe_receiver_spans_unrouted_total", nil); v != 515 {
		t.Fatalf("unrouted %v, want 515", v)
	}
	_, detach := d.feed.Attach("9b2f4c1e-0a7d-4f3e-9c51-6f0e2d8b1a01", artifact.SinkFunc(func(artifact.Record) error { return nil }))
	if !d.feed.WantsSpans() {
		t.Fatal("a feed with a run attached wants no span")
	}
	detach()
	if d.feed.WantsSpans() {
		t.Fatal("a feed whose run was detached wants spans")
	}
}

// reloadConfig is the configuration of TestDaemonReload: two probes without spans.
func reloadConfig(dir, simURL, listen, ttft, p2Requests string) string {
	return fmt.Sprintf(`
listen: %s
receiver: {http_listen: "", grpc_listen: ""}
artifacts:
  dir: %s
slos:
  - name: chat
    criteria: ["ttft:%s"]
targets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: p1
    target: sim
    slo: chat
    every: 1h
    workload: {concurrency: [2], requests: 2}
  - name: p2
    target: sim
    every: 1h
    workload: {concurrency: [1], requests: %s}
`, listen, dir, ttft, simURL, simModel, p2Requests)
}

func loopOf(d *Daemon, name string) *probeLoop {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loops[name]
}

func artifactsOf(t *testing.T, dir, probe string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, probe, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDaemonReload: a changed probe restarts alone (its counters go on), a bad file keeps the
// configuration, a change of SLO thresholds rebuilds the histograms in the one exporter
// without restarting any probe, and nothing reloads after Shutdown.
func TestDaemonReload(t *testing.T) {
	srv := startSim(t, nil)
	dir := t.TempDir()
	d, path, runs := startDaemon(t, reloadConfig(dir, srv.URL(), "127.0.0.1:0", "444", "2"))
	seen := map[string]int{}
	for len(seen) < 2 {
		seen[nextRun(t, runs, "", 120*time.Second).Probe]++
	}
	l1, l2 := loopOf(d, "p1"), loopOf(d, "p2")
	cfg0, exp0 := d.Config(), d.Exporter()

	// p2 changes (and the listen address, which needs a restart): only p2 restarts.
	if err := os.WriteFile(path, []byte(reloadConfig(dir, srv.URL(), "127.0.0.1:1", "444", "3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if loopOf(d, "p1") != l1 || loopOf(d, "p2") == l2 {
		t.Fatal("want p1's loop kept and p2's replaced")
	}
	select {
	case <-l2.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the replaced loop did not end")
	}
	if d.Config() == cfg0 || d.Config().Listen != cfg0.Listen || d.Exporter() != exp0 {
		t.Fatalf("after reload: listen %q, exporter swapped %v", d.Config().Listen, d.Exporter() != exp0)
	}
	if loopOf(d, "p1").cfg.Load() != d.Config() {
		t.Fatal("the kept loop runs under the old configuration")
	}
	r := nextRun(t, runs, "p2", 120*time.Second)
	a, _ := readArtifact(t, r.Path)
	if n := len(measured(a)); n != 3 || r.Outcome != exporter.RunCompleted {
		t.Fatalf("p2's new run: %d requests, outcome %s", n, r.Outcome)
	}
	if got, _ := metric(t, d, "inferprobe_requests_total", map[string]string{"probe": "p2", "status": "ok"}); got != 2+3 {
		t.Fatalf("p2's series after its restart: %v ok requests, want 5 (the old run's 2 stay counted)", got)
	}
	if n := len(artifactsOf(t, dir, "p1")); n != 1 {
		t.Fatalf("p1 has %d artifacts: an unchanged probe must not run again", n)
	}
	if v, _ := metric(t, d, "inferprobe_config_last_reload_successful", nil); v != 1 {
		t.Fatalf("reload gauge %v", v)
	}

	// A file that does not load: the configuration and the loops stay.
	cfg1 := d.Config()
	l1, l2 = loopOf(d, "p1"), loopOf(d, "p2")
	if err := os.WriteFile(path, []byte("targets: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.Reload()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("reload of a broken file: %v", err)
	}
	if d.Config() != cfg1 || loopOf(d, "p1") != l1 || loopOf(d, "p2") != l2 {
		t.Fatal("a failed reload changed the running configuration")
	}
	if v, _ := metric(t, d, "inferprobe_config_last_reload_successful", nil); v != 0 {
		t.Fatalf("reload gauge %v after a failed reload, want 0", v)
	}

	// New SLO thresholds (and p2 changed, so that a new run fills the histograms): the one
	// exporter's ttft histogram is rebuilt with the new threshold's bucket; p1 does not
	// restart, and the counters go on.
	if err := os.WriteFile(path, []byte(reloadConfig(dir, srv.URL(), "127.0.0.1:0", "123", "4")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if d.Exporter() != exp0 || loopOf(d, "p1") != l1 {
		t.Fatal("a threshold change replaced the exporter or restarted p1")
	}
	if v, _ := metric(t, d, "inferprobe_config_last_reload_successful", nil); v != 1 {
		t.Fatalf("reload gauge %v", v)
	}
	if r := nextRun(t, runs, "p2", 120*time.Second); r.Outcome != exporter.RunCompleted {
		t.Fatalf("p2's run after the threshold change: %s", r.Outcome)
	}
	if v, _ := metric(t, d, "inferprobe_requests_total", map[string]string{"probe": "p1", "status": "ok"}); v != 2 {
		t.Fatalf("p1's ok requests %v after the threshold change, want its 2 still", v)
	}
	if v, _ := metric(t, d, "inferprobe_requests_total", map[string]string{"probe": "p2", "status": "ok"}); v != 2+3+4 {
		t.Fatalf("p2's ok requests %v, want 9", v)
	}
	bounds := map[float64]bool{}
	mfs, err := exp0.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "inferprobe_ttft_seconds" {
			for _, m := range mf.GetMetric() {
				for _, b := range m.GetHistogram().GetBucket() {
					bounds[b.GetUpperBound()] = true
				}
			}
		}
	}
	if !bounds[0.123] || bounds[0.444] {
		t.Fatalf("ttft buckets %v after the threshold change: want 0.123, not 0.444", bounds)
	}

	// After Shutdown nothing reloads.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(reloadConfig(dir, srv.URL(), "127.0.0.1:0", "500", "4")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err == nil {
		t.Fatal("Reload after Shutdown succeeded")
	}
	d.mu.Lock()
	for name, l := range d.loops {
		select {
		case <-l.done:
		default:
			t.Errorf("probe %s still runs after Shutdown", name)
		}
	}
	d.mu.Unlock()
}

func slowConfig(dir, simURL, workload string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s}
targets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: slow
    target: sim
    every: 1h
    workload: %s
`, dir, simURL, simModel, workload)
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDaemonShutdownDrains: Shutdown in the middle of a run stops dispatching, lets the
// in-flight requests finish (none cancelled), closes the artifact as interrupted; /-/ready
// answers 503 meanwhile and /-/healthy 200.
func TestDaemonShutdownDrains(t *testing.T) {
	srv := startSim(t, func(c *sim.Config) {
		c.Faults.SlowHeaders = 1
		c.Faults.SlowHeadersDuration = 700 * time.Millisecond
	})
	dir := t.TempDir()
	d, _, runs := startDaemon(t, slowConfig(dir, srv.URL(), "{concurrency: [2], requests: 1000, drain-timeout: 20}"))
	base := "http://" + d.MetricsAddr()
	if get(base+"/-/ready") != 200 || get(base+"/-/healthy") != 200 {
		t.Fatal("not ready or not healthy")
	}
	if code, body := httpGet(t, base+"/", "", ""); code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Fatalf("/: %d %q", code, body)
	}
	if get(base+"/nothing") != 404 {
		t.Fatal("an unknown path is not 404")
	}
	waitFor(t, "requests to finish and more to be in flight", 20*time.Second, func() bool {
		ok, _ := metric(t, d, "inferprobe_requests_total", map[string]string{"probe": "slow", "status": "ok"})
		fl, _ := metric(t, d, "inferprobe_in_flight_requests", map[string]string{"probe": "slow"})
		return ok >= 2 && fl == 2
	})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- d.Shutdown(ctx)
	}()
	waitFor(t, "/-/ready to answer 503 while the run drains", 10*time.Second, func() bool {
		return get(base+"/-/ready") == http.StatusServiceUnavailable
	})
	if get(base+"/-/healthy") != 200 {
		t.Error("/-/healthy is not 200 while draining")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	r := nextRun(t, runs, "slow", time.Second)
	if r.Outcome != exporter.RunInterrupted || r.Err != nil {
		t.Fatalf("run %+v, want interrupted without error", r)
	}
	a, _ := readArtifact(t, r.Path)
	if fin := a.FinalSession(); fin == nil || fin.Status != artifact.StatusInterrupted || fin.Summary == nil ||
		fin.Summary.RequestsRecorded != int64(len(a.Requests)) {
		t.Fatalf("final session %+v", fin)
	}
	if len(a.Requests) < 4 || len(a.Requests) >= 1000 {
		t.Fatalf("%d requests", len(a.Requests))
	}
	for _, q := range a.Requests {
		if q.Status != artifact.RequestOK {
			t.Fatalf("request %s is %s: a drain that fits cancels nothing", q.RequestID, q.Status)
		}
	}
	if v, _ := metric(t, d, "inferprobe_probe_runs_total", map[string]string{"probe": "slow", "outcome": "interrupted"}); v != 1 {
		t.Fatalf("interrupted runs %v", v)
	}
	if get(base+"/-/healthy") != 0 {
		t.Fatal("the /metrics server still answers after Shutdown")
	}
}

// TestDaemonShutdownCancelled: Shutdown with a context already cancelled cancels the
// requests in flight (recorded as cancelled) and returns the context's error.
func TestDaemonShutdownCancelled(t *testing.T) {
	srv := startSim(t, func(c *sim.Config) {
		c.Faults.SlowHeaders = 1
		c.Faults.SlowHeadersDuration = time.Minute
	})
	dir := t.TempDir()
	d, _, runs := startDaemon(t, slowConfig(dir, srv.URL(), "{concurrency: [2], requests: 10, timeout: 120}"))
	waitFor(t, "two requests in flight", 20*time.Second, func() bool {
		fl, _ := metric(t, d, "inferprobe_in_flight_requests", map[string]string{"probe": "slow"})
		return fl == 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- d.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v, want context.Canceled", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("Shutdown with a cancelled context did not return")
	}
	r := nextRun(t, runs, "slow", time.Second)
	if r.Outcome != exporter.RunInterrupted {
		t.Fatalf("run %+v", r)
	}
	a, _ := readArtifact(t, r.Path)
	if len(a.Requests) != 2 {
		t.Fatalf("%d requests, want the 2 in flight", len(a.Requests))
	}
	for _, q := range a.Requests {
		if q.Status != artifact.RequestCancelled {
			t.Fatalf("request %s is %s, want cancelled", q.RequestID, q.Status)
		}
	}
	if fin := a.FinalSession(); fin == nil || fin.Status != artifact.StatusInterrupted {
		t.Fatalf("final session %+v", fin)
	}
}

// runTimes records when each probe's runs end (OnRunEnd).
type runTimes struct {
	mu  sync.Mutex
	end map[string][]time.Time
	res map[string][]RunResult
}

func (rt *runTimes) add(r RunResult) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.end[r.Probe] = append(rt.end[r.Probe], time.Now())
	rt.res[r.Probe] = append(rt.res[r.Probe], r)
}

func (rt *runTimes) get(probe string) ([]time.Time, []RunResult) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]time.Time(nil), rt.end[probe]...), append([]RunResult(nil), rt.res[probe]...)
}

// startTimed starts a daemon on text that records its runs' end times.
func startTimed(t *testing.T, text string) (*Daemon, *runTimes) {
	t.Helper()
	cfg, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rt := &runTimes{end: map[string][]time.Time{}, res: map[string][]RunResult{}}
	d := New(cfg, Options{Logger: quietLogger(), OnRunEnd: rt.add})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d, rt
}

// checkBackoff: consecutive runs of a continuous probe that all failed end at least the
// backoff apart (1 s, then 2 s): no tight loop.
func checkBackoff(t *testing.T, ends []time.Time) {
	t.Helper()
	for i := 1; i < len(ends); i++ {
		if gap := ends[i].Sub(ends[i-1]); gap < time.Second {
			t.Fatalf("continuous runs %d and %d ended %v apart: a failing continuous probe must back off", i-1, i, gap)
		}
	}
}

// TestDaemonTargetDown: a target that does not answer gives unreachable requests and
// inferprobe_scrape_up 0, and its probes go on running (a continuous one backs off).
func TestDaemonTargetDown(t *testing.T) {
	dead := freeAddr(t) // nothing listens there
	dir := t.TempDir()
	d, rt := startTimed(t, fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s}
targets:
  - name: down
    base_url: http://%s/v1
    model: m
    metrics_url: default
    scrape_interval: 100ms
probes:
  - name: every
    target: down
    every: 1s
    workload: {requests: 2, timeout: 5}
  - name: cont
    target: down
    continuous: true
    workload: {requests: 2, timeout: 5}
`, dir, dead))
	waitFor(t, "two runs of the scheduled probe", 20*time.Second, func() bool {
		ends, _ := rt.get("every")
		return len(ends) >= 2
	})
	_, res := rt.get("every")
	for _, r := range res[:2] {
		if r.Outcome != exporter.RunCompleted || r.Path == "" {
			t.Fatalf("run %+v", r)
		}
		a, _ := readArtifact(t, r.Path)
		if len(a.Requests) != 2 || a.Requests[0].Status != artifact.RequestUnreachable || a.Requests[1].Status != artifact.RequestUnreachable {
			t.Fatalf("requests %+v, want 2 unreachable", a.Requests)
		}
	}
	if v, _ := metric(t, d, "inferprobe_requests_total", map[string]string{"probe": "every", "status": "unreachable"}); v < 4 {
		t.Fatalf("unreachable requests %v, want ≥ 4", v)
	}
	if v, ok := metric(t, d, "inferprobe_scrape_up", map[string]string{"target": "down"}); !ok || v != 0 {
		t.Fatalf("inferprobe_scrape_up %v (present %v), want 0", v, ok)
	}
	if v, _ := metric(t, d, "inferprobe_probe_last_success_timestamp_seconds", map[string]string{"probe": "every"}); v != 0 {
		t.Fatalf("last success %v: no run had a successful request", v)
	}
	if v, _ := metric(t, d, "inferprobe_probe_last_run_timestamp_seconds", map[string]string{"probe": "every"}); v == 0 {
		t.Fatal("no last run timestamp")
	}
	ends, _ := rt.get("cont")
	if len(ends) == 0 {
		t.Fatal("the continuous probe did not run")
	}
	checkBackoff(t, ends)
	if get("http://"+d.MetricsAddr()+"/-/ready") != 200 {
		t.Fatal("not ready")
	}
}

// TestDaemonArtifactsUnwritable: a run whose artifact cannot be created counts as failed, and
// the daemon keeps going.
func TestDaemonArtifactsUnwritable(t *testing.T) {
	file := writeFile(t, t.TempDir(), "a-file", "")
	dir := filepath.Join(file, "artifacts") // under a regular file: never creatable
	d, rt := startTimed(t, fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s}
targets:
  - name: t
    base_url: http://%s/v1
    model: m
probes:
  - name: every
    target: t
    every: 1s
    workload: {requests: 2}
  - name: cont
    target: t
    continuous: true
    workload: {requests: 2}
`, dir, freeAddr(t)))
	waitFor(t, "two failed runs", 20*time.Second, func() bool {
		ends, _ := rt.get("every")
		return len(ends) >= 2
	})
	_, res := rt.get("every")
	for _, r := range res {
		if r.Outcome != exporter.RunFailed || r.Err == nil || r.Path != "" || r.Report != nil {
			t.Fatalf("run %+v, want failed", r)
		}
	}
	if v, _ := metric(t, d, "inferprobe_probe_runs_total", map[string]string{"probe": "every", "outcome": "failed"}); v < 2 {
		t.Fatalf("failed runs %v", v)
	}
	if v, _ := metric(t, d, "inferprobe_probe_running", map[string]string{"probe": "every"}); v != 0 {
		t.Fatalf("running %v after failed runs", v)
	}
	ends, _ := rt.get("cont")
	checkBackoff(t, ends)
	if get("http://"+d.MetricsAddr()+"/-/ready") != 200 {
		t.Fatal("not ready")
	}
}

// TestDaemonBasicAuth: web_config_file's basic auth guards /metrics, the health endpoints
// and the OTLP/HTTP receiver.
func TestDaemonBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := writeFile(t, t.TempDir(), "web.yml", fmt.Sprintf("basic_auth_users:\n  admin: %s\n", hash))
	d, _, _ := startDaemon(t, fmt.Sprintf(`
listen: 127.0.0.1:0
web_config_file: %s
receiver: {http_listen: 127.0.0.1:0, grpc_listen: ""}
artifacts: {dir: %s}
targets:
  - name: t
    base_url: http://%s/v1
    model: m
probes:
  - name: p
    target: t
    every: 1h
    workload: {requests: 1}
`, web, t.TempDir(), freeAddr(t)))
	base := "http://" + d.MetricsAddr()
	if code, _ := httpGet(t, base+"/metrics", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without credentials: %d, want 401", code)
	}
	if code, _ := httpGet(t, base+"/metrics", "admin", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong password: %d, want 401", code)
	}
	code, body := httpGet(t, base+"/metrics", "admin", "s3cret")
	if code != 200 || !strings.Contains(body, `inferprobe_build_info{goversion=`) || !strings.Contains(body, `inferprobe_probe_interval_seconds{model="m",probe="p",target="t"} 3600`) {
		t.Fatalf("/metrics with credentials: %d\n%.2000s", code, body)
	}
	if code, _ := httpGet(t, base+"/-/healthy", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("/-/healthy without credentials: %d", code)
	}
	if code, body := httpGet(t, base+"/-/healthy", "admin", "s3cret"); code != 200 || !strings.Contains(body, "Healthy") {
		t.Fatalf("/-/healthy: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/-/ready", "admin", "s3cret"); code != 200 || !strings.Contains(body, "Ready") {
		t.Fatalf("/-/ready: %d %q", code, body)
	}

	otlp := "http://" + d.OTLPHTTPAddr() + "/v1/traces"
	if d.OTLPHTTPAddr() == "" {
		t.Fatal("no OTLP/HTTP listener")
	}
	post := func(user, pass string) int {
		req, _ := http.NewRequest(http.MethodPost, otlp, bytes.NewReader(nil))
		req.Header.Set("Content-Type", "application/x-protobuf")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("", ""); c != http.StatusUnauthorized {
		t.Fatalf("OTLP/HTTP without credentials: %d, want 401", c)
	}
	if c := post("admin", "s3cret"); c != 200 {
		t.Fatalf("OTLP/HTTP with credentials, an empty export: %d, want 200", c)
	}
}

// TestShutdownWithoutStart: nothing to stop.
func TestShutdownWithoutStart(t *testing.T) {
	d := New(mustParse(t, baseYAML), Options{Logger: quietLogger()})
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.MetricsAddr() != "" || d.OTLPGRPCAddr() != "" || d.OTLPHTTPAddr() != "" {
		t.Fatal("addresses of a daemon never started")
	}
	if err := d.Reload(); err == nil {
		t.Fatal("Reload of a configuration not read from a file")
	}
}

// A configured receiver listener that cannot bind stops the start (nothing left listening).
func TestStartFailsWhenAReceiverCannotBind(t *testing.T) {
	for _, which := range []string{"http_listen", "grpc_listen"} {
		t.Run(which, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			metricsAddr := freeAddr(t)
			other := "http_listen"
			if which == "http_listen" {
				other = "grpc_listen"
			}
			text := fmt.Sprintf("listen: %s\nreceiver:\n  %s: %s\n  %s: 127.0.0.1:0\nartifacts: {dir: %s}\n", metricsAddr, which, busy.Addr(), other, t.TempDir()) + baseYAML
			cfg, err := Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			d := New(cfg, Options{Logger: quietLogger()})
			if err := d.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "OTLP/") {
				_ = d.Shutdown(context.Background())
				t.Fatalf("Start: %v, want the receiver's bind error", err)
			}
			// /metrics was released: its address binds again.
			l, err := net.Listen("tcp", metricsAddr)
			if err != nil {
				t.Fatalf("the /metrics listener was left open: %v", err)
			}
			l.Close()
		})
	}
}
