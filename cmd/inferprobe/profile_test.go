package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// TestMain lets a test re-run this binary as the inferprobe command (for signals and exit
// codes of a real process): INFERPROBE_TEST_ARGS holds the arguments, separated by the unit separator 0x1f.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("INFERPROBE_TEST_ARGS"); ok {
		os.Exit(execute(testArgs(strings.Split(args, "\x1f"))))
	}
	os.Exit(m.Run())
}

// testArgs is the command line a test runs: a profile command gets --allow-client-limited
// unless the test names that flag itself — a shared test host is often too busy for the
// 1 ms dispatch bound, and only the tests of the self-audit's exit are about it.
func testArgs(args []string) []string {
	if len(args) > 0 && args[0] == "profile" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--allow-client-limited") }) {
		return append(slices.Clone(args), "--allow-client-limited")
	}
	return args
}

func startSim(t *testing.T, mod func(*sim.Config)) *sim.Server { return testkit.StartSim(t, mod) }

// runQuiet runs the command in-process with stdout/stderr discarded by the test log.
func runQuiet(args ...string) int {
	args = testArgs(args)
	if os.Getenv("INFERPROBE_TEST_VERBOSE") != "" {
		return execute(args)
	}
	stdout, stderr := os.Stdout, os.Stderr
	devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	os.Stdout, os.Stderr = devnull, devnull
	defer func() { os.Stdout, os.Stderr = stdout, stderr; devnull.Close() }()
	return execute(args)
}

// rawLines is an artifact's lines, each a copy (lines up to 16 MiB).
func rawLines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readLines is an artifact's lines decoded as generic JSON objects (numbers as float64).
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, l := range rawLines(t, path) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %d does not parse: %v", i+1, err)
		}
		out = append(out, m)
	}
	return out
}

func TestProfileUsageErrorsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a.jsonl")
	bad := [][]string{
		{"--model", "m", "--output", out},                                                                // no endpoint
		{"--endpoint", "ftp://x/v1/chat/completions", "--model", "m", "--output", out},                   // scheme
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m"},                                          // no output
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--concurrency", "1,1"}, // same case id
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--arrival", "poisson"}, // no rate
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--arrival", "poisson", "--rate", "2", "--concurrency", "4", "--requests", "3"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--max-in-flight", "4"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--extra-body", `{"model":"x"}`},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--extra-body", `[1]`},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--arrival", "fixed-rate", "--rate", "1e9", "--duration", "0.01"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--timeout", "NaN"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--requests", "0"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--tokenizer", "none", "--strict-token-counts"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--rate", "2"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--bogus-flag"},
	}
	for _, args := range bad {
		if code := runQuiet(append([]string{"profile"}, args...)...); code != exitUsage {
			t.Errorf("profile %v: exit %d, want 2", args, code)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("profile %v wrote %s although the setting was unusable", args, out)
		}
	}
	trace := filepath.Join(dir, "trace.jsonl")
	os.WriteFile(trace, []byte("not json\n"), 0o644)
	for _, tr := range []string{trace, filepath.Join(dir, "missing.jsonl")} {
		code := runQuiet("profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--arrival", "replay", "--arrival-trace", tr)
		if code != exitBadInput {
			t.Errorf("unreadable trace %s: exit %d, want 5", tr, code)
		}
	}
}

