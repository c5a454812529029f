package daemon

import "testing"

// TestConfigValueErrorsNameTheirLine: an error about a value the document writes names the
// key and its line, word for word, whether the YAML reader found it (a type) or validation
// did (a range, a name that refers to nothing).
func TestConfigValueErrorsNameTheirLine(t *testing.T) {
	workload := func(s string) string {
		return replace(baseYAML, "      concurrency: [2]\n      requests: 4\n", s)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"rate not a number", workload("      arrival: poisson\n      rate: \"fast\"\n      requests: 4\n"),
			`config: probes[0].workload.rate: want a number, not "fast" (line 16)`},
		{"rate out of range", workload("      arrival: poisson\n      rate: [1e400]\n      requests: 4\n"),
			"config: probes[0].workload.rate: 1e400 is out of range (float64 holds at most ±1.8e+308) (line 16)"},
		{"every negative", replace(baseYAML, "every: 5m", "every: -5m"),
			"config: probes[0].every: must be at least 1s, not -5m0s (line 13)"},
		{"every too short", replace(baseYAML, "every: 5m", "every: 500ms"),
			"config: probes[0].every: must be at least 1s, not 500ms (line 13)"},
		{"unknown target", replace(baseYAML, "target: vllm", "target: nope"),
			`config: probes[0].target: no target is named "nope" (line 11)`},
		{"unknown slo", replace(baseYAML, "slo: chat", "slo: nope"),
			`config: probes[0].slo: no slo is named "nope" (line 12)`},
		{"spans_drain", replace(baseYAML, "every: 5m", "every: 5m\n    spans_drain: 11m"),
			"config: probes[0].spans_drain: must be at most 10m0s, not 11m0s (line 14)"},
		{"scrape_interval", replace(baseYAML, "metrics_url: default", "metrics_url: default\n    scrape_interval: 50ms"),
			"config: targets[0].scrape_interval: must be at least 100ms, not 50ms (line 9)"},
		{"artifacts keep", "artifacts:\n  keep: -1\n" + baseYAML,
			"config: artifacts.keep: must be ≥ 0 (0: no count limit) (line 2)"},
		{"slo limit out of range", replace(baseYAML, `["ttft:500", "e2e:2000"]`, `["ttft:1e400"]`),
			`config: slos[0].criteria: --slo "ttft:1e400": 1e400 is out of range (float64 holds at most ±1.8e+308) (line 3)`},
		{"workload duration under 1 ms", workload("      duration: 1e-9\n"),
			"config: probes[0].workload.duration: --duration must be at least 0.001 seconds (1 ms), not 1e-09 (line 15)"},
		{"base_url not a URL, as typed", replace(baseYAML, "base_url: http://127.0.0.1:8000/v1/", "base_url: 'not a url'"),
			`config: targets[0].base_url: want an absolute http(s) URL, not "not a url" (line 6)`},
		{"base_url credentials never shown", replace(baseYAML, "base_url: http://127.0.0.1:8000/v1/", "base_url: 'ftp://me:s3cret@h/v1'"),
			`config: targets[0].base_url: want an absolute http(s) URL, not "ftp://<redacted>@h/v1" (line 6)`},
		{"slo name without an slos section", replace(baseYAML, baseYAML[:len("slos:\n  - name: chat\n    criteria: [\"ttft:500\", \"e2e:2000\"]\n")], ""),
			`config: probes[0].slo: no slo is named "chat" (line 9)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v\nwant  %s\n%s", err, tc.want, tc.text)
			}
		})
	}
}
