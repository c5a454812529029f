package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// runCLI runs the command line in-process (run from main.go) and returns its exit code and
// what it wrote to stdout and stderr. Tests using it must not run in parallel.
// It runs testArgs(args).
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	args = testArgs(args)
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	func() {
		defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
		code = execute(args)
	}()
	_ = outF.Close()
	_ = errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

func mustLine(t *testing.T, rec any) string {
	t.Helper()
	b, err := artifact.MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	sec = int64(1_000_000_000)
	t0  = 1_700_000_000 * sec
)

// sloArtifact is the SLO example as a fixed-rate run: 4 requests at 4/s (scheduled
// window exactly 1 s), TTFTs 100, 300 and 150 ms and one timeout, e2e 400, 600, 500 ms, 10
// output tokens each. The policy ttft:200 meets 2 of 4: attainment 0.5, goodput 2.0 req/s.
// statuses, when given, replaces the four statuses.
func sloArtifact(t *testing.T, statuses ...string) (lines []string, workload *artifact.Workload) {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []string{"ok", "ok", "ok", "timeout"}
	}
	caseID := "fixed4_in64_out10"
	wl := &artifact.Workload{SessionID: "s1", Seed: 5, Generator: artifact.Generator{Name: "inferprobe.synthetic", Version: 1},
		Cases:       []artifact.WorkloadCase{{CaseID: caseID, InputTokens: 64, OutputTokens: 10, Arrival: artifact.ArrivalSpec{Mode: "fixed-rate", RatePerSecond: artifact.Ptr(4.0)}}},
		Measurement: artifact.Measurement{RequestCount: artifact.Ptr(int64(4)), MaxInFlight: artifact.Ptr(int64(8)), Overflow: artifact.Ptr("wait"), TimeoutSeconds: 1, DrainTimeoutSeconds: 1}}
	d, err := wl.TrafficDigest()
	if err != nil {
		t.Fatal(err)
	}
	wl.WorkloadDigest = d
	lines = append(lines,
		mustLine(t, &artifact.Session{SessionID: "s1", TimestampNS: t0, Status: artifact.StatusRunning}),
		mustLine(t, artifact.NewArtifactHeader("run1", "s1", "test", t0, artifact.Host{Name: "h"}, 1)),
		mustLine(t, wl))
	ttfts := []float64{100, 300, 150, 0}
	e2es := []float64{400, 600, 500, 1000}
	for i, status := range statuses {
		at := t0 + int64(i)*sec/4
		id := fmt.Sprintf("%s_measured_0_%d", caseID, i)
		r := &artifact.Request{SessionID: "s1", RequestID: id, CaseID: caseID, Phase: "measured", Status: status,
			TimestampNS: artifact.Ptr(at), StartedAtNS: artifact.Ptr(at), EndedAtNS: artifact.Ptr(at + int64(e2es[i]*1e6)),
			IntendedAtNS: artifact.Ptr(at), DispatchLagMS: artifact.Ptr(0.0), RequestIndex: artifact.Ptr(int64(i)),
			Stream: true, ArrivalMode: "fixed-rate", PromptMode: "repeat", MaxInFlight: artifact.Ptr(int64(8)),
			HeldForSlot: artifact.Ptr(false), InFlightAtDispatch: artifact.Ptr(int64(1)),
			XRequestID: artifact.Ptr("inferprobe-run1-" + id), E2ELatencyMS: artifact.Ptr(e2es[i]),
			PromptTokenSource: "server_usage", OutputTokenSource: "server_usage"}
		if status == "ok" {
			r.TTFTMS = artifact.Ptr(ttfts[i])
			r.OutputTokens, r.PromptTokens, r.TotalTokens = artifact.Ptr(int64(10)), artifact.Ptr(int64(64)), artifact.Ptr(int64(74))
			r.ChunkInterarrivalMS = []float64{10, 20}
		}
		lines = append(lines, mustLine(t, r))
	}
	lines = append(lines,
		mustLine(t, &artifact.PhaseWindow{SessionID: "s1", CaseID: caseID, Phase: "measured", ArrivalMode: "fixed-rate",
			StartedAtNS: artifact.Ptr(t0), WindowEndedAtNS: artifact.Ptr(t0 + 3*sec/4), DrainedAtNS: artifact.Ptr(t0 + 2*sec),
			ScheduledArrivals: artifact.Ptr(int64(4)), ScheduledEndpointOffsetNS: artifact.Ptr(sec)}),
		mustLine(t, &artifact.Session{SessionID: "s1", TimestampNS: t0 + 3*sec, Status: artifact.StatusCompleted}))
	return lines, wl
}

