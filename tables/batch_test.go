package tables

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// stepAt is an imported step of rank (nil: none) in file, host interval [startMS, endMS]
// from t0, GPU busy busyUS µs, with the annotation's counts.
func stepAt(rank *int64, file string, idx, startMS, endMS, busyUS, ctxReq, ctxTok, genReq, genTok int64) *artifact.Iteration {
	return &artifact.Iteration{Rank: rank, TraceFile: file, StepIndex: idx, StartNS: t0 + startMS*1_000_000, EndNS: t0 + endMS*1_000_000,
		GPUBusyNS: busyUS * 1000, ContextRequests: &ctxReq, ContextTokens: &ctxTok, GenRequests: &genReq, GenTokens: &genTok,
		Name: fmt.Sprintf("execute_context_%d(%d)_generation_%d(%d)", ctxReq, ctxTok, genReq, genTok), Source: artifact.IterationVLLM}
}

// batchRun is smallRun (first arrival t0) with three steps of rank 0 (prefill, decode,
// mixed; gaps of 1 and 3 ms), two back-to-back decode steps of rank 1, given out of order,
// and scrapes of engine 0 at 16 ms (waiting 1, running 2, KV 0.25) and 18 ms (0, 2, 0.5)
// and of engine 1 at 5 ms (0, 1, 0.1).
func batchRun() []artifact.Record {
	r0, r1 := artifact.Ptr(int64(0)), artifact.Ptr(int64(1))
	recs := smallRun()
	return append(recs,
		stepAt(r1, "r1.json", 1, 12, 13, 900, 0, 0, 1, 1),
		stepAt(r0, "r0.json", 0, 10, 14, 3500, 2, 300, 0, 0),
		stepAt(r0, "r0.json", 1, 15, 17, 1250, 0, 0, 2, 2),
		stepAt(r0, "r0.json", 2, 20, 23, 2600, 1, 100, 2, 2),
		stepAt(r1, "r1.json", 0, 11, 12, 800, 0, 0, 1, 1),
		scrapeAt(16, map[string][3]float64{"0": {1, 2, 0.25}}),
		scrapeAt(18, map[string][3]float64{"0": {0, 2, 0.5}}),
		scrapeAt(5, map[string][3]float64{"1": {0, 1, 0.1}}),
	)
}

