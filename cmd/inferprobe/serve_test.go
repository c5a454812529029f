package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

func serveConfig(metricsAddr, dir, simURL, probeExtra string) string {
	return fmt.Sprintf(`listen: %s
receiver:
  http_listen: ""
  grpc_listen: ""
artifacts:
  dir: %s
slos:
  - name: chat
    criteria: ["ttft:500"]
targets:
  - name: sim
    base_url: %s/v1
    model: %s
probes:
  - name: p1
    target: sim
    slo: chat
    every: 1h
    workload:
      concurrency: [2]
      input-tokens: [32]
      output-tokens: [8]
%s`, metricsAddr, dir, simURL, sim.DefaultConfig().Model, probeExtra)
}

func getMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeSignals runs `inferprobe serve` as a process: SIGHUP with a broken file keeps the
// running configuration (reload gauge 0), SIGHUP with a good one applies it (gauge 1), and
// SIGTERM in the middle of a probe run drains it — its in-flight requests finish, none is
// cancelled — closes the artifact as interrupted and exits 0.
func TestServeSignals(t *testing.T) {
	srv := startSim(t, func(c *sim.Config) {
		c.Faults.SlowHeaders = 1
		c.Faults.SlowHeadersDuration = 400 * time.Millisecond
	})
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "inferprobe.yaml")
	good := serveConfig(addr, dir, srv.URL(), "      requests: 1000\n      drain-timeout: 5\n")
	if err := os.WriteFile(cfgPath, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := cliChild(t, "serve", "--config", cfgPath)
	waitFor(t, "the first requests", 30*time.Second, func() bool {
		return strings.Contains(getMetrics(t, addr), `inferprobe_requests_total{case="c2_in32_out8",model="inferprobe-sim",probe="p1",status="ok",target="sim"} 2`) ||
			strings.Contains(getMetrics(t, addr), `status="ok",target="sim"} 3`)
	})

	if err := os.WriteFile(cfgPath, []byte("targets: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the failed reload to show", 10*time.Second, func() bool {
		return strings.Contains(getMetrics(t, addr), "inferprobe_config_last_reload_successful 0")
	})
	if !strings.Contains(getMetrics(t, addr), `inferprobe_probe_running{model="inferprobe-sim",probe="p1",target="sim"} 1`) {
		t.Fatal("a failed reload stopped the running probe")
	}
	if err := os.WriteFile(cfgPath, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the good reload to show", 10*time.Second, func() bool {
		return strings.Contains(getMetrics(t, addr), "inferprobe_config_last_reload_successful 1")
	})

	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "p1", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("%d artifacts, want 1 (an unchanged probe survives a reload)", len(files))
	}
	a, err := artifact.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if st := a.FinalSession(); st == nil || st.Status != artifact.StatusInterrupted {
		t.Fatalf("final session %+v, want interrupted", st)
	}
	if len(a.Requests) < 2 {
		t.Fatalf("%d requests", len(a.Requests))
	}
	for _, r := range a.Requests {
		if r.Status != artifact.RequestOK {
			t.Fatalf("request %s is %s: SIGTERM drains in-flight requests", r.RequestID, r.Status)
		}
	}
}

// TestServeConfigErrors: an unusable configuration is exit 2 with the key named, before
// anything is sent; --check validates without running.
func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	base := serveConfig("127.0.0.1:0", dir, "http://127.0.0.1:9", "")
	cases := []struct {
		name, text, want string
	}{
		{"unknown key", base + "bogus: 1\n", `config: bogus: unknown key "bogus" (line`},
		{"wrong type", strings.Replace(base, "every: 1h", "every: 1h\n    continuous: [1]", 1), "probes[0].continuous: want true or false, not a list"},
		{"bad rate", strings.Replace(base, "concurrency: [2]", "arrival: poisson\n      rate: [-1]", 1), "probes[0].workload"},
		{"reserved flag", strings.Replace(base, "concurrency: [2]", "model: other", 1), "probes[0].workload.model: is set by the target's model"},
		{"missing target", strings.Replace(base, "target: sim", "target: nope", 1), `probes[0].target: no target is named "nope"`},
		{"no schedule", strings.Replace(base, "every: 1h", "", 1), "probes[0]: a schedule is required"},
		{"bare number", strings.Replace(base, "every: 1h", "every: 60", 1), "want a duration with a unit"},
		{"bad slo", strings.Replace(base, `["ttft:500"]`, `["ttft:abc"]`, 1), "slos[0].criteria"},
		{"api key env", strings.Replace(base, "model: inferprobe-sim", "model: inferprobe-sim\n    api_key_env: INFERPROBE_TEST_UNSET_KEY", 1), "targets[0].api_key_env: $INFERPROBE_TEST_UNSET_KEY is not set"},
		{"listen", strings.Replace(base, "listen: 127.0.0.1:0", "listen: nowhere", 1), "listen: want HOST:PORT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, code := runCapture(t, "serve", "--config", p)
			if code != exitUsage || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, output %q; want exit 2 naming %q", code, out, c.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "ok.yaml")
	if err := os.WriteFile(p, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runCapture(t, "serve", "--config", p, "--check"); code != 0 || !strings.Contains(out, "1 probes: valid") {
		t.Fatalf("--check: exit %d, %q", code, out)
	}
	if _, code := runCapture(t, "serve"); code != exitUsage {
		t.Fatalf("no --config: exit %d", code)
	}
}

// runCapture runs the CLI as a child process and returns its stdout+stderr and exit code.
func runCapture(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// Profiling into an existing artifact replaces it, and says so.
func TestProfileWarnsWhenReplacingOutput(t *testing.T) {
	srv := startSim(t, nil)
	out := filepath.Join(t.TempDir(), "a.jsonl")
	args := []string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--requests", "1",
		"--input-tokens", "16", "--output-tokens", "4", "--output", out, "-q"}
	if text, code := runCapture(t, args...); code != 0 || strings.Contains(text, "exists; it is replaced") {
		t.Fatalf("first run: exit %d\n%s", code, text)
	}
	if text, code := runCapture(t, args...); code != 0 || !strings.Contains(text, "Warning: --output "+out+" exists; it is replaced") {
		t.Fatalf("second run: exit %d\n%s", code, text)
	}
}