func joinLines(lines []string) string { return strings.Join(lines, "\n") + "\n" }

func TestAnalyzeExitCodes(t *testing.T) {
	good, _ := sloArtifact(t)
	goodPath := writeFile(t, "good.jsonl", joinLines(good))
	session := good[0]
	request := good[3]
	badSLO := `{"event_type":"infer.slo","schema_version":1,"session_id":"s1","slo":{"format":"stormlog.infer.slo","version":2}}`
	policy := `{"format":"stormlog.infer.slo","version":1,"name":"chat","criteria":[{"metric":"ttft","boundary":"client","max_ms":200}]}`
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string // substring of stderr
	}{
		{"missing artifact", []string{"analyze", filepath.Join(dir, "nope.jsonl")}, exitBadInput, "no such file"},
		{"empty artifact", []string{"analyze", writeFile(t, "empty.jsonl", "")}, exitBadInput, "empty.jsonl is empty: an inferprobe artifact holds JSONL records"},
		{"unparsable line", []string{"analyze", writeFile(t, "bad.jsonl", session+"\n{\"event_type\": oops}\n"+request+"\n")}, exitBadInput, "line 2"},
		{"non-object line", []string{"analyze", writeFile(t, "arr.jsonl", session+"\n[1,2,3]\n"+request+"\n")}, exitBadInput, "not a JSON object"},
		{"integer spelled as float", []string{"analyze", writeFile(t, "float.jsonl", session+"\n"+strings.Replace(request, `"request_index":0`, `"request_index":0.0`, 1)+"\n")}, exitBadInput, "request_index"},
		{"no session", []string{"analyze", writeFile(t, "nosession.jsonl", request+"\n")}, exitBadInput, "no infer.session"},
		{"no request", []string{"analyze", writeFile(t, "norequest.jsonl", session+"\n")}, exitBadInput, "no infer.request"},
		{"only v2 requests", []string{"analyze", writeFile(t, "v2.jsonl", session+"\n"+`{"event_type":"infer.request","schema_version":2}`+"\n")}, exitBadInput, "v2"},
		{"broken recorded slo", []string{"analyze", writeFile(t, "badslo.jsonl", joinLines(append([]string{badSLO}, good...)))}, exitBadInput, "infer.slo"},
		{"missing slo file", []string{"analyze", goodPath, "--slo-file", filepath.Join(dir, "none.json")}, exitBadInput, "SLO policy"},
		{"invalid slo file", []string{"analyze", goodPath, "--slo-file", writeFile(t, "p.json", `{"format":"stormlog.infer.slo","version":1,"name":"x","criteria":[],"extra":1}`)}, exitBadInput, "extra"},
		{"slo file version 2", []string{"analyze", goodPath, "--slo-file", writeFile(t, "p2.json", strings.Replace(policy, `"version":1`, `"version":2`, 1))}, exitBadInput, "version"},
		{"slo and slo-file", []string{"analyze", goodPath, "--slo", "ttft:200", "--slo-file", writeFile(t, "p3.json", policy)}, exitUsage, "mutually exclusive"},
		{"slo not a number", []string{"analyze", goodPath, "--slo", "ttft:fast"}, exitUsage, "not a number"},
		{"slo without limit", []string{"analyze", goodPath, "--slo", "ttft"}, exitUsage, "KEY:MS"},
		{"slo negative", []string{"analyze", goodPath, "--slo", "e2e:-5"}, exitUsage, "--slo"},
		{"slo unknown key", []string{"analyze", goodPath, "--slo", "latency:5"}, exitUsage, "--slo"},
		{"slo client itl", []string{"analyze", goodPath, "--slo", "itl:50"}, exitUsage, "chunks are not tokens"},
		{"slo repeated key", []string{"analyze", goodPath, "--slo", "ttft:50", "--slo", "client.ttft:60"}, exitUsage, "--slo"},
		{"unknown format", []string{"analyze", goodPath, "--format", "yaml"}, exitUsage, "--format"},
		{"no artifact argument", []string{"analyze"}, exitUsage, "requires at least 1 arg"},
		{"one artifact twice", []string{"analyze", goodPath, goodPath}, exitBadInput, "is given twice"},
		{"two unsharded artifacts", []string{"analyze", goodPath, filepath.Join(dir, "missing.jsonl")}, exitBadInput, "no such file"},
		{"unknown flag", []string{"analyze", goodPath, "--vllm-magic"}, exitUsage, "unknown flag"},
		{"empty output", []string{"analyze", goodPath, "--output", ""}, exitUsage, "--output"},
		{"unwritable output", []string{"analyze", goodPath, "--output", filepath.Join(dir, "no", "such", "dir", "r.json")}, exitUnexpected, "cannot write --output"},
		{"good", []string{"analyze", goodPath}, exitOK, ""},
		{"good with slo file", []string{"analyze", goodPath, "--slo-file", writeFile(t, "p4.json", policy), "--format", "json"}, exitOK, ""},
		{"every request failed", []string{"analyze", writeFile(t, "failed.jsonl", joinLines(func() []string { l, _ := sloArtifact(t, "error", "timeout", "dropped", "unreachable"); return l }()))}, exitOK, ""},
		{"broken recorded slo overridden", []string{"analyze", writeFile(t, "badslo2.jsonl", joinLines(append([]string{badSLO}, good...))), "--slo", "ttft:200"}, exitOK, "Warning: the flags policy cli replaces the artifact's infer.slo record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stderr, tc.err) {
				t.Fatalf("stderr %q does not contain %q", stderr, tc.err)
			}
			if tc.code != exitOK && stdout != "" {
				t.Fatalf("a failed analysis printed %q", stdout)
			}
			if tc.code == exitOK && !strings.Contains(stdout, "Total requests: 4") && !strings.Contains(stdout, `"total_requests": 4`) {
				t.Fatalf("no report on stdout: %q", stdout)
			}
		})
	}
}

