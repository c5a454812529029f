package pareto

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/capacity"
	"github.com/inferprobe/inferprobe/internal/synth"
)

func pt(x, y float64) Point { return Point{Interactivity: ptr(x), Throughput: ptr(y)} }

// The front: no point dominated by another (at least as interactive and as fast, one of them
// strictly more); equal points share the front; points without a value are never on it.
func TestMarkFront(t *testing.T) {
	pts := []Point{pt(10, 100), pt(20, 50), pt(5, 200), pt(10, 90), pt(4, 200), pt(20, 50), {Throughput: ptr(1000.0)}, pt(1, 150)}
	mark(pts, func(p *Point) *float64 { return p.Interactivity }, func(p *Point, on bool) { p.OnFront = on }, false)
	want := []bool{true, true, true, false, false, true, false, false}
	for i, p := range pts {
		if p.OnFront != want[i] {
			t.Errorf("point %d (%v, %v): front %v, want %v", i, deref(p.Interactivity), deref(p.Throughput), p.OnFront, want[i])
		}
	}
	// Per GPU: the front is over the per-GPU throughput.
	pts = []Point{{Interactivity: ptr(1.0), Throughput: ptr(100.0), PerGPU: ptr(10.0)}, {Interactivity: ptr(0.5), Throughput: ptr(50.0), PerGPU: ptr(50.0)}}
	mark(pts, func(p *Point) *float64 { return p.Interactivity }, func(p *Point, on bool) { p.OnFront = on }, true)
	if !pts[0].OnFront || !pts[1].OnFront {
		t.Fatalf("per GPU %+v", pts)
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func synthRun(t *testing.T, dir, name string, run synth.Run) string {
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

// A capacity search's directory: each probe's artifact is a point with its value, the probe's
// decision marks the SLO, and the per-GPU throughput, interactivity and cost follow the
// report; the table and the PNG are written.
func TestParetoSearchDirectory(t *testing.T) {
	dir := t.TempDir()
	var probes []artifact.SearchProbe
	for i, scale := range []float64{1, 1.5, 3} {
		path := synthRun(t, dir, "probe-0"+string(rune('1'+i))+".jsonl", synth.Run{Requests: 300, Cases: 1, Seed: int64(i + 1), TTFTScale: scale})
		decision := artifact.DecisionPass
		if i == 2 {
			decision = artifact.DecisionFail
		}
		// The record names the artifact where the search ran: pareto finds it by its name.
		probes = append(probes, artifact.SearchProbe{Index: i + 1, Value: float64(int(4) << i), Decision: decision, Artifact: filepath.Join("/elsewhere", filepath.Base(path))})
	}
	if err := capacity.WriteRecord(filepath.Join(dir, SearchRecordFile), &artifact.Search{SearchID: "s", Over: artifact.OverConcurrency, Probes: probes}); err != nil {
		t.Fatal(err)
	}
	gpus := 2
	cost := 4.0
	res, err := Run(context.Background(), Options{Inputs: []string{dir}, GPUs: &gpus, Analysis: analyze.Options{Cost: &analyze.CostRate{USDPerHour: &cost}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 3 || !res.PerGPU {
		t.Fatalf("points %+v", res.Points)
	}
	for i, p := range res.Points {
		if p.Value == nil || *p.Value != float64(int(4)<<i) || p.Over != artifact.OverConcurrency || p.SLOMet == nil || *p.SLOMet != (i < 2) {
			t.Errorf("point %d: value %v slo %v (%s)", i, deref(p.Value), p.SLOMet, p.SLOReason)
		}
		if p.PerGPU == nil || *p.PerGPU != *p.Throughput/2 || p.Interactivity == nil || *p.Interactivity != 1000 / *p.TPOTp50Ms ||
			p.E2EInteractivity == nil || *p.E2EInteractivity != 1000 / *p.E2EPerTokenP90Ms || p.USDPerMillionOutput == nil {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	var txt bytes.Buffer
	if err := RenderText(&txt, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "per GPU, 2 GPUs") || !strings.Contains(txt.String(), "concurrency 16") || strings.Count(txt.String(), "missed") != 1 {
		t.Fatalf("table:\n%s", txt.String())
	}
	out := filepath.Join(dir, "front.png")
	if err := WritePNG(out, res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 1540 {
		t.Fatalf("png %v %v", err, img.Bounds())
	}
}

// Inputs that are not runs are invalid artifacts; an SLO policy marks plain runs by their
// attainment against the target.
func TestParetoInputs(t *testing.T) {
	dir := t.TempDir()
	if _, err := Run(context.Background(), Options{Inputs: []string{filepath.Join(dir, "none.jsonl")}}); !errors.Is(err, artifact.ErrInvalidArtifact) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := Run(context.Background(), Options{Inputs: []string{dir}}); !errors.Is(err, artifact.ErrInvalidArtifact) {
		t.Fatalf("empty directory: %v", err)
	}
	synthRun(t, dir, "a.jsonl", synth.Run{Requests: 200, Cases: 2, Seed: 1})
	policy, _ := analyze.ParseSLOFlags([]string{"ttft:1000"})
	res, err := Run(context.Background(), Options{Inputs: []string{dir}, AttainmentTarget: 0.9, Analysis: analyze.Options{Policy: policy, PolicySource: analyze.SourceFlags}})
	if err != nil {
		t.Fatal(err)
	}
	// Every successful request meets 1 s; 4.5% of the offered ones fail (synth): attainment ≈ 0.955 ≥ 0.9.
	for _, p := range res.Points {
		if p.SLOMet == nil || !*p.SLOMet || !strings.Contains(p.SLOReason, "reaches the target 0.9") {
			t.Errorf("point %s: %v %s", p.CaseID, p.SLOMet, p.SLOReason)
		}
	}
	res, _ = Run(context.Background(), Options{Inputs: []string{dir}})
	if res.Points[0].SLOMet != nil || res.Points[0].SLOReason != "no SLO policy" {
		t.Fatalf("no policy: %+v", res.Points[0])
	}
}

func TestParseSearch(t *testing.T) {
	for _, bad := range []string{"", "{}", `{"event_type":"infer.request","schema_version":1,"probes":[{"artifact":"a"}]}`,
		`{"event_type":"infer.search","schema_version":1,"probes":[]}`, `{"event_type":"infer.search","schema_version":1,"probes":[{"index":1}]}`} {
		if _, err := parseSearch([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	s, err := parseSearch([]byte(`{"event_type":"infer.search","schema_version":1,"over":"rate","probes":[{"index":1,"value":2,"artifact":"p.jsonl","decision":"pass"}]}` + "\n"))
	if err != nil || s.Over != "rate" || s.Probes[0].Artifact != "p.jsonl" {
		t.Fatalf("%+v %v", s, err)
	}
}

func FuzzParseSearch(f *testing.F) {
	f.Add([]byte(`{"event_type":"infer.search","schema_version":1,"probes":[{"index":1,"value":2,"artifact":"p.jsonl"}]}`))
	f.Add([]byte("{}\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSearch(data)
		if err == nil && (len(s.Probes) == 0 || s.Probes[0].Artifact == "") {
			t.Fatalf("accepted %q", data)
		}
	})
}
