package compare

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
)

// writeSynth writes a synthetic Poisson run (internal/synth) and returns its path.
func writeSynth(t testing.TB, dir, name string, run synth.Run) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func metric(t *testing.T, c CaseResult, key string) MetricResult {
	t.Helper()
	for _, m := range c.Metrics {
		if m.Key == key {
			return m
		}
	}
	t.Fatalf("case %s has no %s", c.CaseID, key)
	return MetricResult{}
}

// The same workload with every TTFT 30% slower: TTFT is worse at every level with enough
// requests, each relative interval covers the true +30%, TPOT does not move, and the gate at
// +5% fires while the one at +50% holds. The same run against itself is not
// distinguishable anywhere.
func TestCompareSyntheticShift(t *testing.T) {
	dir := t.TempDir()
	base := writeSynth(t, dir, "base.jsonl", synth.Run{Requests: 3000, Cases: 1, Seed: 5})
	cand := writeSynth(t, dir, "cand.jsonl", synth.Run{Requests: 3000, Cases: 1, Seed: 5, TTFTScale: 1.3})
	fire, _ := ParseGate("client.ttft.p50:+5%")
	hold, _ := ParseGate("ttft.p90:+50%")
	res, err := Run(context.Background(), Options{Base: []string{base}, Candidate: []string{cand}, Gates: []Gate{fire, hold}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 1 || res.Family == 0 || len(res.Warnings) != 0 {
		t.Fatalf("cases %d family %d warnings %q", len(res.Cases), res.Family, res.Warnings)
	}
	c := res.Cases[0]
	ttft := metric(t, c, artifact.MetricTTFT)
	if ttft.Verdict != VerdictWorse || ttft.Rank.Effect <= 0.5 {
		t.Fatalf("ttft %+v", ttft)
	}
	for _, q := range ttft.Quantiles {
		if q.Level == "p99" {
			continue // 2,940 values: sufficient, but the tail is wide
		}
		if !q.Sufficient || q.Verdict != VerdictWorse || *q.RelLower > 0.3 || *q.RelUpper < 0.3 {
			t.Errorf("%s: %+v [%g, %g]", q.Level, q, *q.RelLower, *q.RelUpper)
		}
	}
	if m := metric(t, c, artifact.MetricTPOT); m.Verdict == VerdictWorse || m.Verdict == VerdictBetter {
		t.Errorf("tpot changed: %+v", m)
	}
	if c.Success == nil || c.Success.Verdict != VerdictSame || c.Attainment != nil {
		t.Errorf("success %+v attainment %+v", c.Success, c.Attainment)
	}
	if len(res.Gates) != 2 || res.Gates[0].Outcome != GateFired || res.Gates[1].Outcome != GateHeld || !res.Fired {
		t.Fatalf("gates %+v", res.Gates)
	}
	var txt bytes.Buffer
	if err := RenderText(&txt, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"client.ttft: 2", ": worse", "Gates:", "client.ttft.p50:+5%, case poisson250_in512_out128: +30", "REGRESSION", "1 gate fired"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}

	same, err := Run(context.Background(), Options{Base: []string{base}, Candidate: []string{base}, Gates: []Gate{fire}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range same.Cases[0].Metrics {
		if m.Verdict != VerdictSame {
			t.Errorf("self-comparison %s: %s", m.Key, m.Verdict)
		}
		for _, q := range m.Quantiles {
			if q.Verdict != VerdictSame && q.Verdict != VerdictInsufficient {
				t.Errorf("self-comparison %s %s: %s", m.Key, q.Level, q.Verdict)
			}
		}
	}
	if same.Fired {
		t.Fatal("a gate fired comparing a run with itself")
	}
}

// Different seeds are different workloads: refused, naming the seed, unless allowed; a
// policy given to both runs makes attainment comparable; too few requests for p99 say so.
func TestCompareDigestAndPolicy(t *testing.T) {
	dir := t.TempDir()
	base := writeSynth(t, dir, "base.jsonl", synth.Run{Requests: 400, Cases: 1, Seed: 1})
	other := writeSynth(t, dir, "other.jsonl", synth.Run{Requests: 400, Cases: 1, Seed: 2})
	_, err := Run(context.Background(), Options{Base: []string{base}, Candidate: []string{other}})
	if !errors.Is(err, ErrDigestMismatch) || !errors.Is(err, artifact.ErrInvalidArtifact) || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("err %v", err)
	}
	policy, err := analyze.ParseSLOFlags([]string{"ttft:60"})
	if err != nil {
		t.Fatal(err)
	}
	opts := analyze.Options{Policy: policy, PolicySource: analyze.SourceFlags}
	res, err := Run(context.Background(), Options{Base: []string{base}, Candidate: []string{other}, AllowDigestMismatch: true,
		BaseAnalysis: opts, CandidateAnalysis: opts})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "seed") || !strings.Contains(res.Warnings[0], "--allow-digest-mismatch") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	c := res.Cases[0]
	if c.Attainment == nil || c.Attainment.Verdict != VerdictSame || c.Attainment.Base[0] <= 0.5 {
		t.Fatalf("attainment %+v", c.Attainment)
	}
	p99 := metric(t, c, artifact.MetricTTFT).Quantiles[3]
	if p99.Level != "p99" || p99.Verdict != VerdictInsufficient || p99.DiffLower != nil {
		t.Fatalf("p99 %+v", p99)
	}
	var txt bytes.Buffer
	if err := RenderText(&txt, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "insufficient sample (") || !strings.Contains(txt.String(), "SLO attainment") {
		t.Fatalf("text:\n%s", txt.String())
	}
	// A candidate judged by another policy: named, attainment not comparable.
	other2, _ := analyze.ParseSLOFlags([]string{"ttft:80"})
	res, err = Run(context.Background(), Options{Base: []string{base}, Candidate: []string{base},
		BaseAnalysis: opts, CandidateAnalysis: analyze.Options{Policy: other2, PolicySource: analyze.SourceFlags}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "different SLO policies") || res.Cases[0].Attainment.Verdict != VerdictNotComparable {
		t.Fatalf("warnings %q attainment %+v", res.Warnings, res.Cases[0].Attainment)
	}
}

// JSON and HTML renderings of a comparison: sorted JSON with the verdicts, an HTML page with
// one embedded PNG per compared metric.
func TestCompareRenderings(t *testing.T) {
	dir := t.TempDir()
	base := writeSynth(t, dir, "base.jsonl", synth.Run{Requests: 600, Cases: 1, Seed: 5})
	cand := writeSynth(t, dir, "cand.jsonl", synth.Run{Requests: 600, Cases: 1, Seed: 5, TTFTScale: 1.3})
	res, err := Run(context.Background(), Options{Base: []string{base}, Candidate: []string{cand}})
	if err != nil {
		t.Fatal(err)
	}
	var js, page bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(js.String(), "{\n  \"base\": {") || !strings.Contains(js.String(), `"verdict": "worse"`) {
		t.Fatalf("json:\n%.400s", js.String())
	}
	if err := WriteHTML(&page, res); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), "data:image/png;base64,"); n != len(res.Cases[0].Metrics) || n == 0 {
		t.Fatalf("%d images for %d metrics", n, len(res.Cases[0].Metrics))
	}
}

func TestParseGate(t *testing.T) {
	for spec, want := range map[string]Gate{
		"client.ttft.p99:+5%":           {Metric: "client.ttft", Level: "p99", P: 0.99, Relative: true, Threshold: 0.05},
		"ttft.p99.9:5%":                 {Metric: "client.ttft", Level: "p99.9", P: 0.999, Relative: true, Threshold: 0.05},
		"server.queue.p50:+20ms":        {Metric: "server.queue", Level: "p50", P: 0.5, Threshold: 20},
		"e2e.p90:+0.5s":                 {Metric: "client.e2e", Level: "p90", P: 0.9, Threshold: 500},
		"slo.attainment:-1%":            {Metric: GateAttainment, Threshold: 0.01},
		"success:-0.5%":                 {Metric: GateSuccess, Threshold: 0.005},
		"e2e_per_output_token.p50:+10%": {Metric: artifact.MetricE2EPerOutputToken, Level: "p50", P: 0.5, Relative: true, Threshold: 0.1},
	} {
		g, err := ParseGate(spec)
		want.Spec = spec
		if err != nil || g != want {
			t.Errorf("%s: %+v, %v; want %+v", spec, g, err, want)
		}
	}
	for _, bad := range []string{"", "client.ttft", "client.ttft.p99", "client.foo.p99:+5%", "client.ttft.p100:+5%",
		"client.ttft.p0:+5%", "client.ttft.pXY:+5%", "client.ttft.p99:-5%", "client.ttft.p99:+5", "slo.attainment:+1%",
		"client.ttft.p99:+NaN%", "client.ttft.p99:+-5%", "client.itl.p50:+5%", "client.ttft.p1e1:+5%"} {
		if _, err := ParseGate(bad); !errors.Is(err, ErrBadGate) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func FuzzParseGate(f *testing.F) {
	for _, s := range []string{"client.ttft.p99:+5%", "slo.attainment:-1%", "e2e.p90:+0.5s", "x.p:1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGate(s)
		if err != nil {
			return
		}
		if g.validate() != nil || g.Threshold < 0 {
			t.Fatalf("%q parsed to an invalid gate %+v", s, g)
		}
	})
}
