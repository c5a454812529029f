package main

import (
	"path/filepath"
	"testing"
)

// TestProfileErrorMessages pins profile's usage errors on stderr, word for word: numbers
// name the bound they break, a stray argument is called one (with the '=' hint only right
// after a bare optional-value flag), and a URL is echoed as typed, without credentials.
func TestProfileErrorMessages(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.jsonl")
	base := []string{"profile", "--model", "m", "--output", out, "--base-url", "http://127.0.0.1:1/v1"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"duration over the maximum", with("--duration", "1e300"), "--duration must be at most 604800 seconds (7 days), not 1e+300"},
		{"duration a nanosecond", with("--duration", "1e-9"), "--duration must be at least 0.001 seconds (1 ms), not 1e-09"},
		{"slo overflowing float64", with("--slo", "ttft:1e400"), `--slo "ttft:1e400": 1e400 is out of range (float64 holds at most ±1.8e+308)`},
		{"stray argument", with("extra"), `unexpected argument "extra"`},
		{"stray argument after a valued flag", []string{"profile", "--model", "m", "extra"}, `unexpected argument "extra"`},
		{"value of an optional-value flag after a space", with("--vllm-spans-listen", "127.0.0.1:4318"),
			`unexpected argument "127.0.0.1:4318": --vllm-spans-listen takes its value after '=' (--vllm-spans-listen=127.0.0.1:4318)`},
		{"metrics URL after a space", with("--vllm-metrics", "http://h:8000/metrics"),
			`unexpected argument "http://h:8000/metrics": --vllm-metrics takes its value after '=' (--vllm-metrics=http://h:8000/metrics)`},
		{"base-url not a URL", []string{"profile", "--model", "m", "--output", out, "--base-url", "not a url"},
			`--base-url "not a url" must be an http or https URL (…/v1)`},
		{"base-url with credentials", []string{"profile", "--model", "m", "--output", out, "--base-url", "ftp://me:s3cret@h/v1?api_key=sk-x"},
			`--base-url "ftp://<redacted>@h/v1?<redacted>" must be an http or https URL (…/v1)`},
		{"endpoint as typed", []string{"profile", "--model", "m", "--output", out, "--endpoint", "h st/v1/chat/completions"},
			`endpoint "h st/v1/chat/completions" must be an http or https URL`},
		{"sample interval", with("--sample-interval", "0"), "--sample-interval must be > 0 seconds, not 0"},
		{"metrics interval", with("--vllm-metrics", "--vllm-metrics-interval", "0.01"), "--vllm-metrics-interval must be at least 0.1 seconds (100 ms), not 0.01"},
		{"spans drain", with("--vllm-spans-listen", "--vllm-spans-drain", "601"), "--vllm-spans-drain must be at most 600 seconds (10 min), not 601"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage || stderr != "Error: "+tc.want+"\n" {
				t.Fatalf("exit %d, stderr %q\nwant exit 2, %q", code, stderr, "Error: "+tc.want+"\n")
			}
		})
	}
}

// TestCollectErrorMessages pins collect-server's seconds flags' errors, word for word.
func TestCollectErrorMessages(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.jsonl")
	base := []string{"collect-server", "--run-id", "r", "--pid", "1", "--output", out, "--no-gpu"}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--interval", "0"}, "--interval must be at least 0.001 seconds (1 ms), not 0"},
		{[]string{"--duration", "1e300"}, "--duration must be at most 31536000 seconds (365 days), not 1e+300"},
		{[]string{"--duration", "0"}, "--duration must be > 0 seconds, not 0"},
	} {
		code, _, stderr := runCLI(t, append(append([]string{}, base...), tc.extra...)...)
		if code != exitUsage || stderr != "Error: "+tc.want+"\n" {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tc.extra, code, stderr, tc.want)
		}
	}
}