func TestProfileExitCodesAndArtifactShape(t *testing.T) {
	srv := startSim(t, nil)
	out := filepath.Join(t.TempDir(), "sub", "ok.jsonl")
	t.Setenv("OPENAI_API_KEY", "sk-secret-never-recorded")
	code := runQuiet("profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "2", "--requests", "6", "--input-tokens", "32", "--output-tokens", "4", "--warmup-requests", "1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	raw, _ := os.ReadFile(out)
	if bytes.Contains(raw, []byte("sk-secret")) {
		t.Fatal("the API key was recorded")
	}
	lines := readLines(t, out)
	first, last := lines[0], lines[len(lines)-1]
	if first["event_type"] != "infer.session" || first["status"] != "running" {
		t.Fatalf("first line %v", first)
	}
	if last["event_type"] != "infer.session" || last["status"] != "completed" {
		t.Fatalf("last line %v", last)
	}
	a, err := artifact.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(a.Requests) != 7 || len(a.PhaseWindows) != 2 || a.Workload == nil || a.Header == nil || len(a.CacheStates) != 1 {
		t.Fatalf("requests %d windows %d", len(a.Requests), len(a.PhaseWindows))
	}
	if a.FinalSession().Summary.RequestsRecorded != 7 {
		t.Fatalf("summary %+v", a.FinalSession().Summary)
	}

	// No measured request succeeds: exit 3, artifact still complete.
	rej := startSim(t, func(c *sim.Config) { c.Faults.Reject503 = 1 })
	out3 := filepath.Join(t.TempDir(), "rej.jsonl")
	code = runQuiet("profile", "--endpoint", rej.URL()+"/v1/chat/completions", "--model", sim.DefaultConfig().Model,
		"--output", out3, "--requests", "3", "--input-tokens", "16", "--output-tokens", "4")
	if code != exitFindings {
		t.Fatalf("all rejected: exit %d, want 3", code)
	}
	lines = readLines(t, out3)
	if lines[len(lines)-1]["status"] != "completed" {
		t.Fatal("the artifact of a run with no success still ends with a completed session")
	}
}

func TestProfileSIGINT(t *testing.T) {
	srv := startSim(t, func(c *sim.Config) {
		c.Faults.SlowHeaders = 1
		c.Faults.SlowHeadersDuration = 3 * time.Second
	})
	out := filepath.Join(t.TempDir(), "int.jsonl")
	args := []string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--output", out,
		"--concurrency", "2", "--requests", "10", "--input-tokens", "16", "--output-tokens", "4"}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal once the run is under way: its first records (session, artifact, workload,
	// cache state) are on disk, so the handler is installed and the workers are sending.
	for i := 0; ; i++ {
		if b, err := os.ReadFile(out); err == nil && bytes.Count(b, []byte("\n")) >= 4 {
			break
		}
		if i > 200 {
			t.Fatal("the profile run did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v (stderr %s), want 130", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Interrupted") {
		t.Fatalf("stderr %q", stderr.String())
	}
	lines := readLines(t, out)
	last := lines[len(lines)-1]
	if last["event_type"] != "infer.session" || last["status"] != "interrupted" {
		t.Fatalf("last line %v", last)
	}
	cancelled := 0
	for _, l := range lines {
		if l["event_type"] == "infer.request" {
			if l["status"] != "cancelled" {
				t.Fatalf("request %v", l)
			}
			cancelled++
		}
	}
	if cancelled != 2 {
		t.Fatalf("%d cancelled requests, want the 2 in flight", cancelled)
	}
}

// TestDemoRuns runs `inferprobe demo --serve` as a process: both artifacts complete, the
// dashboards and rules are written, the last line names the Poisson run's index.html (which
// exists), and the live /metrics agree with the Poisson artifact (requests by status, joined
// spans, SLO outcomes) until SIGINT stops it with exit 0.
func TestDemoRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("demo takes ~15 s")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join([]string{"demo", "--dir", dir, "--quiet", "--serve", "--metrics-listen", addr}, "\x1f"))
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	page := filepath.Join(dir, "tables", "demo-poisson", "index.html")
	waitFor(t, "the demo to finish its runs", 90*time.Second, func() bool { return strings.HasSuffix(out.String(), "every plot of the last run\n") })
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); !strings.HasPrefix(lines[len(lines)-1], "Open "+page+" in a browser") {
		t.Errorf("the last line does not name the page to open: %q", lines[len(lines)-1])
	}
	if _, err := os.Stat(page); err != nil {
		t.Error(err)
	}
	for _, f := range []string{"demo-closed.jsonl", "demo-poisson.jsonl"} {
		a, err := artifact.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Validate(); err != nil || a.FinalSession().Status != "completed" {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"grafana/overview.json", "grafana/server-join.json", "grafana/gpu-memory.json", "rules/inferprobe-alerts.rules.yml"} {
		if _, err := os.Stat(filepath.Join(dir, "dashboards", f)); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(out.String(), "http://"+addr+"/metrics") {
		t.Fatalf("the demo does not say where /metrics is:\n%s", out.String())
	}
	rep, err := analyzeArtifactReportContext(context.Background(), filepath.Join(dir, "demo-poisson.jsonl"), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cases["poisson20_in256_out64"]
	if c == nil || c.SLO == nil {
		t.Fatalf("cases %v", rep.Cases)
	}
	metrics := getMetrics(t, addr)
	sel := `case="poisson20_in256_out64",model="inferprobe-sim",probe="demo-poisson"`
	for _, want := range []string{
		fmt.Sprintf(`inferprobe_requests_total{%s,status="ok",target="sim"} %d`, sel, c.Population.Successful),
		fmt.Sprintf(`inferprobe_server_queue_seconds_count{%s,target="sim"} %d`, sel, *c.Population.ServerAdmitted),
		fmt.Sprintf(`inferprobe_slo_requests_total{%s,outcome="met",probe="demo-poisson",slo="demo",target="sim"} %d`, `case="poisson20_in256_out64",model="inferprobe-sim"`, c.SLO.Met),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo --serve after SIGINT: %v\n%s", err, out.String())
	}
}

// An --output that cannot be opened names the operating system's reason, exit 2.
func TestProfileOutputUnopenable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{filepath.Join(blocker, "a.jsonl"), t.TempDir()} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join([]string{"profile", "--base-url", "http://127.0.0.1:1/v1",
			"--model", "m", "--requests", "1", "--output", out}, "\x1f"))
		text, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
			t.Fatalf("--output %s: %v, want exit 2\n%s", out, err, text)
		}
		if !strings.Contains(string(text), "Error: cannot open --output: ") || strings.Contains(string(text), "<nil>") ||
			!(strings.Contains(string(text), "not a directory") || strings.Contains(string(text), "is a directory")) {
			t.Errorf("--output %s:\n%s", out, text)
		}
	}
}
