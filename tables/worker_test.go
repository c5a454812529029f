package tables

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// scrapeAt is an ok scrape at t0+ms with, per engine, vllm:num_requests_waiting,
// vllm:num_requests_running and vllm:kv_cache_usage_perc.
func scrapeAt(ms int64, engines map[string][3]float64) *artifact.MetricsScrape {
	ss := &artifact.ScrapeSeries{Families: map[string]string{}, LabelSets: map[string]map[string]string{},
		Values: map[string]map[string]artifact.SeriesValue{}, Helps: map[string]string{}}
	fams := []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"}
	for _, f := range fams {
		ss.Families[f], ss.Values[f] = "gauge", map[string]artifact.SeriesValue{}
	}
	i := 0
	for eng, v := range engines {
		id := strconv.Itoa(i)
		ss.LabelSets[id] = map[string]string{"engine": eng, "model_name": "m"}
		for k, f := range fams {
			ss.Values[f][id] = artifact.SeriesValue{Sample: artifact.Float(v[k])}
		}
		i++
	}
	return &artifact.MetricsScrape{ObservedAtNS: t0 + ms*1_000_000, Status: artifact.ScrapeOK, Marker: artifact.ScrapeMarkerInterval,
		Scrape: ss, Discovery: &artifact.ScrapeDiscovery{}}
}

// workerRun is smallRun with scrapes of engines "0" and "1" (and a failed scrape, which adds
// nothing): engine 0 waiting 0, 2, 2, 5 and engine 1 waiting 1, 1, 1, 1 at −100, 400, 900,
// 1400 ms from the first arrival.
func workerRun() []artifact.Record {
	recs := smallRun()
	waiting0 := []float64{0, 2, 2, 5}
	for k, ms := range []int64{-100, 400, 900, 1400} {
		recs = append(recs, scrapeAt(ms, map[string][3]float64{
			"0": {waiting0[k], float64(k), 0.25 * float64(k)},
			"1": {1, 3, 0},
		}))
	}
	errText := "HTTP 503"
	return append(recs, &artifact.MetricsScrape{ObservedAtNS: t0, Status: artifact.ScrapeError, Error: &errText})
}

// ddValue is the value DDSketch (logarithmic mapping, relative accuracy 0.001) returns for a
// bin holding v > 0: γ^i·(1+α), i = floor(ln v / ln γ), γ = (1+α)/(1−α); 0 for 0.
func ddValue(v float64) float64 {
	if v == 0 {
		return 0
	}
	const a = 0.001
	g := (1 + a) / (1 - a)
	return math.Pow(g, math.Floor(math.Log(v)/math.Log(g))) * (1 + a)
}

// quantileOf is the sketch quantile rule over sorted values: the first value whose rank
// count exceeds q·(n−1).
func quantileOf(sorted []float64, q float64) float64 {
	rank := q * float64(len(sorted)-1)
	for i, v := range sorted {
		if float64(i+1) > rank {
			return ddValue(v)
		}
	}
	return ddValue(sorted[len(sorted)-1])
}

func TestTablesWorkerFiles(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, workerRun())
	wantSeries := "Time (s),queue_depth_waiting,worker_id\n" +
		"-0.1,0,0\n-0.1,1,1\n0.4,2,0\n0.4,1,1\n0.9,2,0\n0.9,1,1\n1.4,5,0\n1.4,1,1\n"
	if got := readFile(t, filepath.Join(dir, WorkerPlotsDir, "worker_queue_depth_waiting_time_series.csv")); got != wantSeries {
		t.Errorf("waiting series:\n%s\nwant:\n%s", got, wantSeries)
	}
	kv := readFile(t, filepath.Join(dir, WorkerPlotsDir, "worker_kv_page_utilization_ratio_time_series.csv"))
	if !strings.Contains(kv, "\n0.4,0.25,0\n") || !strings.Contains(kv, "\n1.4,0.75,0\n") || !strings.Contains(kv, "\n1.4,0.0,1\n") {
		t.Errorf("kv series:\n%s", kv)
	}
	var b strings.Builder
	b.WriteString("cdf,queue_depth_waiting,worker_id\n")
	for _, w := range []struct {
		id   string
		vals []float64
	}{{"0", []float64{0, 2, 2, 5}}, {"1", []float64{1, 1, 1, 1}}} {
		for i := 0; i <= 100; i++ {
			q := float64(i) * (1.0 / 100)
			if i == 100 {
				q = 1
			}
			fmt.Fprintf(&b, "%s,%s,%s\n", Repr(q), Repr(quantileOf(w.vals, q)), w.id)
		}
	}
	if got := readFile(t, filepath.Join(dir, WorkerPlotsDir, "worker_queue_depth_waiting.csv")); got != b.String() {
		gl, wl := strings.Split(got, "\n"), strings.Split(b.String(), "\n")
		if len(gl) != len(wl) {
			t.Errorf("waiting CDF has %d lines, want %d", len(gl), len(wl))
		}
		for i := range min(len(gl), len(wl)) {
			if !sameSketchRow(gl[i], wl[i]) {
				t.Errorf("waiting CDF line %d = %q, want %q", i+1, gl[i], wl[i])
				break
			}
		}
	}
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Workers.Workers) != 2 || len(m.Workers.Metrics) != 3 || !m.Workers.Metrics[0].Written ||
		m.Workers.Metrics[0].Samples["0"] != 4 || m.Workers.Metrics[2].Family != "vllm:kv_cache_usage_perc" {
		t.Errorf("workers: %+v", m.Workers)
	}
	groups := map[string]int{}
	for _, p := range m.Pictures {
		groups[p.Group]++
		if p.Caption == "" || p.Source == "" || !strings.HasSuffix(p.File, ".png") {
			t.Errorf("picture %+v", p)
		}
		readFile(t, filepath.Join(dir, p.File))
	}
	// Request: 5 client/schedule/usage CDFs, 3 histograms, the arrival series; server: 7
	// span CDFs; workers: a CDF and a series per gauge.
	if groups[GroupRequest] != 9 || groups[GroupServer] != 7 || groups[GroupWorkers] != 6 {
		t.Errorf("pictures by group: %v", groups)
	}
}

// Without scrapes the worker files are absent and the manifest says why; a directory
// written again without them loses the old ones.
func TestTablesWorkerFilesAbsent(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, workerRun())
	writeTables(t, dir, smallRun())
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Workers.Metrics {
		if e.Written || e.Why != whyNoScrape {
			t.Errorf("metric %+v", e)
		}
	}
	entries, _ := filepath.Glob(filepath.Join(dir, WorkerPlotsDir, "*"))
	if len(entries) != 0 {
		t.Errorf("stale worker files: %v", entries)
	}
}

// sameSketchRow compares two "cdf,value,worker" rows: cdf and worker byte for byte, the value
// to 1e-12 relative (the sketch computes γ^i with its own exp path: the last digits may differ).
func sameSketchRow(got, want string) bool {
	if got == want {
		return true
	}
	g, w := strings.Split(got, ","), strings.Split(want, ",")
	if len(g) != 3 || len(w) != 3 || g[0] != w[0] || g[2] != w[2] {
		return got == want
	}
	gv, err1 := strconv.ParseFloat(g[1], 64)
	wv, err2 := strconv.ParseFloat(w[1], 64)
	return err1 == nil && err2 == nil && math.Abs(gv-wv) <= 1e-12*math.Abs(wv)
}
