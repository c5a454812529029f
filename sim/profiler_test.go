package sim

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// readGz reads a whole gzip file, failing on any gzip error.
func readGz(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip stream of %s: %v", path, err)
	}
	return b
}

// TestProfilerWritesOneTracePerEngine: with no requests in flight a start then a stop
// writes one empty-window trace and one empty ground truth per engine (no .tmp left); a
// stop with nothing running writes nothing and answers 200.
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
	if c := postProfile(t, testClient, s.URL()+"/start_profile"); c != 200 {
		t.Fatalf("start %d", c)
	}
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("stop %d", c)
	}
	es, err := os.ReadDir(dir)
	if err != nil || len(es) != 4 {
		t.Fatalf("files %v %v", es, err)
	}
	name := regexp.MustCompile(`^rank([01])\.(\d+)\.(pt\.trace\.json\.gz|steps\.jsonl)$`)
	for i, e := range es {
		m := name.FindStringSubmatch(e.Name())
		if m == nil || m[1] != string(rune('0'+i/2)) {
			t.Fatalf("file %q", e.Name())
		}
		p := filepath.Join(dir, e.Name())
		if m[3] == "steps.jsonl" {
			if b, _ := os.ReadFile(p); len(b) != 0 {
				t.Fatalf("an empty window's truth has %q", b)
			}
			continue
		}
		d := decodeTrace(t, readGz(t, p))
		if d.DistributedInfo["rank"] != json.Number(m[1]) || d.DistributedInfo["world_size"] != json.Number("2") || d.TraceName != p {
			t.Fatalf("trace %+v", d)
		}
		for _, ev := range d.TraceEvents {
			if ev.Ph == "X" {
				t.Fatalf("an empty window has event %+v", ev)
			}
		}
	}
}

// profiledWindow profiles requests (streamed, each prompt and max_tokens given) on a fresh
// sim with cfg and returns the profiler directory's trace and truth files of engine 0 and
// the usage of each request.
func profiledWindow(t *testing.T, cfg Config, prompts, maxTokens []int) (trace, truth string, usages []map[string]any) {
	t.Helper()
	dir := t.TempDir()
	cfg.ProfilerDir = dir
	s := startSim(t, cfg)
	if c := postProfile(t, testClient, s.URL()+"/start_profile"); c != 200 {
		t.Fatalf("start %d", c)
	}
	done := make(chan map[string]any, len(prompts))
	for i := range prompts {
		go func() {
			resp := post(t, s.URL(), chatBody(words(prompts[i]), maxTokens[i], true, map[string]any{"ignore_eos": true}), nil)
			defer resp.Body.Close()
			evs, err := readSSE(t, resp.Body)
			if err != nil {
				t.Error(err)
			}
			done <- summarise(t, evs).usage
		}()
	}
	for range prompts {
		usages = append(usages, <-done)
	}
	if c := postProfile(t, testClient, s.URL()+"/stop_profile"); c != 200 {
		t.Fatalf("stop %d", c)
	}
	traces, _ := filepath.Glob(filepath.Join(dir, "rank0.*.pt.trace.json.gz"))
	truths, _ := filepath.Glob(filepath.Join(dir, "rank0.*.steps.jsonl"))
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(traces) != 1 || len(truths) != 1 || len(tmps) != 0 {
		t.Fatalf("traces %v truths %v tmp %v", traces, truths, tmps)
	}
	if strings.TrimSuffix(traces[0], ".pt.trace.json.gz") != strings.TrimSuffix(truths[0], ".steps.jsonl") {
		t.Fatalf("trace %s and truth %s are not a pair", traces[0], truths[0])
	}
	return traces[0], truths[0], usages
}