func TestAnalyzeTextReport(t *testing.T) {
	lines, wl := sloArtifact(t)
	path := writeFile(t, "good.jsonl", joinLines(lines))
	code, stdout, stderr := runCLI(t, "analyze", path, "--slo", "ttft:200")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	caseID := wl.Cases[0].CaseID
	for _, want := range []string{
		"Inference Profile Analysis\n",
		"Total requests: 4\n",
		"Successful requests: 3\n",
		"Failed requests: 1 (timeout 1)\n",
		"Failure rate: 25.00%\n",
		fmt.Sprintf("Workload digest: %s (seed 5)\n", wl.WorkloadDigest),
		"SLO policy: cli (digest ",
		// TTFT p50 over [100, 300, 150] = 150; e2e p50 over [400, 600, 500] = 500, p95 at
		// rank 1.9 = 500 + 0.9·100 = 590; 3 successes and 30 tokens over the 1 s window.
		fmt.Sprintf("- %s: p50 E2E=500.00 ms [insufficient n=3<20], p95 E2E=590.00 ms [insufficient n=3<230], p50 TTFT=150.00 ms [insufficient n=3<20], output=30.00 tok/s, requests=3.00 req/s\n", caseID),
		// a 1.25 s drain after the 1 s window: the rates line says what they divide by
		"  rates per scheduled window of 1.00 s (arrival cohort); drain 1.25 s > window 1.00 s: the rates count the requests that finished during the drain but divide by the window alone\n",
		"  arrivals: fixed-rate, offered 4, sent 4, timeout 1, peak in flight 1, dispatch lag p95 0.00 ms, E2E-from-intended p95 ",
		// the example: met 2 of 4 → attainment 50%, goodput 2 req/s
		"  SLO cli: attainment 50.0% of 4 offered, goodput 2.00 req/s\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "Session status") {
		t.Error("a completed session is not mentioned")
	}
	// --output writes the same report to the file and says so.
	out := filepath.Join(t.TempDir(), "report.txt")
	code, stdout2, _ := runCLI(t, "analyze", path, "--slo", "ttft:200", "--output", out)
	if code != exitOK || stdout2 != "Analysis report saved to: "+out+"\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout2)
	}
	if saved, _ := os.ReadFile(out); string(saved) != stdout {
		t.Fatalf("saved report differs from the printed one:\n%s", saved)
	}
}

