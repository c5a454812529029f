package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/sim"
)

// A run whose arrivals waited for the one in-flight slot is client-limited: profile exits 4
// naming the case, the text report says why, and the artifact's phase window carries the
// client's health; --allow-client-limited exits 0 with a warning instead.
func TestProfileClientLimitedExit(t *testing.T) {
	srv := startSim(t, nil)
	dir := t.TempDir()
	args := func(out string, allow string) []string {
		return []string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--output", out,
			"--arrival", "fixed-rate", "--rate", "200", "--requests", "6", "--max-in-flight", "1", "--overflow", "wait",
			"--input-tokens", "16", "--output-tokens", "8", allow}
	}
	out := filepath.Join(dir, "limited.jsonl")
	code, stdout, stderr := runCLI(t, args(out, "--allow-client-limited=false")...)
	if code != exitClientLimited || !strings.Contains(stderr, "Client-limited: the load generator, not the server, shaped the numbers of fixed200_in16_out8") ||
		!strings.Contains(stdout, "CLIENT-LIMITED: ") || !strings.Contains(stdout, "arrivals waited for an in-flight slot (every --max-in-flight slot busy: raise it, or --overflow drop)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	health := phaseHealth(t, out)
	if health["cpus"].(float64) < 1 || health["receive_reads"].(float64) < 6 || health["cpu_user_seconds"] == nil {
		t.Fatalf("client_health %v", health)
	}
	code, _, stderr = runCLI(t, args(filepath.Join(dir, "allowed.jsonl"), "--allow-client-limited")...)
	if code != exitOK || !strings.Contains(stderr, "Warning: Client-limited:") || !strings.Contains(stderr, "exit 0 as --allow-client-limited asks") {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
}

// phaseHealth returns the client_health of the artifact's measured phase window.
func phaseHealth(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["event_type"] != "infer.phase_window" || rec["phase"] != "measured" {
			continue
		}
		if h, ok := rec["client_health"].(map[string]any); ok {
			return h
		}
	}
	t.Fatalf("no measured phase window with client_health in %s", path)
	return nil
}

func TestCalibrateFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--start-rate", "0"}, "--start-rate must be"},
		{[]string{"--start-rate", "100", "--max-rate", "50"}, "--max-rate 50 is below --start-rate 100"},
		{[]string{"--step-seconds", "0.01"}, "--step-seconds must be"},
		{[]string{"--gap-ms", "0.5"}, "--gap-ms must be"},
		{[]string{"--output-tokens", "0"}, "--output-tokens must be"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight must be at least 1"},
		{[]string{"--refine", "-1"}, "--refine must be in [0, 20]"},
		{[]string{"--output", "/etc/passwd"}, "--output /etc/passwd"},
		{[]string{"extra"}, "unknown command"},
	} {
		code, _, stderr := runCLI(t, append([]string{"calibrate"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
	}
}

// One short step: a line for it and the envelope (clean or not, as this host allows).
func TestCalibrateRuns(t *testing.T) {
	code, stdout, stderr := runCLI(t, "calibrate", "--start-rate", "40", "--max-rate", "40", "--step-seconds", "0.3", "--refine", "0")
	if !strings.Contains(stdout, "      40 req/s: ") || !strings.Contains(stdout, "Envelope: ") ||
		(code == exitOK) != strings.Contains(stdout, "Envelope: 40 req/s") || (code != exitOK && code != exitFindings) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
