package daemon

import (
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// searchYAML is baseYAML with a search probe (probes[1], from line 17).
const searchYAML = baseYAML + `  - name: canary
    kind: search
    target: vllm
    slo: chat
    every: 24h
    search:
      over: rate
      min: 2
      max: 40.5
      tolerance: 0.2
      confidence: 0.9
      quantile: 0.9
      max_probes: 6
      max_requests_per_probe: 200
      max_lag: 500ms
    workload:
      requests: 30
      warmup-requests: 1
      arrival: fixed-rate
`

func TestParseSearchProbe(t *testing.T) {
	c := mustParse(t, searchYAML)
	if c.Probes[0].Search != nil {
		t.Error("a probe without kind has a search")
	}
	p := c.Probes[1]
	s := p.Search
	if s == nil {
		t.Fatal("kind: search gave no search")
	}
	o := s.Options
	if o.Over != artifact.OverRate || o.Min != 2 || o.Max != 40.5 || o.Tolerance != 0.2 || o.Confidence != 0.9 ||
		o.MaxProbes != 6 || o.MaxRequestsPerProbe != 200 || o.Requests != 30 || p.Every != 24*time.Hour {
		t.Errorf("options %+v every %v", o, p.Every)
	}
	if len(o.Tests) != 2 || o.Tests[0].Key != "client.ttft" || o.Tests[0].Level != 0.9 || o.Tests[0].MaxMs != 500 || o.Tests[1].Key != "client.e2e" {
		t.Errorf("tests %+v, want ttft and e2e p90", o.Tests)
	}
	if s.Warmup == nil || *s.Warmup != 1 || s.MaxLag != 500*time.Millisecond || *s.Workload.Arrival != "fixed-rate" || s.Workload.Model != "opt" {
		t.Errorf("warmup %v max lag %v workload %+v", s.Warmup, s.MaxLag, s.Workload)
	}

	// Defaults: inferprobe search's.
	d := mustParse(t, replace(searchYAML, "    search:\n      over: rate\n      min: 2\n      max: 40.5\n      tolerance: 0.2\n      confidence: 0.9\n      quantile: 0.9\n      max_probes: 6\n      max_requests_per_probe: 200\n      max_lag: 500ms\n", "",
		"      arrival: fixed-rate\n", "", "      warmup-requests: 1\n", "")).Probes[1].Search
	if o := d.Options; o.Over != "concurrency" || o.Min != 1 || o.Max != 256 || o.Tolerance != 0.1 || o.Confidence != 0.95 ||
		o.MaxProbes != 12 || o.MaxRequestsPerProbe != 1000 || o.Tests[0].Level != 0.95 || d.Warmup != nil || d.MaxLag != time.Second {
		t.Errorf("defaults %+v warmup %v lag %v", o, d.Warmup, d.MaxLag)
	}
}

// TestSearchProbeKey: the search block and the kind are part of what a probe sends.
func TestSearchProbeKey(t *testing.T) {
	p0 := mustParse(t, searchYAML).Probes[1]
	if p := mustParse(t, replace(searchYAML, "max: 40.5", "max: 41")).Probes[1]; p.key == p0.key {
		t.Error("a changed search block kept the key")
	}
	if p := mustParse(t, replace(searchYAML, "every: 24h", "every: 12h")).Probes[1]; p.key != p0.key || p.settings == p0.settings {
		t.Error("a schedule change alone restarts a search probe")
	}
	run := mustParse(t, replace(baseYAML, "every: 5m\n", "every: 5m\n    kind: run\n")).Probes[0]
	asSearch := mustParse(t, replace(baseYAML, "every: 5m\n    workload:\n      concurrency: [2]\n", "every: 5m\n    kind: search\n    workload:\n")).Probes[0]
	if base := mustParse(t, baseYAML).Probes[0]; run.key != base.key || asSearch.Search == nil {
		t.Errorf("kind: run changed the key (%v) or kind: search gave no search", run.key != base.key)
	}
}

// TestSearchProbeErrors: every error names its key and line.
func TestSearchProbeErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown kind", replace(searchYAML, "kind: search", "kind: sweep"), `config: probes[1].kind: want run or search, not "sweep" (line 18)`},
		{"tables on a search probe", replace(searchYAML, "kind: search", "kind: search\n    tables: true"), "config: probes[1].tables: is for a run probe: a search probe's runs write no tables (line 19)"},
		{"search without kind", replace(searchYAML, "    kind: search\n", ""), "config: probes[1].search: only a probe of kind: search has a search block (line 21)"},
		{"over", replace(searchYAML, "over: rate", "over: tokens"), `config: probes[1].search.over: want concurrency or rate, not "tokens" (line 23)`},
		{"min not a number", replace(searchYAML, "min: 2", "min: two"), `config: probes[1].search.min: want a number, not a string "two" (line 24)`},
		{"min above max", replace(searchYAML, "min: 2", "min: 50"), "config: probes[1].search.max: min must be below max (min 50, max 40.5) (line 25)"},
		{"concurrency not whole", replace(searchYAML, "over: rate", "over: concurrency", "      arrival: fixed-rate\n", ""),
			"config: probes[1].search.max: want a number > 0 (a whole number up to 1000000 with over: concurrency), not 40.5 (line 25)"},
		{"tolerance", replace(searchYAML, "tolerance: 0.2", "tolerance: 1.5"), "config: probes[1].search.tolerance: want a number between 0 and 1, not 1.5 (line 26)"},
		{"confidence", replace(searchYAML, "confidence: 0.9", "confidence: 0"), "config: probes[1].search.confidence: want a number between 0 and 1, not 0 (line 27)"},
		{"quantile", replace(searchYAML, "quantile: 0.9", "quantile: 0.8"), "config: probes[1].search.quantile: the quantile level must be one of 0.5, 0.9, 0.95, 0.99, not 0.8 (line 28)"},
		{"max_probes", replace(searchYAML, "max_probes: 6", "max_probes: 1"), "config: probes[1].search.max_probes: want a whole number within 2..1000, not 1 (line 29)"},
		{"max_probes type", replace(searchYAML, "max_probes: 6", "max_probes: 2.5"), `config: probes[1].search.max_probes: want a whole number, not "2.5" (line 29)`},
		{"max_requests_per_probe too small", replace(searchYAML, "max_requests_per_probe: 200", "max_requests_per_probe: 3", "      requests: 30\n", ""),
			"config: probes[1].search: --max-requests-per-probe 3 is too small: a decision at confidence 0.95 needs at least 36 requests (line 22)"},
		{"max_lag", replace(searchYAML, "max_lag: 500ms", "max_lag: 2h"), "config: probes[1].search.max_lag: must be at most 1h0m0s, not 2h0m0s (line 31)"},
		{"unknown search key", replace(searchYAML, "max_lag: 500ms", "max_lags: 500ms"), `config: probes[1].search.max_lags: unknown key "max_lags" (line 31)`},
		{"workload rate", replace(searchYAML, "requests: 30\n", "requests: 30\n      rate: [3]\n"), "config: probes[1].workload.rate: is set by the search (over, min and max; each probe's size) (line 34)"},
		{"workload duration", replace(searchYAML, "requests: 30\n", "duration: 30\n"), "config: probes[1].workload.duration: is set by the search (over, min and max; each probe's size) (line 33)"},
		{"arrival with concurrency", replace(searchYAML, "over: rate", "over: concurrency", "max: 40.5", "max: 40"), "config: probes[1].workload.arrival: a search takes poisson or fixed-rate with over: rate only (line 35)"},
		{"workload invalid at the first probe", replace(searchYAML, "warmup-requests: 1", "warmup-requests: -1"), "config: probes[1].workload.warmup-requests: probe 1 at 2: --warmup-requests must be ≥ 0 (line 34)"},
		{"no slo", replace(searchYAML, "    slo: chat\n    every: 24h", "    every: 24h"), "config: probes[1]: a search probe needs an slo: the search finds the largest load that meets it (line 17)"},
		{"no schedule", replace(searchYAML, "    every: 24h\n", ""), "config: probes[1]: a schedule is required: every: DURATION (a search probe cannot be continuous) (line 17)"},
		{"continuous", replace(searchYAML, "every: 24h", "continuous: true"), "config: probes[1].continuous: a search probe runs on a schedule: give every (line 21)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v\nwant  %s", err, tc.want)
			}
		})
	}
}