// TestProfilerRecordsTheEngineSteps: a window around three streamed requests records every
// step they ran: over the window the context tokens add up to their prompts (no prefix
// cache, no preemption), the generation tokens to their completion tokens less the one each
// prefill step emitted; steps follow each other; the trace's annotations are the truth's.
func TestProfilerRecordsTheEngineSteps(t *testing.T) {
	cfg := fastConfig()
	cfg.EnablePrefixCaching = false
	before := time.Now().UnixNano()
	trace, truthPath, usages := profiledWindow(t, cfg, []int{30, 7, 120}, []int{12, 5, 9})
	after := time.Now().UnixNano()
	tb, err := os.ReadFile(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	truth := readTruth(t, tb)
	var ctx, gen, wantCtx, wantGen int
	for _, u := range usages {
		wantCtx += num(t, u, "prompt_tokens")
		wantGen += num(t, u, "completion_tokens") - 1
	}
	for i, st := range truth {
		ctx += st.ContextTokens
		gen += st.GenerationTokens
		if st.Step != i || st.Rank != 0 || st.StartNs < before || st.EndNs > after || st.EndNs < st.StartNs ||
			(i > 0 && st.StartNs < truth[i-1].EndNs) || st.GenerationTokens != st.GenerationRequests {
			t.Fatalf("step %d %+v", i, st)
		}
	}
	if ctx != wantCtx || gen != wantGen || wantCtx != 157 || wantGen != 23 {
		t.Fatalf("context tokens %d (want %d), generation tokens %d (want %d)", ctx, wantCtx, gen, wantGen)
	}
	d := decodeTrace(t, readGz(t, trace))
	var names []string
	for _, ev := range d.TraceEvents {
		if ev.Cat == "user_annotation" {
			names = append(names, ev.Name)
		}
	}
	if len(names) != len(truth) {
		t.Fatalf("%d annotations for %d steps", len(names), len(truth))
	}
	for i, st := range truth {
		if want := fmt.Sprintf("execute_context_%d(%d)_generation_%d(%d)", st.ContextRequests, st.ContextTokens, st.GenerationRequests, st.GenerationTokens); names[i] != want {
			t.Fatalf("annotation %d %q, want %q", i, names[i], want)
		}
	}
}

// TestProfilerTruncatedGzip: the gzip fault's trace is a gzip stream cut short (an
// unexpected EOF past the gzip header), at about half the file; its ground truth is whole.
func TestProfilerTruncatedGzip(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.ProfileTruncatedTrace = TruncateGzip
	trace, truthPath, _ := profiledWindow(t, cfg, []int{10, 10}, []int{6, 6})
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the gzip header is cut: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != io.ErrUnexpectedEOF || !bytes.HasPrefix(bytes.TrimSpace(b), []byte(`{`)) {
		t.Fatalf("read %d bytes, error %v", len(b), err)
	}
	tb, _ := os.ReadFile(truthPath)
	if len(readTruth(t, tb)) == 0 {
		t.Fatal("no ground truth")
	}
	bad := fastConfig()
	bad.Faults.ProfileTruncatedTrace = "zip"
	if err := bad.Validate(); err == nil {
		t.Fatal("a bad fault-profile-truncated-trace validated")
	}
}

// TestProfilerTruncatedTrace: the json fault's trace is a complete gzip stream whose JSON
// stops in the middle of an event's ts; its ground truth is whole.
func TestProfilerTruncatedTrace(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.ProfileTruncatedTrace = TruncateJSON
	trace, truthPath, _ := profiledWindow(t, cfg, []int{10, 10}, []int{6, 6})
	b := readGz(t, trace)
	var v any
	if err := json.Unmarshal(b, &v); err == nil || !strings.Contains(err.Error(), "unexpected end of JSON input") {
		t.Fatalf("a truncated trace decoded: %v", err)
	}
	if !regexp.MustCompile(`"ts": \d\d$`).Match(b) || !bytes.Contains(b, []byte(`"traceEvents": [`)) {
		t.Fatalf("cut elsewhere than inside an event's ts: ...%q", b[max(len(b)-80, 0):])
	}
	tb, _ := os.ReadFile(truthPath)
	truth := readTruth(t, tb)
	if len(truth) == 0 {
		t.Fatal("no ground truth")
	}
	var full bytes.Buffer
	k := KinetoTrace{}
	var steps []Step
	for _, st := range truth {
		steps = append(steps, Step{StartNs: st.StartNs, EndNs: st.EndNs, ContextRequests: st.ContextRequests, ContextTokens: st.ContextTokens, GenerationRequests: st.GenerationRequests, GenerationTokens: st.GenerationTokens})
	}
	if err := k.Write(&full, StepsOf(steps), nil); err != nil {
		t.Fatal(err)
	}
	if len(b) < full.Len()/3 || len(b) > full.Len()*2/3 {
		t.Fatalf("cut at %d of about %d bytes", len(b), full.Len())
	}
}

// TestStepRecorderLimit: past its limit a window counts steps instead of keeping them.
func TestStepRecorderLimit(t *testing.T) {
	r := stepRecorder{active: true, limit: 2}
	for i := range 5 {
		r.add(Step{StartNs: int64(i)})
	}
	if len(r.steps) != 2 || r.dropped != 3 || r.steps[1].StartNs != 1 {
		t.Fatalf("%+v", r)
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
