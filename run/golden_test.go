package run

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/internal/synth"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGoldenRun")

// TestGoldenRun pins what a known run publishes: the text and JSON reports of its artifact
// and the full inferprobe_* /metrics exposition of the live exporter fed the same records and
// the run's judgement. The run is synthetic and deterministic (internal/synth: two Poisson
// cases, 200 requests with timeouts, HTTP errors and drops, every sent request's span, and
// requests with two spans that the join quarantines), judged against ttft:100 and e2e:400.
// Regenerate with: go test ./run -run TestGoldenRun -update
func TestGoldenRun(t *testing.T) {
	policy, err := analyze.ParseSLOFlags([]string{"ttft:100", "e2e:400"})
	if err != nil {
		t.Fatal(err)
	}
	policy.Name = "golden"
	thresholds := map[string][]float64{}
	for _, c := range policy.Criteria {
		thresholds[c.Key()] = append(thresholds[c.Key()], c.MaxMs/1000)
	}
	exp := exporter.New(exporter.Options{Thresholds: thresholds, Version: "golden"})
	labels := exporter.Labels{Target: "synthetic", Model: "Qwen/Qwen2.5-0.5B-Instruct", Probe: "golden"}
	one := 0.99
	exp.SetProbeConfig(labels, 60, policy.Name, &one)
	path := filepath.Join(t.TempDir(), "golden.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	xrun := exp.StartRun(labels)
	fan := artifact.NewFanout(w, xrun)
	if err := (synth.Run{Requests: 200, Cases: 2, Seed: 1, Spans: true, Sent: true}).Write(fan); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(context.Background(), path, analyze.Options{Policy: policy, PolicySource: analyze.SourceFlags})
	if err != nil {
		t.Fatal(err)
	}
	if err := fan.Write(Judge(artifact.StatusCompleted, time.Unix(1_760_000_100, 0), rep)); err != nil {
		t.Fatal(err)
	}
	if err := fan.Close(); err != nil {
		t.Fatal(err)
	}

	var text, js bytes.Buffer
	if err := analyze.RenderText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if err := analyze.WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", text.Bytes())
	golden(t, "report.json", js.Bytes())
	golden(t, "metrics.txt", exposition(t, exp))

	// The golden run exercises what it claims to — quarantined requests and every outcome —
	// and the live server samples are the report's joined requests.
	spans := reportSpans(t, rep)
	if q := spans["quarantined_requests"].(map[string]any); q["multiple_spans"] != 20.0 || spans["joined"] != 179.0 {
		t.Errorf("report spans %v", spans)
	}
	if n := serverSamples(t, exp, "inferprobe_server_e2e_seconds"); n != 179 {
		t.Errorf("%d live server samples, the report joined 179", n)
	}
	for _, want := range []string{`"timeout"`, `"dropped"`, `"error"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("the report has no %s", want)
		}
	}
}

// serverSamples sums the sample counts of one histogram family over its series.
func serverSamples(t *testing.T, e *exporter.Exporter, name string) uint64 {
	t.Helper()
	fams, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// exposition is the text exposition of the exporter's inferprobe_* families, without the
// build info (it carries the Go version).
func exposition(t *testing.T, e *exporter.Exporter) []byte {
	t.Helper()
	fams, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var keep []*dto.MetricFamily
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "inferprobe_") && f.GetName() != "inferprobe_build_info" {
			keep = append(keep, f)
		}
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].GetName() < keep[j].GetName() })
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range keep {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// golden compares got with testdata/golden/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the golden file at line %d:\n got: %s\nwant: %s\n(regenerate with -update if the change is intended)", name, i+1, g, w)
			}
		}
	}
}
