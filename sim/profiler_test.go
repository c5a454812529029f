package sim

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

func postProfile(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Post(url, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestProfilerWritesOneTracePerEngine: a start then a stop writes one gzipped Kineto trace
// per engine (no .tmp left); a stop with nothing running writes nothing and answers 200.
func TestProfilerWritesOneTracePerEngine(t *testing.T) {
	dir := t.TempDir()
	cfg := fastConfig()
	cfg.Engines, cfg.ProfilerDir = 2, dir
	s := startSim(t, cfg)
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("idle stop %d", c)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("an idle stop wrote %d files", len(es))
	}
	before := time.Now().UnixNano()
	if c := postProfile(t, testClient, s.URL()+"/start_profile"); c != 200 {
		t.Fatalf("start %d", c)
	}
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("stop %d", c)
	}
	es, err := os.ReadDir(dir)
	if err != nil || len(es) != 2 {
		t.Fatalf("files %v %v", es, err)
	}
	name := regexp.MustCompile(`^rank([01])\.(\d+)\.pt\.trace\.json\.gz$`)
	for i, e := range es {
		m := name.FindStringSubmatch(e.Name())
		if m == nil || m[1] != string(rune('0'+i)) {
			t.Fatalf("file %q", e.Name())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			BaseTimeNanoseconds int64              `json:"baseTimeNanoseconds"`
			TraceEvents         []json.RawMessage  `json:"traceEvents"`
			DistributedInfo     struct{ Rank int } `json:"distributedInfo"`
		}
		if err := json.NewDecoder(zr).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		if doc.BaseTimeNanoseconds < before || doc.TraceEvents == nil || len(doc.TraceEvents) != 0 || doc.DistributedInfo.Rank != i {
			t.Fatalf("trace %+v", doc)
		}
	}
}

func TestProfilerFaults(t *testing.T) {
	dir := t.TempDir()
	cfg := fastConfig()
	cfg.ProfilerDir, cfg.Faults.ProfileStart = dir, ProfileStart500
	s := startSim(t, cfg)
	if c := postProfile(t, testClient, s.URL()+"/start_profile"); c != 500 {
		t.Fatalf("start %d, want 500", c)
	}
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("stop %d", c)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("a failed start's stop wrote %d files", len(es))
	}

	cfg.Faults.ProfileStart, cfg.Faults.ProfileStopNoFile = ProfileStartTimeout, true
	s = startSim(t, cfg)
	short := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := short.Post(s.URL()+"/start_profile", "application/json", nil); err == nil {
		t.Fatal("the timeout fault answered")
	}
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("stop %d", c)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("a no-file stop wrote %d files", len(es))
	}

	cfg.Faults.ProfileStart = "teapot"
	if err := cfg.Validate(); err == nil {
		t.Fatal("a bad fault-profile-start validated")
	}
	cfg.Faults.ProfileStart, cfg.ProfilerDir = "", filepath.Join(dir, "missing")
	if err := cfg.Validate(); err == nil {
		t.Fatal("a missing profiler-dir validated")
	}
}
