package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// gate is a target in front of the sim whose chat requests wait until open is called (the
// rest pass at once): a test holds a probe run in progress, with held requests in flight,
// while it reloads.
type gate struct {
	url  string
	held atomic.Int64 // chat requests waiting now
	once sync.Once
	ch   chan struct{}
}

func startGate(t *testing.T, srv *sim.Server) *gate {
	t.Helper()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // stream every event at once
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	g := &gate{ch: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			g.held.Add(1)
			select {
			case <-g.ch:
			case <-r.Context().Done():
			}
			g.held.Add(-1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.open()
		ts.Close()
	})
	g.url = ts.URL
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// waitHeld waits until n chat requests are held.
func (g *gate) waitHeld(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d held requests", n), 20*time.Second, func() bool { return g.held.Load() == n })
}

// served sums the series of name whose labels include labels, on the daemon's /metrics
// page (the text format, as a plain GET gets it).
func served(t *testing.T, d *Daemon, name string, labels map[string]string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+d.MetricsAddr()+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	total := 0.0
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
line:
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		end := strings.LastIndexByte(l, '}')
		for k, v := range labels {
			if !strings.Contains(l[:end], fmt.Sprintf("%s=%q", k, v)) {
				continue line
			}
		}
		v, err := strconv.ParseFloat(strings.Fields(l[end+1:])[0], 64)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		total += v
	}
	return total
}