// TestTablesBatchFilesGolden pins the per-batch files of batchRun. Each value by hand:
// throughput = tokens / busy (300/0.0035 = 85714.2857…, 2/0.00125 = 1600, 102/0.0026 =
// 39230.769…, 1/0.0008, 1/0.0009); 0.00125 is slightly above its decimal, so %.4f rounds
// it up; the inter-batch delay is start − previous end (none for a file's first step); the
// KV ratio is the engine's scrape nearest the step's end (17 ms is 1 ms from both engine-0
// scrapes: the earlier). Rank 0's gap 17–20 ms is queued until the 18 ms scrape (waiting 1
// at 16 ms), then idle; its first busy rows precede every scrape of engine 0 (empty depths).
// State times: busy 4+2+3 ms, queued 1, idle 1+2 → utilization 9/13; idle gaps 1 and 3 ms
// → median 2 ms, p95 1 + 0.95·2 = 2.9 ms; mean waiting over the scrapes in 10–23 ms is 0.5;
// mean batch size (2+2+3)/3.
func TestTablesBatchFilesGolden(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, batchRun())
	want := map[string]string{
		WorkerBatchMetricsFile: "worker_id,worker_type,batch_id,batch_num_tokens,batch_prompt_len,batch_gen_len,batch_size,batch_execution_time," +
			"batch_token_throughput,inter_batch_delay,batch_phase,kv_page_utilization_ratio,batch_wall_time\n" +
			"0,engine,0,300,300,0,2,0.0035,85714.2857,,prefill,0.2500,0.0040\n" +
			"0,engine,1,2,0,2,2,0.0013,1600.0000,0.0010,decode,0.2500,0.0020\n" +
			"0,engine,2,102,100,2,3,0.0026,39230.7692,0.0030,mixed,0.5000,0.0030\n" +
			"1,engine,0,1,0,1,1,0.0008,1250.0000,,decode,0.1000,0.0010\n" +
			"1,engine,1,1,0,1,1,0.0009,1111.1111,0.0000,decode,0.1000,0.0010\n",
		WorkerTimelineFile: "worker_id,worker_type,state,start_time,end_time,duration_s,queue_depth_waiting,queue_depth_active\n" +
			"0,engine,busy,0.0100,0.0140,0.0040,,\n" +
			"0,engine,idle,0.0140,0.0150,0.0010,,\n" +
			"0,engine,busy,0.0150,0.0170,0.0020,,\n" +
			"0,engine,queued,0.0170,0.0180,0.0010,1.0000,2.0000\n" +
			"0,engine,idle,0.0180,0.0200,0.0020,0.0000,2.0000\n" +
			"0,engine,busy,0.0200,0.0230,0.0030,0.0000,2.0000\n" +
			"1,engine,busy,0.0110,0.0120,0.0010,0.0000,1.0000\n" +
			"1,engine,busy,0.0120,0.0130,0.0010,0.0000,1.0000\n",
		WorkerStateTimeFile: "worker_id,worker_type,worker_label,state,duration_s\n" +
			"0,engine,0/engine,busy_time_s,0.0090\n1,engine,1/engine,busy_time_s,0.0020\n" +
			"0,engine,0/engine,queued_time_s,0.0010\n1,engine,1/engine,queued_time_s,0.0000\n" +
			"0,engine,0/engine,idle_time_s,0.0030\n1,engine,1/engine,idle_time_s,0.0000\n" +
			"0,engine,0/engine,draining_time_s,0.0000\n1,engine,1/engine,draining_time_s,0.0000\n",
		WorkerUtilizationFile: "worker_id,worker_type,worker_label,utilization_ratio\n" +
			"0,engine,0/engine,0.6923\n1,engine,1/engine,1.0000\n",
		WorkerIdleSummaryFile: "worker_id,worker_type,worker_label,num_idle_gaps,p50_idle_gap_s,p95_idle_gap_s,mean_waiting_queue_depth,mean_active_batch_size\n" +
			"0,engine,0/engine,2,0.0020,0.0029,0.5000,2.3333\n1,engine,1/engine,0,,,,1.0000\n",
		WorkerPhaseTotalsFile: "worker_id,batch_phase,execution_time_s\n" +
			"0,prefill,0.003500\n0,decode,0.001250\n0,mixed,0.002600\n1,prefill,0.000000\n1,decode,0.001700\n1,mixed,0.000000\n",
	}
	for name, w := range want {
		if got := readFile(t, filepath.Join(dir, name)); got != w {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, w)
		}
	}
	// The per-worker CDF of the execution time: 101 rows per worker, the sketch's value of
	// each quantile (ddValue of the order statistic).
	lines := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, batchCDFFile("batch_execution_time"))), "\n"), "\n")
	if len(lines) != 1+2*WorkerCDFRows || lines[0] != "cdf,batch_execution_time,worker_id" {
		t.Fatalf("execution time CDF: %d lines, header %q", len(lines), lines[0])
	}
	for _, c := range []struct {
		line int
		q    float64
		vals []float64
		id   string
	}{{1, 0, []float64{0.00125, 0.0026, 0.0035}, "0"}, {101, 1, []float64{0.00125, 0.0026, 0.0035}, "0"},
		{51, 0.5, []float64{0.00125, 0.0026, 0.0035}, "0"}, {102, 0, []float64{0.0008, 0.0009}, "1"}, {202, 1, []float64{0.0008, 0.0009}, "1"}} {
		cells := strings.Split(lines[c.line], ",")
		v, err := strconv.ParseFloat(cells[1], 64)
		want := quantileOf(c.vals, c.q) // the sketch's own arithmetic differs in the last digits
		if err != nil || math.Abs(v-want) > 1e-12*want || cells[0] != Repr(c.q) || cells[2] != c.id {
			t.Errorf("line %d: %q, want value %v worker %s", c.line, lines[c.line], want, c.id)
		}
	}
	page := readFile(t, filepath.Join(dir, IndexFile))
	at := strings.Index(page, "<h2>batches</h2>")
	if at < 0 {
		t.Fatal("index.html has no batches group")
	}
	if b := page[at:]; !strings.Contains(b, "worker_timeline.png") ||
		!strings.Contains(b, "Per-worker CDF (101 quantiles) of the step&#39;s GPU busy time") || strings.Contains(b, whyNoSteps) {
		t.Error("index.html's batches group lacks the timeline picture or the execution-time caption, or says there are no steps")
	}
	m := readManifest(t, dir)
	if !m.Batches.Written || len(m.Batches.Files) != 13 || m.Batches.Steps != 5 || strings.Join(m.Batches.Workers, ",") != "0,1" || m.Batches.ClockSource != "same_host" {
		t.Errorf("manifest batches: %+v", m.Batches)
	}
	var left []string
	for _, c := range m.Batches.Columns {
		if !c.Written {
			left = append(left, c.Name)
		}
	}
	if strings.Join(left, ",") != "batch_num_unmasked_tokens,batch_decode_length_std,batch_sampling_time" {
		t.Errorf("columns left out: %v", left)
	}
}

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTablesBatchTimeline: each step is an X event on its engine's steps thread (engine 0
// is process 10, engine 1 process 11), at its host start and for its host duration, named
// by its annotation, with its counts as args.
func TestTablesBatchTimeline(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, batchRun())
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
		OtherData struct {
			Zero int64 `json:"time_zero_unix_ns"`
		} `json:"otherData"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, TimelineFile))), &tr); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" && e.Pid >= enginePIDBase && e.Tid == engineStepsTID {
			at := (tr.OtherData.Zero - t0 + int64(e.Ts*1000)) / 1_000_000
			got = append(got, fmt.Sprintf("%d@%dms+%gus:%s:%v", e.Pid, at, e.Dur, e.Name, e.Args["context_tokens"]))
		}
	}
	want := "10@10ms+4000us:execute_context_2(300)_generation_0(0):300 10@15ms+2000us:execute_context_0(0)_generation_2(2):0 " +
		"10@20ms+3000us:execute_context_1(100)_generation_2(2):100 11@11ms+1000us:execute_context_0(0)_generation_1(1):0 " +
		"11@12ms+1000us:execute_context_0(0)_generation_1(1):0"
	if strings.Join(got, " ") != want {
		t.Errorf("step events:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if m := readManifest(t, dir); !strings.HasPrefix(m.Timeline.Steps, "5 imported steps on 2 engines") {
		t.Errorf("timeline steps: %q", m.Timeline.Steps)
	}
}

// TestTablesBatchUnplaced: steps in a server clock domain with no clock alignment to the
// client's are not placed: no per-batch file, and the manifest and page say why.
func TestTablesBatchUnplaced(t *testing.T) {
	dir := t.TempDir()
	recs := batchRun()
	h := &artifact.ArtifactHeader{Context: artifact.Context{ClockDomain: "client/unix_epoch_ns", RunID: "r"}}
	for _, r := range recs {
		if it, ok := r.(*artifact.Iteration); ok {
			it.Context.ClockDomain = "gpuhost/unix_epoch_ns"
		}
	}
	writeTables(t, dir, append([]artifact.Record{h}, recs...))
	m := readManifest(t, dir)
	if m.Batches.Written || !strings.Contains(m.Batches.Why, "clock_alignment_required") {
		t.Errorf("batches: %+v", m.Batches)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, IndexFile)), "clock_alignment_required") {
		t.Error("index.html does not say why the batches are missing")
	}
	for _, f := range batchFiles {
		if fileExists(filepath.Join(dir, f)) {
			t.Errorf("%s written", f)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
