package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/sim"
)

var (
	tokOnce sync.Once
	tok     prompt.Tokenizer
	tokErr  error
)

func testTokenizer() (prompt.Tokenizer, error) {
	tokOnce.Do(func() { tok, tokErr = prompt.TiktokenCounter("cl100k_base") })
	return tok, tokErr
}

// init lays the tests' probe workloads over a smaller base than profile's defaults: short
// prompts (32 tokens), 8 output tokens that the sim produces exactly (ignore_eos) and a 10 s
// timeout. Like profile's defaults it gives no seed: each run draws its own.
func init() {
	baseWorkload = func() loadgen.Workload {
		timeout := 10.0
		return loadgen.Workload{Timeout: &timeout, InputTokens: []int{32}, OutputTokens: []int{8},
			ExtraBody: `{"ignore_eos": true}`}
	}
}

// quietLogger discards the daemon's log unless DAEMON_TEST_LOG is set.
func quietLogger() *slog.Logger {
	if os.Getenv("DAEMON_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func freeAddr(t *testing.T) string { return testkit.FreeAddr(t) }

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func startSim(t *testing.T, mod func(*sim.Config)) *sim.Server { return testkit.StartSim(t, mod) }

// startDaemon loads the configuration text (written to a file, so that Reload works),
// starts a daemon on it and returns it with the file's path and a channel of its finished
// runs. Cleanup shuts it down.
func startDaemon(t *testing.T, text string) (*Daemon, string, <-chan RunResult) {
	t.Helper()
	return startDaemonWith(t, text, Options{})
}

// startDaemonWith is startDaemon with opts (a logger, a clock); its Version, OnRunEnd and,
// when opts has none, Logger are the tests'.
func startDaemonWith(t *testing.T, text string, opts Options) (*Daemon, string, <-chan RunResult) {
	t.Helper()
	path := writeFile(t, t.TempDir(), "inferprobe.yaml", text)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	runs := make(chan RunResult, 64)
	opts.Version = "test"
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	opts.OnRunEnd = func(r RunResult) {
		select {
		case runs <- r:
		default:
		}
	}
	d := New(cfg, opts)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d, path, runs
}

// nextRun waits for a finished run (of probe, when not "").
func nextRun(t *testing.T, runs <-chan RunResult, probe string, timeout time.Duration) RunResult {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case r := <-runs:
			if probe == "" || r.Probe == probe {
				return r
			}
		case <-deadline:
			t.Fatalf("no run of probe %q finished within %v", probe, timeout)
		}
	}
}

// logBuffer is a goroutine-safe log destination.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bufferLogger logs everything (debug up) to a new buffer, and to stderr with DAEMON_TEST_LOG.
func bufferLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	var w io.Writer = b
	if os.Getenv("DAEMON_TEST_LOG") != "" {
		w = io.MultiWriter(b, os.Stderr)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	testkit.WaitFor(t, what, timeout, ok)
}

// metric returns the value of the series name{labels} (a subset match: the first series
// whose labels include every given pair) in the daemon's current exporter, and whether
// it exists. Counters, gauges and untyped values; histograms return their sample count.
func metric(t *testing.T, d *Daemon, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := d.Exporter().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return metricValue(m), true
		}
	}
	return 0, false
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sumMetric sums every series of name whose labels include labels.
func sumMetric(t *testing.T, d *Daemon, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := d.Exporter().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			total += metricValue(m)
		}
	}
	return total
}

func httpGet(t *testing.T, url, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
