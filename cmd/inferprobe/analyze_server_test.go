package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// serverSamples polls the server RSS every 100 ms over [from, from+3 s] on host h, boot b.
func serverSamples(t *testing.T, run string, from int64) string {
	t.Helper()
	var lines []string
	for i := int64(0); i <= 30; i++ {
		lines = append(lines, mustLine(t, artifact.TelemetrySample{
			Scope: artifact.ScopeServerProcess, ClockDomain: "h/b/unix_epoch_ns", CounterOwner: artifact.OwnerOperatingSystemProcess,
			RunID:        run,
			Identity:     artifact.TelemetryIdentity{Host: "h", PID: 7, ProcessStartNS: 1, BootID: artifact.Ptr("b")},
			ObservedAtNS: from + i*100_000_000, Metric: artifact.MetricProcessRSSBytes, ValueBytes: artifact.Ptr(5000 + i),
			State: artifact.SampleValid, Source: "psutil", IntervalMS: 100, Provenance: artifact.ProvenanceObserved,
		}))
	}
	return joinLines(lines)
}

func TestAnalyzeServerTelemetry(t *testing.T) {
	good, _ := sloArtifact(t)
	// The measured window is [t0, t0+2 s]; the collector polls from t0−0.5 s to t0+2.5 s.
	header := mustLine(t, artifact.NewArtifactHeader("run-1", "s1", "", t0, artifact.Host{Name: "h", BootID: artifact.Ptr("b")}, 1))
	path := writeFile(t, "client.jsonl", joinLines(append([]string{header}, good...)))
	telemetry := writeFile(t, "server.jsonl", serverSamples(t, "run-1", t0-500_000_000))
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{"missing file", []string{"--server-telemetry", filepath.Join(dir, "none.jsonl")}, exitBadInput, "", "no such file"},
		{"invalid file", []string{"--server-telemetry", writeFile(t, "bad.jsonl", "{oops\n")}, exitBadInput, "", "invalid server telemetry"},
		{"float sample", []string{"--server-telemetry", writeFile(t, "f.jsonl", strings.Replace(serverSamples(t, "run-1", t0), `"interval_ms":100`, `"interval_ms":100.0`, 1))}, exitBadInput, "", "interval_ms"},
		{"negative uncertainty", []string{"--server-telemetry", telemetry, "--clock-uncertainty-ns", "-1"}, exitUsage, "", "--clock-uncertainty-ns"},
		{"float offset", []string{"--server-telemetry", telemetry, "--clock-offset-ns", "1.5"}, exitUsage, "", "clock-offset-ns"},
		{"joined", []string{"--server-telemetry", telemetry, "--direct-server"}, exitOK, "server coverage: observed", ""},
		{"same file twice", []string{"--server-telemetry", telemetry, "--server-telemetry", telemetry, "--direct-server", "--format", "json"}, exitOK, `"valid_samples": 21`, ""},
		{"no direct server", []string{"--server-telemetry", telemetry}, exitOK, "Server telemetry: unjoined (direct_server_not_declared)", ""},
		{"offset on shared clock", []string{"--server-telemetry", telemetry, "--direct-server", "--clock-offset-ns", "5", "--clock-uncertainty-ns", "1"}, exitOK, "clock_offset_on_shared_clock", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"analyze", path}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.err) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
		})
	}
}
