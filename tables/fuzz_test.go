package tables

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// FuzzTablesRecords feeds the Sink an infer.vllm_scrape line (decoded by
// artifact.DecodeMetricsScrape; an undecodable one is skipped, as the reader refuses it) and an
// infer.request line with arbitrary times, chunk gaps and span times: Close never panics,
// and writes a manifest that is JSON and a timeline that is JSON with only X, i, C and M
// events and no negative time or duration.
func FuzzTablesRecords(f *testing.F) {
	line, err := json.Marshal(scrapeAt(10, map[string][3]float64{"0": {1, 2, 0.5}}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(line, int64(0), int64(1e9), 40.0, 50.0, 10.0, int64(5e6), int64(9e8), 0.1)
	f.Add([]byte(`{"event_type":"infer.vllm_scrape"}`), int64(-5), int64(-9e18), -1.0, 1e300, -3.0, int64(9e18), int64(-9e18), -1.0)
	f.Fuzz(func(t *testing.T, scrape []byte, start, end int64, firstByte, ttft, gap float64, spanStart, spanEnd int64, queue float64) {
		dir := t.TempDir()
		s := New(dir)
		s.noPictures = true
		r := req("a", artifact.PhaseMeasured, artifact.RequestOK, 0, 100, 10, 3, artifact.TokenSourceServerUsage, trace('a'))
		r.StartedAtNS, r.EndedAtNS = artifact.Ptr(t0+start), artifact.Ptr(t0+end)
		r.FirstChunkLatencyMS, r.TTFTMS, r.ChunkInterarrivalMS = &firstByte, &ttft, []float64{gap, gap}
		sp := span(trace('a'), "a000000000000001", queue, queue, queue)
		sp.StartUnixNS, sp.EndUnixNS = artifact.Ptr(t0+spanStart), artifact.Ptr(t0+spanEnd)
		recs := []artifact.Record{r, sp}
		if sc, err := artifact.DecodeMetricsScrape(scrape); err == nil {
			recs = append(recs, &sc)
		}
		for _, rec := range recs {
			if err := s.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var m Manifest
		if b, err := os.ReadFile(filepath.Join(dir, ManifestFile)); err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("manifest: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(dir, TimelineFile))
		if err != nil {
			t.Fatal(err)
		}
		var tf traceFile
		if err := json.Unmarshal(b, &tf); err != nil {
			t.Fatalf("timeline is not JSON: %v", err)
		}
		for _, e := range tf.TraceEvents {
			switch e.Ph {
			case "X", "i", "C", "M":
			default:
				t.Fatalf("ph %q", e.Ph)
			}
			if (e.Dur != nil && *e.Dur < 0) || (e.Ts != nil && *e.Ts < 0) {
				t.Fatalf("negative duration %+v", e)
			}
		}
	})
}

// FuzzTablesSteps feeds the Sink a measured request and two imported steps (infer.iteration
// JSON lines, the second of a rank and times from the arguments; an undecodable line is
// skipped) with scrapes of engine 0: Close never panics, the manifest is JSON, every step is
// a worker_batch_metrics.csv row when the batches are written, and the timeline has no
// negative time or duration.
func FuzzTablesSteps(f *testing.F) {
	line, err := json.Marshal(stepAt(artifact.Ptr(int64(0)), "r0", 0, 10, 14, 3500, 2, 300, 0, 0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(line, int64(0), int64(15e6), int64(17e6), int64(1250e3), int64(2))
	f.Add([]byte(`{"start_ns":-9000000000000000000,"end_ns":9000000000000000000,"rank":-3}`), int64(7), int64(9e18), int64(-9e18), int64(-1), int64(-5))
	f.Fuzz(func(t *testing.T, step []byte, rank, start, end, busy, gen int64) {
		dir := t.TempDir()
		s := New(dir)
		s.noPictures = true
		recs := []artifact.Record{req("a", artifact.PhaseMeasured, artifact.RequestOK, 0, 100, 10, 3, artifact.TokenSourceServerUsage, trace('a')),
			scrapeAt(12, map[string][3]float64{"0": {1, 2, 0.5}}), scrapeAt(16, map[string][3]float64{"0": {0, 1, 0.25}}),
			&artifact.Iteration{Rank: &rank, TraceFile: "r0", StepIndex: 1, StartNS: t0 + start, EndNS: t0 + end, GPUBusyNS: busy, GenRequests: &gen, GenTokens: &gen}}
		var it artifact.Iteration
		n := 1
		if json.Unmarshal(step, &it) == nil {
			recs, n = append(recs, &it), 2
		}
		for _, rec := range recs {
			if err := s.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var m Manifest
		if b, err := os.ReadFile(filepath.Join(dir, ManifestFile)); err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("manifest: %v", err)
		}
		if m.Batches.Written {
			b, err := os.ReadFile(filepath.Join(dir, WorkerBatchMetricsFile))
			if err != nil {
				t.Fatal(err)
			}
			if rows := len(strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")) - 1; rows != n || m.Batches.Steps != n {
				t.Fatalf("%d rows, manifest %d steps, want %d", rows, m.Batches.Steps, n)
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, TimelineFile))
		if err != nil {
			t.Fatal(err)
		}
		var tf traceFile
		if err := json.Unmarshal(b, &tf); err != nil {
			t.Fatalf("timeline is not JSON: %v", err)
		}
		for _, e := range tf.TraceEvents {
			if (e.Dur != nil && *e.Dur < 0) || (e.Ts != nil && *e.Ts < 0) {
				t.Fatalf("negative time %+v", e)
			}
		}
	})
}
