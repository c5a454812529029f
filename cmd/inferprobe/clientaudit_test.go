package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/calibrate"
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
	// Where /proc/stat exists the host's CPUs and busy time are recorded: at least the CPUs
	// this process may use, and at least its own CPU time (to a clock tick per counter).
	if busy, ok := health["host_cpu_busy_seconds"].(float64); runtime.GOOS == "linux" &&
		(!ok || health["host_cpus"].(float64) < float64(runtime.NumCPU()) ||
			busy < health["cpu_user_seconds"].(float64)+health["cpu_system_seconds"].(float64)-0.06) {
		t.Fatalf("host figures in %v", health)
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
		{[]string{"--max-in-flight", "0"}, "--max-in-flight must be within 1..50000, not 0"},
		{[]string{"--max-in-flight", "50001"}, "--max-in-flight must be within 1..50000, not 50001"},
		{[]string{"--refine", "-1"}, "--refine must be in [0, 20]"},
		{[]string{"--output", "/etc/passwd"}, "--output /etc/passwd"},
		{[]string{"extra"}, "unknown command"},
		{[]string{"--start-rate", "1", "--step-seconds", "0.1", "--max-rate", "2"}, "schedules 0.1 arrivals, under the 10 a step needs"},
		{[]string{"--output-tokens", "40", "--gap-ms", "1000"}, "40 output tokens 1s apart keep a stream open 40 s, over half the 30s request timeout"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"calibrate"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, stdout, stderr)
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

// A step's verdict names what made it unclean; the envelope's advice follows the start
// step's cause; counts take their plural.
func TestCalibrateVerdicts(t *testing.T) {
	limited := analyze.ClientAudit{ClientLimited: true, Reasons: []string{"dispatch lag p99 4.44 ms over the 1 ms bound"}}
	for _, c := range []struct {
		step calibrate.Step
		want string
	}{
		{calibrate.Step{Clean: true}, "clean"},
		{calibrate.Step{Failed: 1, TimedOut: 1}, "failed (1 request failed, 1 of them timed out (the 30s request timeout))"},
		{calibrate.Step{Failed: 3}, "failed (3 requests failed)"},
		{calibrate.Step{Audit: limited}, "client-limited (dispatch lag p99 4.44 ms over the 1 ms bound)"},
		{calibrate.Step{Audit: limited, Failed: 2}, "client-limited (dispatch lag p99 4.44 ms over the 1 ms bound; 2 requests failed)"},
		{calibrate.Step{Audit: analyze.ClientAudit{ClientLimited: true, Reasons: []string{"dispatch lag p99 4.44 ms over the 1 ms bound"},
			HostContended: true, OtherCPUUtilization: ptrTo(0.72)}},
			"client-limited (dispatch lag p99 4.44 ms over the 1 ms bound; its host contended: other processes took 72% of it)"},
		// calibrate has no --overflow: the held reason keeps only its own advice.
		{calibrate.Step{Audit: analyze.ClientAuditOf([]analyze.Request{heldRequest()}, nil)},
			"client-limited (1 arrival waited for an in-flight slot (every --max-in-flight slot busy: raise it))"},
	} {
		if got := verdict(c.step); got != c.want {
			t.Errorf("%+v: %q, want %q", c.step, got, c.want)
		}
	}
	for _, c := range []struct {
		step calibrate.Step
		want string
	}{
		{calibrate.Step{Failed: 1, TimedOut: 1}, "its requests timed out (the 30s request timeout): lower --output-tokens or --gap-ms"},
		{calibrate.Step{Audit: analyze.ClientAudit{ClientLimited: true, HeldForSlot: 9}}, "its arrivals waited for an in-flight slot: raise --max-in-flight"},
		{calibrate.Step{Failed: 2}, "its requests failed (see the step's artifact with --output)"},
		{calibrate.Step{Audit: analyze.ClientAudit{ClientLimited: true, HostContended: true, OtherCPUUtilization: ptrTo(0.83)}},
			"other processes kept 83% of the host's CPUs busy: run it on a quieter host"},
		{calibrate.Step{Audit: limited}, "lower --start-rate"},
	} {
		var b strings.Builder
		err := envelope(&b, &calibrate.Result{Steps: []calibrate.Step{c.step}, CPUs: 2})
		want := "Envelope: not even the start rate was clean on this host (2 CPUs): " + c.want + "\n"
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitFindings || b.String() != want {
			t.Errorf("%+v: %v %q, want %q", c.step, err, b.String(), want)
		}
	}
	late := calibrate.Step{RatePerSecond: 100, Clean: true, Audit: analyze.ClientAudit{DispatchLagP99Ms: ptrTo(2.81), DispatchLagBoundMs: 1, DispatchLagOverBound: 1}}
	if got := stepLine(late); got != "     100 req/s: clean; dispatch lag p99 2.81 ms (1 over the 1 ms bound)" {
		t.Errorf("step line %q", got)
	}
	one, rate, failedAt := int64(1), 100.0, 200.0
	var b strings.Builder
	res := &calibrate.Result{Steps: []calibrate.Step{{RatePerSecond: 100, Clean: true}, {RatePerSecond: 200, Failed: 4}},
		CleanRate: &rate, CleanInFlight: &one, LimitedRate: &failedAt, CPUs: 2}
	if err := envelope(&b, res); err != nil || b.String() != "Envelope: 100 req/s with up to 1 stream in flight, cleanly, on this host (2 CPUs); requests failed at 200 req/s\n" {
		t.Fatalf("%v %q", err, b.String())
	}
	b.Reset()
	res.Steps[1] = calibrate.Step{RatePerSecond: 200, Audit: analyze.ClientAudit{ClientLimited: true, HostContended: true, OtherCPUUtilization: ptrTo(0.7)}}
	if err := envelope(&b, res); err != nil || b.String() != "Envelope: 100 req/s with up to 1 stream in flight, cleanly, on this host (2 CPUs); client-limited at 200 req/s (its host contended: other processes took the CPUs, so the envelope is this busy host's)\n" {
		t.Fatalf("contended: %v %q", err, b.String())
	}
}

func ptrTo[T any](v T) *T { return &v }

// heldRequest is a measured open-loop request that waited for an in-flight slot.
func heldRequest() analyze.Request {
	var r analyze.Request
	r.Status, r.ArrivalMode, r.HeldForSlot = analyze.StatusOK, analyze.ModeFixedRate, ptrTo(true)
	return r
}