// keysSorted reports whether every object in the JSON text lists its keys in sorted order.
func keysSorted(t *testing.T, data []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object  bool
		lastKey string
		expect  bool // next string token in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, isStr := tok.(string); isStr && top != nil && top.object && top.expect {
			if top.lastKey != "" && k <= top.lastKey {
				t.Fatalf("key %q after %q: keys are not sorted", k, top.lastKey)
			}
			top.lastKey, top.expect = k, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true // a value ended: the next token is a key
		}
	}
}

func TestAnalyzeJSONReport(t *testing.T) {
	lines, wl := sloArtifact(t)
	// a recorded policy that the flags replace, and a last line cut short
	recorded := `{"event_type":"infer.slo","schema_version":1,"session_id":"s1","slo":{"format":"stormlog.infer.slo","version":1,"name":"recorded","criteria":[{"metric":"e2e","boundary":"client","max_ms":450}]}}`
	content := joinLines(append([]string{recorded}, lines...)) + `{"event_type":"infer.request","schema_version":1,"sess`
	path := writeFile(t, "good.jsonl", content)
	code, stdout, stderr := runCLI(t, "analyze", path, "--format", "json", "--slo", "ttft:200")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Warning: " + path + ": line 11 is truncated (54 bytes, no trailing newline); it was ignored",
		"Warning: the flags policy cli replaces the artifact's recorded policy recorded (digest ",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, stderr)
		}
	}
	if !strings.HasPrefix(stdout, "{\n  \"analysis_version\": 5,\n") || !strings.HasSuffix(stdout, "}\n") {
		t.Fatalf("not pretty-printed JSON starting with analysis_version 5:\n%.200s", stdout)
	}
	keysSorted(t, []byte(stdout))
	var rep struct {
		AnalysisVersion int `json:"analysis_version"`
		Summary         struct {
			TotalRequests      int            `json:"total_requests"`
			SuccessfulRequests int            `json:"successful_requests"`
			FailuresByStatus   map[string]int `json:"failures_by_status"`
			SessionStatus      string         `json:"session_status"`
		} `json:"summary"`
		SLO   struct{ Name, Source string } `json:"slo"`
		Cases map[string]struct {
			Population struct {
				Offered    int `json:"offered"`
				Successful int `json:"successful"`
				TimedOut   int `json:"timed_out"`
			} `json:"population"`
			SLO struct {
				Met             int     `json:"met"`
				AttainmentLower float64 `json:"attainment_lower"`
				AttainmentUpper float64 `json:"attainment_upper"`
				GoodputLowerRPS float64 `json:"goodput_lower_rps"`
			} `json:"slo"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Cases[wl.Cases[0].CaseID]
	if rep.AnalysisVersion != 5 || rep.Summary.TotalRequests != 4 || rep.Summary.SuccessfulRequests != 3 ||
		rep.Summary.FailuresByStatus["timeout"] != 1 || rep.Summary.SessionStatus != "completed" ||
		rep.SLO.Name != "cli" || rep.SLO.Source != "flags" {
		t.Fatalf("report %+v", rep)
	}
	if c.Population.Offered != 4 || c.Population.Successful != 3 || c.Population.TimedOut != 1 ||
		c.SLO.Met != 2 || c.SLO.AttainmentLower != 0.5 || c.SLO.AttainmentUpper != 0.5 || c.SLO.GoodputLowerRPS != 2 {
		t.Fatalf("case %+v", c)
	}
}

// TestAnalyzeArtifactReportHelper checks the helper the profile command calls.
func TestAnalyzeArtifactReportHelper(t *testing.T) {
	lines, wl := sloArtifact(t)
	path := writeFile(t, "good.jsonl", joinLines(lines))
	p, err := analyze.ParseSLOFlags([]string{"ttft:200"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyzeArtifactReport(path, analyze.Options{Policy: p, PolicySource: analyze.SourceFlags})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := analyze.RenderText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if c := rep.Cases[wl.Cases[0].CaseID]; c == nil || c.SLO == nil || c.SLO.Met != 2 || !strings.Contains(buf.String(), "SLO cli: attainment 50.0%") {
		t.Fatalf("report:\n%s", buf.String())
	}
	if _, err := analyzeArtifactReport(filepath.Join(t.TempDir(), "missing"), analyze.Options{}); err == nil {
		t.Fatal("a missing artifact must fail")
	}
}

// writeReportFile replaces a report through a temporary file: a symlink stays a symlink to
// the file it named, the old file's permissions stay, no temporary file is left, and a
// device is written in place. (A write cut short by a full disk leaving the old file as it
// was, and no temporary file, was checked by hand on a full tmpfs: a test cannot fill a
// filesystem here.)
// processUmask is this process's umask, read from /proc/self/status (setting it to read it
// would race with other tests' files); the usual 022 where that is not there.
func processUmask(t *testing.T) os.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o022
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatalf("umask %q: %v", v, err)
			}
			return os.FileMode(m)
		}
	}
	return 0o022
}

// A failed rename names the temporary file and the target: the message names the user's path.
func TestReportPathErrorNamesTheGivenPath(t *testing.T) {
	err := reportPathError("r.json", "r.json", &os.LinkError{Op: "rename", Old: ".r.json.tmp-abc", New: "r.json", Err: syscall.EPERM})
	if got := err.Error(); got != "r.json: operation not permitted" || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("%q", got)
	}
	err = reportPathError("l.json", "dir/r.json", &fs.PathError{Op: "open", Path: "dir/.r.json.tmp-abc", Err: syscall.ENOENT})
	if got := err.Error(); got != "l.json (the file its link names, dir/r.json): no such file or directory" {
		t.Fatalf("%q", got)
	}
}

func TestWriteReportFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := writeReportFile(path, []byte("report\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666&^processUmask(t) {
		t.Fatalf("new report: %v %v (want 0666 less the umask %#o)", fi, err, processUmask(t))
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := writeReportFile(link, []byte("second\n")); err != nil {
		t.Fatal(err)
	}
	if dest, err := os.Readlink(link); err != nil || dest != path {
		t.Fatalf("the symlink now names %q (%v)", dest, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "second\n" {
		t.Fatalf("%q %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want the old 0640", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("left in the directory: %v", entries)
	}
	missing := filepath.Join(dir, "no", "such", "r.json")
	if err := writeReportFile(missing, []byte("x")); err == nil || !strings.Contains(err.Error(), missing+": ") || strings.Contains(err.Error(), ".tmp-") {
		t.Fatalf("a report into a missing directory: %v (want an error naming %s, not the temporary file)", err, missing)
	}
	// A dangling link (relative, through a second link) names the file to create; the links stay.
	if err := os.Symlink("new.json", filepath.Join(dir, "dangling1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dangling1", filepath.Join(dir, "dangling2")); err != nil {
		t.Fatal(err)
	}
	if err := writeReportFile(filepath.Join(dir, "dangling2"), []byte("third\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new.json")); err != nil || string(b) != "third\n" {
		t.Fatalf("the file the dangling link names: %q %v", b, err)
	}
	for _, l := range []string{"dangling1", "dangling2"} {
		if fi, err := os.Lstat(filepath.Join(dir, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a link: %v %v", l, fi, err)
		}
	}
	// A link into a missing directory is an error naming both, and the link stays.
	into := filepath.Join(dir, "into-missing")
	if err := os.Symlink(missing, into); err != nil {
		t.Fatal(err)
	}
	if err := writeReportFile(into, []byte("x")); err == nil || !strings.Contains(err.Error(), into) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a link into a missing directory: %v", err)
	}
	if fi, err := os.Lstat(into); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link into a missing directory was replaced: %v %v", fi, err)
	}
	// A loop of links is an error, and nothing is written.
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	if err := writeReportFile(loop, []byte("x")); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Fatalf("a loop of links: %v", err)
	}
	if _, err := os.Stat("/dev/full"); err == nil {
		if err := writeReportFile("/dev/full", []byte("report\n")); err == nil {
			t.Fatal("a write to /dev/full succeeded")
		}
		if fi, err := os.Stat("/dev/full"); err != nil || fi.Mode().IsRegular() {
			t.Fatalf("/dev/full after the failed write: %v %v", fi, err)
		}
	}
}
