package tables

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// timelineRun: request a sent at t0+0 (first byte 40 ms, first token 50 ms, chunks 10 and
// 20 ms later, end at 200 ms) with a span from 5 to 195 ms (queue 0.02 s, prefill 0.03 s,
// decode 0.1 s); request b sent at t0+100 ms without a span; one scrape of engine "0" at
// t0−50 ms (the earliest event: time zero).
func timelineRun() []artifact.Record {
	a := req("a", artifact.PhaseMeasured, artifact.RequestOK, 0, 200, 10, 3, artifact.TokenSourceServerUsage, trace('a'))
	a.StartedAtNS, a.EndedAtNS = artifact.Ptr(t0), artifact.Ptr(t0+200_000_000)
	a.FirstChunkLatencyMS, a.TTFTMS, a.ChunkInterarrivalMS = artifact.Ptr(40.0), artifact.Ptr(50.0), []float64{10, 20}
	s := span(trace('a'), "a000000000000001", 0.02, 0.03, 0.1)
	s.StartUnixNS, s.EndUnixNS = artifact.Ptr(t0+5_000_000), artifact.Ptr(t0+195_000_000)
	b := req("b", artifact.PhaseMeasured, artifact.RequestOK, 100, 50, 10, 3, artifact.TokenSourceServerUsage, trace('b'))
	b.StartedAtNS, b.EndedAtNS = artifact.Ptr(t0+100_000_000), artifact.Ptr(t0+150_000_000)
	return []artifact.Record{&artifact.Session{SessionID: "s1"}, a, s, b,
		scrapeAt(-50, map[string][3]float64{"0": {2, 1, 0.5}})}
}

type traceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   *float64       `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	OtherData struct {
		TimeZero int64 `json:"time_zero_unix_ns"`
	} `json:"otherData"`
}

func TestTablesTimeline(t *testing.T) {
	dir := t.TempDir()
	writeTables(t, dir, timelineRun())
	b, err := os.ReadFile(filepath.Join(dir, TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	var tf traceFile
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("timeline.json is not JSON: %v", err)
	}
	if tf.OtherData.TimeZero != t0-50_000_000 {
		t.Errorf("time zero %d, want the scrape's %d", tf.OtherData.TimeZero, t0-50_000_000)
	}
	// Each event's (ts, dur) in µs from time zero (t0 − 50 ms), by thread and name.
	type key struct {
		tid  int
		name string
	}
	got := map[key][][2]float64{}
	threads := map[int]string{}
	for _, e := range tf.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				threads[e.Tid] = e.Args["name"].(string)
			}
			continue
		case "X", "i", "C":
		default:
			t.Fatalf("event %+v: ph %q", e, e.Ph)
		}
		if e.Ts == nil || *e.Ts < 0 || (e.Ph == "X" && (e.Dur == nil || *e.Dur < 0)) {
			t.Fatalf("event %+v: a missing or negative ts or dur", e)
		}
		d := 0.0
		if e.Dur != nil {
			d = *e.Dur
		}
		got[key{e.Tid, e.Name}] = append(got[key{e.Tid, e.Name}], [2]float64{*e.Ts, d})
	}
	want := map[key][][2]float64{
		{1, "request"}:                   {{50_000, 200_000}},
		{1, "to first byte"}:             {{50_000, 40_000}},
		{1, "first byte"}:                {{90_000, 0}},
		{1, "first byte to first token"}: {{90_000, 10_000}},
		{1, "first token (TTFT)"}:        {{100_000, 0}},
		{1, "chunk"}:                     {{110_000, 0}, {130_000, 0}},
		{2, "vLLM llm_request span"}:     {{55_000, 190_000}},
		{2, "queue"}:                     {{95_000, 20_000}},
		{2, "prefill"}:                   {{115_000, 30_000}},
		{2, "decode"}:                    {{145_000, 100_000}},
		{3, "request"}:                   {{150_000, 50_000}},
		{0, "queue_depth_waiting"}:       {{0, 0}},
	}
	for k, w := range want {
		g := got[k]
		if len(g) != len(w) {
			t.Errorf("%v: %v, want %v", k, g, w)
			continue
		}
		for i := range w {
			if math.Abs(g[i][0]-w[i][0]) > 0.001 || math.Abs(g[i][1]-w[i][1]) > 0.001 {
				t.Errorf("%v: %v, want %v", k, g, w)
			}
		}
	}
	if threads[1] != "a client" || threads[2] != "a server (vLLM span)" || threads[3] != "b client" || threads[4] != "" {
		t.Errorf("threads %v", threads)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ManifestFile))), &m); err != nil {
		t.Fatal(err)
	}
	if tl := m.Timeline; tl.Requests != 2 || tl.ServerSpans != 1 || tl.Engines != 1 || tl.LeftOut != 0 || tl.File != TimelineFile {
		t.Errorf("timeline entry %+v", tl)
	}
}
