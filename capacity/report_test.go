package capacity

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func TestReportsOfACliffSearch(t *testing.T) {
	res := search(t, &fake{truth: cliff(37), threshold: 200, sigma: 1}, Options{Over: artifact.OverConcurrency, Min: 1, Max: 512})
	var text bytes.Buffer
	if err := RenderText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"status:     found", "capacity:   " + num(*res.Capacity) + " workers", "binding:    client.e2e p95", "boundary:   cliff", "client.e2e p95 fail ["} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["event_type"] != artifact.EventSearch || back["capacity"] != *res.Capacity || len(back["probes"].([]any)) != len(res.Probes) {
		t.Fatalf("JSON report %v (%v)", back, err)
	}
	dir := t.TempDir()
	if err := WriteRecord(filepath.Join(dir, "search.jsonl"), res); err != nil {
		t.Fatal(err)
	}
	if line, err := os.ReadFile(filepath.Join(dir, "search.jsonl")); err != nil || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("record file %q, %v", line, err)
	}
	path := filepath.Join(dir, "search.png")
	if err := WritePNG(path, res); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 500 || img.Bounds().Dy() < 300 {
		t.Fatalf("png %v, %v", img.Bounds(), err)
	}
	if err := WritePNG(path, &artifact.Search{}); err == nil {
		t.Fatal("an empty search plotted")
	}
}

func TestBoundsText(t *testing.T) {
	q := artifact.SearchTest{Kind: artifact.TestQuantile, Threshold: 40, Lower: artifact.Ptr(35.351), Upper: artifact.Ptr(36.1767)}
	if got := boundsText(q); got != "[35.35, 36.18] ms ≤ 40.00 ms?" {
		t.Errorf("quantile: %q", got)
	}
	q.Upper = nil
	if got := boundsText(q); got != "[35.35, ∞] ms ≤ 40.00 ms?" {
		t.Errorf("unbounded: %q", got)
	}
	a := artifact.SearchTest{Kind: artifact.TestAttainment, Threshold: 0.95, Lower: artifact.Ptr(0.912), Upper: artifact.Ptr(0.979)}
	if got := boundsText(a); got != "[91.2%, 97.9%] ≥ 95.0%?" {
		t.Errorf("attainment: %q", got)
	}
}
