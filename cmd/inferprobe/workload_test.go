package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/daemon"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
)

const testBaseURL = "http://127.0.0.1:8000/v1"

// profileWorkload parses profile's flags (after --base-url and --model) into the run's
// workload and tokenizer, as `inferprobe profile` does before it sends anything.
func profileWorkload(t *testing.T, args ...string) (*loadgen.Config, prompt.Tokenizer, string, error) {
	t.Helper()
	var pf profileFlags
	cmd := &cobra.Command{Use: "profile"}
	pf.register(cmd)
	if err := cmd.Flags().Parse(append([]string{"--base-url=" + testBaseURL, "--model=m"}, args...)); err != nil {
		t.Fatalf("flags %q: %v", args, err)
	}
	return pf.config(cmd)
}

// daemonWorkload parses a probe whose workload mapping is workload (YAML, indented by six
// spaces) with the daemon's loader.
func daemonWorkload(t *testing.T, workload string) (*daemon.Probe, error) {
	t.Helper()
	text := fmt.Sprintf(`targets:
  - name: t
    base_url: %s
    model: m
probes:
  - name: p
    target: t
    every: 1m
    workload:
%s`, testBaseURL, workload)
	c, err := daemon.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	return c.Probes[0], nil
}

// TestProfileFlagErrors pins the messages and exit codes of profile's workload flags.
func TestProfileFlagErrors(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(trace, []byte(`{"offset_ms": 0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--endpoint=http://h/v1/chat/completions"}, exitUsage, "--endpoint and --base-url are mutually exclusive"},
		{[]string{"--stream", "--no-stream"}, exitUsage, "--stream and --no-stream are mutually exclusive"},
		{[]string{"--stream-usage=false", "--no-stream-usage"}, exitUsage, "--stream-usage and --no-stream-usage are mutually exclusive"},
		{[]string{"--requests=2", "--duration=1"}, exitUsage, "--requests and --duration are mutually exclusive"},
		{[]string{"--timeout=NaN"}, exitUsage, "--timeout must be a number, not NaN"},
		{[]string{"--duration=1e300"}, exitUsage, "--duration must be at most 604800 seconds (7 days), not 1e+300"},
		{[]string{"--duration=1e-9"}, exitUsage, "--duration must be at least 0.001 seconds (1 ms), not 1e-09"},
		{[]string{"--burst-interval=1e10"}, exitUsage, "--burst-interval must be at most 604800 seconds (7 days), not 10000000000"},
		{[]string{"--drain-timeout=0"}, exitUsage, "--drain-timeout must be > 0 seconds, not 0"},
		{[]string{"--duration=0"}, exitUsage, "--duration must be at least 0.001 seconds (1 ms), not 0"},
		{[]string{"--requests=0"}, exitUsage, "--requests must be ≥ 1"},
		{[]string{"--max-in-flight=0"}, exitUsage, "--max-in-flight must be ≥ 1"},
		{[]string{"--prefix-groups=0"}, exitUsage, "--prefix-groups must be ≥ 1"},
		{[]string{"--extra-body={"}, exitUsage, "--extra-body is not valid JSON: unexpected EOF"},
		{[]string{"--extra-body=[1]"}, exitUsage, "--extra-body must be a JSON object"},
		{[]string{"--extra-body={} {}"}, exitUsage, "--extra-body must be one JSON object"},
		{[]string{"--arrival="}, exitUsage, `--arrival must be closed, fixed-rate, poisson, burst or replay, not ""`},
		{[]string{"--arrival=bogus", "--timeout=0"}, exitUsage, "--timeout must be > 0 seconds, not 0"}, // durations are checked as written, first
		{[]string{"--arrival=bogus"}, exitUsage, `--arrival must be closed, fixed-rate, poisson, burst or replay, not "bogus"`},
		{[]string{"--max-in-flight=4"}, exitUsage, "--max-in-flight and --overflow apply to open-loop arrivals only"},
		{[]string{"--overflow=drop"}, exitUsage, "--max-in-flight and --overflow apply to open-loop arrivals only"},
		{[]string{"--arrival-trace-case=x"}, exitUsage, "--arrival-trace-case needs --arrival-trace"},
		{[]string{"--arrival-trace=" + trace}, exitUsage, "--arrival-trace applies to --arrival replay only"},
		{[]string{"--arrival=replay", "--arrival-trace=" + trace, "--arrival-trace-case=c1"}, exitUsage, "--arrival-trace-case applies to an artifact trace, and " + trace + " is an offset_ms trace"},
		{[]string{"--arrival=replay", "--arrival-trace=" + trace + ".missing"}, exitBadInput, "--arrival-trace: open " + trace + ".missing: no such file or directory"},
		{[]string{"--tokenizer=x"}, exitUsage, `--tokenizer must be auto, tiktoken or none, not "x"`},
		{[]string{"--tokenizer="}, exitUsage, `--tokenizer must be auto, tiktoken or none, not ""`},
		{[]string{"--tokenizer=none", "--strict-token-counts"}, exitUsage, "--strict-token-counts needs a tokenizer (--tokenizer auto or tiktoken)"},
		{[]string{"--tiktoken-encoding=nope"}, exitUsage, `--tiktoken-encoding: tiktoken encoding "nope": `},
		{[]string{"--rate=2"}, exitUsage, "--rate applies to --arrival fixed-rate or poisson only"},
	}
	for _, c := range cases {
		_, _, _, err := profileWorkload(t, c.args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != c.code || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("profile %q: %v, want exit %d with %q", c.args, err, c.code, c.want)
		}
	}
	// --requests 1 is the old default and may come with --duration.
	cfg, _, _, err := profileWorkload(t, "--requests=1", "--duration=2")
	if err != nil || cfg.Requests != 0 || cfg.Duration.Seconds() != 2 {
		t.Fatalf("--requests 1 --duration 2: %+v %v", cfg, err)
	}
}

// TestWorkloadFlagsAndYAMLAgree: a probe's workload mapping and the equivalent profile flags
// give the same loadgen.Config (the same traffic digest), in every value form the mapping
// takes — scalars, lists, comma-separated strings for list flags, numbers as strings, seconds
// as numbers, extra-body as a mapping or a JSON string, stream: false or no-stream: true.
func TestWorkloadFlagsAndYAMLAgree(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(trace, []byte(`{"offset_ms": 0}`+"\n"+`{"offset_ms": 250}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		yaml  string
		flags []string
	}{
		{"{}", nil},
		{"{concurrency: [1, 2], requests: 4, warmup-requests: 1, seed: 7}", []string{"--concurrency=1,2", "--requests=4", "--warmup-requests=1", "--seed=7"}},
		{"{arrival: poisson, rate: [2, 4.5], duration: 60}", []string{"--arrival=poisson", "--rate=2,4.5", "--duration=60"}},
		{"{arrival: fixed-rate, rate: 2, requests: '6'}", []string{"--arrival=fixed-rate", "--rate=2", "--requests=6"}},
		{"{input-tokens: '512,2048', output-tokens: [16, 32]}", []string{"--input-tokens=512,2048", "--output-tokens=16,32"}},
		{"{input-tokens: [512, '1024,2048'], output-tokens: 16}", []string{"--input-tokens=512,1024,2048", "--output-tokens=16"}},
		{"{stream: false}", []string{"--stream=false"}},
		{"{no-stream: true}", []string{"--no-stream"}},
		{"{no-stream: 1, stream-usage: 'false'}", []string{"--no-stream", "--stream-usage=false"}},
		{"{no-stream-usage: true}", []string{"--no-stream-usage"}},
		{"{extra-body: {ignore_eos: true, top_k: 5, stop: [a, b]}}", []string{`--extra-body={"ignore_eos":true,"top_k":5,"stop":["a","b"]}`}},
		{`{extra-body: '{"ignore_eos": true, "temperature": 0.7}'}`, []string{`--extra-body={"ignore_eos": true, "temperature": 0.7}`}},
		{"{seed: -9223372036854775808, timeout: 2.5, drain-timeout: 1}", []string{"--seed=-9223372036854775808", "--timeout=2.5", "--drain-timeout=1"}},
		{"{requests: 0x10, max-tokens-field: max_completion_tokens}", []string{"--requests=16", "--max-tokens-field=max_completion_tokens"}},
		{"{requests: 4.0}", []string{"--requests=4"}},
		{"{arrival: burst, burst-size: 3, burst-interval: 0.5, requests: 6}", []string{"--arrival=burst", "--burst-size=3", "--burst-interval=0.5", "--requests=6"}},
		{"{arrival: poisson, rate: [1], requests: 3, max-in-flight: 4, overflow: drop}", []string{"--arrival=poisson", "--rate=1", "--requests=3", "--max-in-flight=4", "--overflow=drop"}},
		{"{prompt-mode: shared-prefix, shared-prefix-ratio: 0.5, prefix-groups: 2}", []string{"--prompt-mode=shared-prefix", "--shared-prefix-ratio=0.5", "--prefix-groups=2"}},
		{"{prompt-mode: unique, cache-state: cold, cache-reset-url: 'http://127.0.0.1:8000/reset_prefix_cache', cache-reset-timeout: 0}",
			[]string{"--prompt-mode=unique", "--cache-state=cold", "--cache-reset-url=http://127.0.0.1:8000/reset_prefix_cache", "--cache-reset-timeout=0"}},
		{"{arrival: replay, arrival-trace: '" + trace + "'}", []string{"--arrival=replay", "--arrival-trace=" + trace}},
		{"{arrival: [poisson], rate: [3], duration: 5}", []string{"--arrival=poisson", "--rate=3", "--duration=5"}},
		{"{tokenizer: none}", []string{"--tokenizer=none"}},
		{"{tokenizer: tiktoken, tiktoken-encoding: o200k_base, strict-token-counts: true}", []string{"--tokenizer=tiktoken", "--tiktoken-encoding=o200k_base", "--strict-token-counts"}},
	}
	for _, c := range cases {
		p, err := daemonWorkload(t, "      "+c.yaml+"\n")
		if err != nil {
			t.Errorf("workload %s: %v", c.yaml, err)
			continue
		}
		cfg, tok, tokName, err := profileWorkload(t, c.flags...)
		if err != nil {
			t.Errorf("profile %q: %v", c.flags, err)
			continue
		}
		y := *p.Workload
		y.RunID, cfg.RunID = "", ""
		if !reflect.DeepEqual(&y, cfg) {
			t.Errorf("workload %s\n yaml  %+v\n flags %+v", c.yaml, &y, cfg)
		}
		if p.TokName != tokName || p.Tokenizer.Name() != tok.Name() || p.Tokenizer.Exact() != tok.Exact() {
			t.Errorf("workload %s: tokenizer %s %s, flags %s %s", c.yaml, p.TokName, p.Tokenizer.Name(), tokName, tok.Name())
		}
		wy, err := y.WorkloadRecord("s", p.Tokenizer)
		if err != nil {
			t.Fatal(err)
		}
		wf, err := cfg.WorkloadRecord("s", tok)
		if err != nil {
			t.Fatal(err)
		}
		dy, erry := wy.TrafficDigest()
		df, errf := wf.TrafficDigest()
		if erry != nil || errf != nil || dy != df {
			t.Errorf("workload %s: digest %s (%v), flags %s (%v)", c.yaml, dy, erry, df, errf)
		}
	}
}
