package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/scrape/proc"
	"github.com/inferprobe/inferprobe/sim"
)

// cliChild starts this test binary as `inferprobe ARGS...` in its own process.
func cliChild(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join(args, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	p, err := proc.Open(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v, err := p.RSSBytes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int64(v)
}

// waitForSampleAfter waits (up to 20 s) until the telemetry file at path holds a complete
// line with an observed_at_ns later than ns.
func waitForSampleAfter(t *testing.T, path string, ns int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(path)
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			for _, line := range bytes.Split(data[:i], []byte("\n")) {
				var s struct {
					ObservedAtNS int64 `json:"observed_at_ns"`
				}
				if json.Unmarshal(line, &s) == nil && s.ObservedAtNS > ns {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no sample observed after %d within 20 s", path, ns)
}

// TestCollectServerBesideProfile: the sim in its own process, collect-server --no-gpu on its
// pid, profile beside it, then analyze --server-telemetry --direct-server: every case is
// observed and the maximum RSS lies between the sim's RSS before and after the run.
func TestCollectServerBesideProfile(t *testing.T) {
	addr := freeAddr(t)
	simCmd := cliChild(t, "sim", "--listen", addr)
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			t.Fatal("the sim did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	dir := t.TempDir()
	tel := filepath.Join(dir, "server.jsonl")
	before := rssOf(t, simCmd.Process.Pid)
	coll := cliChild(t, "collect-server", "--run-id", "e2e-run", "--pid", strconv.Itoa(simCmd.Process.Pid), "--output", tel, "--no-gpu", "--interval", "0.5")
	waitForSampleAfter(t, tel, time.Now().UnixNano()) // the collector runs before profile starts
	out := filepath.Join(dir, "a.jsonl")
	if code := runQuiet("profile", "--base-url", base+"/v1", "--model", sim.DefaultConfig().Model, "--output", out, "--run-id", "e2e-run",
		"--concurrency", "4", "--requests", "48", "--input-tokens", "64,128", "--output-tokens", "16", "--system-sampler", "none"); code != 0 {
		t.Fatalf("profile exit %d", code)
	}
	after := rssOf(t, simCmd.Process.Pid)
	// A sample after the run's end, so every case window is covered to its end. The
	// interval (500 ms) is how late a sample may be after the window start, or how early
	// the last one before its end: shorter ones failed on a loaded CI host
	// (collector_started_after_window_start at 50 ms, collector_stopped_before_window_end at
	// 200 ms), so the cases run 48 requests (about 1.5 s each) to hold several samples.
	waitForSampleAfter(t, tel, time.Now().UnixNano()+int64(250*time.Millisecond))
	_ = coll.Process.Signal(syscall.SIGTERM)
	if err := coll.Wait(); err != nil {
		t.Fatalf("collect-server: %v", err)
	}
	rep := reportMap(t, out, "--server-telemetry", tel, "--direct-server")
	if s := dig(rep, "telemetry", "server_join", "status"); s != "joined" {
		t.Fatalf("server_join %v", dig(rep, "telemetry", "server_join"))
	}
	lo, hi := min(before, after), max(before, after)
	for id, c := range rep["cases"].(map[string]any) {
		if st := dig(c, "memory", "server_coverage", "status"); st != "observed" {
			t.Fatalf("case %s coverage %v", id, dig(c, "memory", "server_coverage"))
		}
		obs := dig(c, "memory", "server_observations", "process_rss_bytes")
		maxRSS, _ := dig(obs, "maximum_recorded_bytes").(float64)
		if maxRSS <= 0 {
			t.Fatalf("case %s observations %v", id, dig(c, "memory", "server_observations"))
		}
		// RSS moves while the sim runs: the case maximum lies within the run's range,
		// with a small allowance for pages the runtime returns and takes back.
		if int64(maxRSS) < lo*9/10 || int64(maxRSS) > hi*11/10 {
			t.Fatalf("case %s max RSS %v outside [%d, %d]", id, maxRSS, lo, hi)
		}
	}
}