// gatedConfig: probe p (SLO chat, ttft:pTTFT ms) on the gated target with 2 workers and 4
// requests; extra is appended to the probes (another probe, say), slos to the SLOs.
func gatedConfig(dir, target, pTTFT, schedule, slos, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
receiver: {http_listen: "", grpc_listen: ""}
artifacts: {dir: %s}
slos:
  - name: chat
    criteria: ["ttft:%s"]
%stargets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: p
    target: sim
    slo: chat
    %s
    workload: {concurrency: [2], requests: 4, timeout: 60}
%s`, dir, pTTFT, slos, target, simModel, schedule, extra)
}

// otherProbe is a second probe on its own SLO (its own ttft threshold).
const (
	strictSLO  = "  - name: strict\n    criteria: [\"ttft:123\"]\n"
	otherProbe = "  - name: other\n    target: sim\n    slo: strict\n    every: 1h\n    workload: {concurrency: [1], requests: 1}\n"
	qProbe     = "  - name: q\n    target: sim\n    every: 1h\n    workload: {concurrency: [1], requests: 1}\n"
)

func rewrite(t *testing.T, d *Daemon, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
}

// checkCounted checks that probe p's runs are counted on /metrics: want runs by outcome
// (every outcome not named is 0), and judged requests equal to measured (met, missed and
// unknown together).
func checkCounted(t *testing.T, d *Daemon, want map[string]float64, measured int) {
	t.Helper()
	for _, o := range []string{artifact.RunCompleted, artifact.RunInterrupted, artifact.RunIncomplete, artifact.RunFailed} {
		if got := served(t, d, "inferprobe_probe_runs_total", map[string]string{"probe": "p", "outcome": o}); got != want[o] {
			t.Errorf("inferprobe_probe_runs_total{probe=p,outcome=%s} = %v, want %v", o, got, want[o])
		}
	}
	if got := served(t, d, "inferprobe_slo_requests_total", map[string]string{"probe": "p"}); got != float64(measured) {
		t.Errorf("inferprobe_slo_requests_total{probe=p} = %v, want the %d measured requests", got, measured)
	}
}

// TestReloadDuringRunUnrelated: a reload that leaves the running probe as it is (another
// probe and SLO added, retention changed) neither interrupts its run nor loses it: the run
// completes and is counted once on /metrics.
func TestReloadDuringRunUnrelated(t *testing.T) {
	g := startGate(t, startSim(t, nil))
	defer g.open() // before the daemon's shutdown
	dir := t.TempDir()
	d, path, runs := startDaemon(t, gatedConfig(dir, g.url, "60000", "every: 1h", "", ""))
	g.waitHeld(t, 2)
	l := loopOf(d, "p")
	rewrite(t, d, path, strings.Replace(gatedConfig(dir, g.url, "60000", "every: 1h", strictSLO, otherProbe),
		"artifacts: {dir: "+dir+"}", "artifacts: {dir: "+dir+", keep: 5}", 1))
	if loopOf(d, "p") != l {
		t.Fatal("an unrelated change restarted probe p")
	}
	g.open()
	r := nextRun(t, runs, "p", 120*time.Second)
	if r.Outcome != artifact.RunCompleted {
		t.Fatalf("p's run is %s, want completed", r.Outcome)
	}
	checkCounted(t, d, map[string]float64{artifact.RunCompleted: 1}, 4)
}

// TestReloadSLOThresholdDuringRun: a new SLO threshold does not interrupt the running run,
// which is judged by the policy it started with; the next run is judged by the new one, and
// the TTFT histogram's buckets hold the new threshold.
func TestReloadSLOThresholdDuringRun(t *testing.T) {
	g := startGate(t, startSim(t, nil))
	defer g.open() // before the daemon's shutdown
	dir := t.TempDir()
	d, path, runs := startDaemon(t, gatedConfig(dir, g.url, "60000", "continuous: true", "", ""))
	g.waitHeld(t, 2)
	l, oldDigest := loopOf(d, "p"), d.Config().Probes[0].SLO.Policy.Digest()
	rewrite(t, d, path, gatedConfig(dir, g.url, "59000", "continuous: true", "", ""))
	newDigest := d.Config().Probes[0].SLO.Policy.Digest()
	if loopOf(d, "p") != l {
		t.Fatal("a new SLO threshold restarted probe p")
	}
	g.open()
	r1 := nextRun(t, runs, "p", 120*time.Second)
	if r1.Outcome != artifact.RunCompleted || r1.Report == nil || r1.Report.SLO == nil || r1.Report.SLO.Digest != oldDigest {
		t.Fatalf("the running run: %s, judged by %+v, want completed under the policy it started with", r1.Outcome, r1.Report.SLO)
	}
	r2 := nextRun(t, runs, "p", 120*time.Second)
	if r2.Outcome != artifact.RunCompleted || r2.Report == nil || r2.Report.SLO == nil || r2.Report.SLO.Digest != newDigest {
		t.Fatalf("the next run: %s, judged by %+v, want the new policy", r2.Outcome, r2.Report.SLO)
	}
	waitFor(t, "two runs counted", 10*time.Second, func() bool {
		return served(t, d, "inferprobe_probe_runs_total", map[string]string{"probe": "p", "outcome": "completed"}) >= 2
	})
	if got := served(t, d, "inferprobe_ttft_seconds_bucket", map[string]string{"probe": "p", "le": "59"}); got == 0 {
		t.Fatal("no TTFT bucket at the new threshold (59 s) holds the next run's requests")
	}
}

// TestReloadRemovesRunningProbe: a reload that removes a probe stops its running run
// gracefully; the interrupted run is counted once, with its outcome and judged requests, and
// stays counted on /metrics while the probe's gauges go.
func TestReloadRemovesRunningProbe(t *testing.T) {
	g := startGate(t, startSim(t, nil))
	defer g.open() // before the daemon's shutdown
	dir := t.TempDir()
	d, path, runs := startDaemon(t, gatedConfig(dir, g.url, "60000", "every: 1h", "", qProbe))
	g.waitHeld(t, 3) // p's 2 and q's 1
	rewrite(t, d, path, strings.Replace(gatedConfig(dir, g.url, "60000", "every: 1h", "", qProbe), "  - name: p\n", "  - name: p_gone\n", 1))
	g.open()
	r := nextRun(t, runs, "p", 120*time.Second)
	if r.Outcome != artifact.RunInterrupted {
		t.Fatalf("the removed probe's run is %s, want interrupted", r.Outcome)
	}
	a, _ := readArtifact(t, r.Path)
	n := len(measured(a))
	if n != 2 {
		t.Fatalf("the interrupted run measured %d requests, want the 2 in flight", n)
	}
	checkCounted(t, d, map[string]float64{artifact.RunInterrupted: 1}, n)
	if v, ok := metric(t, d, "inferprobe_probe_running", map[string]string{"probe": "p"}); ok {
		t.Fatalf("the removed probe still has inferprobe_probe_running %v", v)
	}
}

// TestReloadsAroundOneRun: reloads before, during and after one run — unrelated changes, a
// threshold change and back, a failed reload — leave it counted exactly once.
func TestReloadsAroundOneRun(t *testing.T) {
	g := startGate(t, startSim(t, nil))
	defer g.open() // before the daemon's shutdown
	dir := t.TempDir()
	base := gatedConfig(dir, g.url, "60000", "every: 1h", "", "")
	d, path, runs := startDaemon(t, base)
	rewrite(t, d, path, base+qProbe)
	g.waitHeld(t, 3)
	rewrite(t, d, path, gatedConfig(dir, g.url, "30000", "every: 1h", strictSLO, otherProbe))
	if err := os.WriteFile(path, []byte("probes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err == nil {
		t.Fatal("a broken file reloaded")
	}
	rewrite(t, d, path, base)
	g.open()
	r := nextRun(t, runs, "p", 120*time.Second)
	if r.Outcome != artifact.RunCompleted {
		t.Fatalf("p's run is %s, want completed", r.Outcome)
	}
	checkCounted(t, d, map[string]float64{artifact.RunCompleted: 1}, 4)
	rewrite(t, d, path, base+qProbe)
	rewrite(t, d, path, gatedConfig(dir, g.url, "45000", "every: 1h", "", ""))
	checkCounted(t, d, map[string]float64{artifact.RunCompleted: 1}, 4)
}

// TestReloadScheduleDuringRun: a new interval does not interrupt the running run; the next
// start follows the new schedule from the running run's start (on the daemon's clock).
func TestReloadScheduleDuringRun(t *testing.T) {
	g := startGate(t, startSim(t, nil))
	defer g.open()
	dir := t.TempDir()
	fc := clockwork.NewFakeClock()
	d, path, runs := startDaemonWith(t, gatedConfig(dir, g.url, "60000", "every: 1h", "", ""), Options{Clock: fc})
	g.waitHeld(t, 2)
	l := loopOf(d, "p")
	rewrite(t, d, path, gatedConfig(dir, g.url, "60000", "every: 1m", "", ""))
	if loopOf(d, "p") != l {
		t.Fatal("a new interval restarted probe p")
	}
	if v, _ := metric(t, d, "inferprobe_probe_interval_seconds", map[string]string{"probe": "p"}); v != 60 {
		t.Fatalf("inferprobe_probe_interval_seconds %v, want the new 60", v)
	}
	g.open()
	if r := nextRun(t, runs, "p", 120*time.Second); r.Outcome != artifact.RunCompleted {
		t.Fatalf("the running run is %s, want completed", r.Outcome)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the loop does not wait for its next start")
	}
	// Advance expires a due timer before it returns: had the run started at 59 s, the loop
	// would wait again only after it, and its artifact would be there.
	fc.Advance(59 * time.Second)
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the loop does not wait for its next start")
	}
	if n := len(artifactsOf(t, dir, "p")); n != 1 {
		t.Fatalf("%d artifacts 59 s after the first start, want 1: a run started before the new interval had passed", n)
	}
	fc.Advance(time.Second)
	if r := nextRun(t, runs, "p", 120*time.Second); r.Outcome != artifact.RunCompleted {
		t.Fatalf("the next run is %s", r.Outcome)
	}
	checkCounted(t, d, map[string]float64{artifact.RunCompleted: 2}, 8)
}
