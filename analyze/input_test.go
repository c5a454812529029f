package analyze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// referenceInput is the sequential reading ReadInput must reproduce: one artifact.Reader pass
// filing records as artifact.ReadFileContext does, then NewInput (without the requests
// kept in Artifact.Requests).
func referenceInput(t testing.TB, r io.Reader, path string, maxLine int) (*Input, error) {
	a := &artifact.Artifact{Path: path}
	st, err := artifact.Reader{MaxLineBytes: maxLine}.Read(r, func(rec artifact.Line) error {
		switch v := rec.Value.(type) {
		case *artifact.Request:
			a.Requests = append(a.Requests, *v)
		default:
			it := blockItem{value: rec.Value, line: rec.Line, kind: rec.Kind, raw: bytes.Clone(rec.Raw)}
			return keep(a, &it)
		}
		return nil
	})
	a.Stats, a.Truncated = st, st.Truncated
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in := NewInput(a)
	a.Requests = nil
	return in, nil
}

func sameInput(t testing.TB, label string, got, want *Input, gotErr, wantErr error) {
	t.Helper()
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%s: error %v, want %v", label, gotErr, wantErr)
	}
	if gotErr != nil {
		if !errors.Is(gotErr, artifact.ErrInvalidArtifact) {
			t.Fatalf("%s: %v does not match ErrInvalidArtifact", label, gotErr)
		}
		return
	}
	if got.RequestRecords != want.RequestRecords {
		t.Fatalf("%s: %d request records, want %d", label, got.RequestRecords, want.RequestRecords)
	}
	if !reflect.DeepEqual(got.Artifact, want.Artifact) {
		t.Fatalf("%s: artifact\n got %+v\nwant %+v", label, got.Artifact, want.Artifact)
	}
	got.Cases = unpacked(got.Cases)
	if !reflect.DeepEqual(got.Cases, want.Cases) {
		for id := range want.Cases {
			for i := range want.Cases[id] {
				if i < len(got.Cases[id]) && !reflect.DeepEqual(got.Cases[id][i], want.Cases[id][i]) {
					t.Fatalf("%s: case %s request %d\n got %+v\nwant %+v", label, id, i, got.Cases[id][i], want.Cases[id][i])
				}
			}
		}
		t.Fatalf("%s: cases differ (%d vs %d)", label, len(got.Cases), len(want.Cases))
	}
	if !reflect.DeepEqual(got.Warmup, want.Warmup) {
		t.Fatalf("%s: warmup join keys\n got %+v\nwant %+v", label, got.Warmup, want.Warmup)
	}
}

// unpacked is cases with every request's chunk gaps back in ChunkInterarrivalMS (Record).
func unpacked(cases map[string][]Request) map[string][]Request {
	out := map[string][]Request{}
	for id, rs := range cases {
		list := make([]Request, len(rs))
		for i := range rs {
			list[i] = Request{Request: *rs[i].Record(), Span: rs[i].Span, SpanMissingReason: rs[i].SpanMissingReason, ServerAdmitted: rs[i].ServerAdmitted}
		}
		out[id] = list
	}
	return out
}

// fullRequest is an infer.request v1 record with every field set to a non-zero value: each
// string "<field>", each number 7, each bool true, the chunk gaps [1.5, 2.5], and
// XRequestID ending in "-<request_id>".
func fullRequest(t testing.TB) *artifact.Request {
	r := &artifact.Request{}
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString(name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]float64{1.5, 2.5}))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			switch p.Elem().Kind() {
			case reflect.String:
				p.Elem().SetString(name)
			case reflect.Bool:
				p.Elem().SetBool(true)
			case reflect.Int64:
				p.Elem().SetInt(7)
			case reflect.Float64:
				p.Elem().SetFloat(7)
			default:
				t.Fatalf("field %s: unexpected type %s", name, f.Type())
			}
			f.Set(p)
		default:
			t.Fatalf("field %s: unexpected type %s", name, f.Type())
		}
	}
	r.XRequestID = ps("inferprobe-run-" + r.RequestID)
	return r
}

// The streaming reader's packed copy of a record is the record, field for field, and shares
// none of its memory; TimestampNS shares StartedAtNS only when they are equal.
func TestPackedRecordEqualsTheRecord(t *testing.T) {
	var p packer
	r := fullRequest(t)
	got := p.record(r)
	if !reflect.DeepEqual(&got, r) {
		t.Fatalf("packed record\n got %+v\nwant %+v", got, *r)
	}
	if got.StartedAtNS == r.StartedAtNS || got.TTFTMS == r.TTFTMS || got.HeldForSlot == r.HeldForSlot || &got.ChunkInterarrivalMS[0] == &r.ChunkInterarrivalMS[0] {
		t.Error("the packed record shares memory with the decoded one")
	}
	if got.TimestampNS != got.StartedAtNS || got.RequestID != "RequestID" {
		t.Errorf("timestamp %p started %p request id %q: equal times share one value", got.TimestampNS, got.StartedAtNS, got.RequestID)
	}
	r.TimestampNS = p64(8)
	if got := p.record(r); got.TimestampNS == got.StartedAtNS || *got.TimestampNS != 8 || *got.StartedAtNS != 7 {
		t.Errorf("timestamp %d started %d: different times are two values", *got.TimestampNS, *got.StartedAtNS)
	}
	r.ChunkInterarrivalMS, r.HeldForSlot, r.TimestampNS = []float64{}, nil, nil
	if got := p.record(r); got.ChunkInterarrivalMS == nil || len(got.ChunkInterarrivalMS) != 0 || got.HeldForSlot != nil || got.TimestampNS != nil {
		t.Errorf("empty gaps %v, held %v, timestamp %v: [] stays [] and null stays null", got.ChunkInterarrivalMS, got.HeldForSlot, got.TimestampNS)
	}
}

func line(t testing.TB, rec any) string {
	b, err := artifact.MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// richArtifact is a valid artifact exercising every path of the reader: both sessions,
// repeated header and workload records, an SLO, cache states, warmup and measured windows
// and requests in two cases (with, without and with empty chunk gaps), a v2 request, an
// unknown kind, blank and CRLF lines and leading whitespace.
func richArtifact(t testing.TB) string {
	wl := &artifact.Workload{SessionID: "s1", Seed: 3, Measurement: artifact.Measurement{RequestCount: p64(3)},
		Cases: []artifact.WorkloadCase{{CaseID: "c1", Arrival: artifact.ArrivalSpec{Mode: "poisson", RatePerSecond: pf(5)}}}}
	var b strings.Builder
	add := func(s string) { b.WriteString(s); b.WriteByte('\n') }
	add(line(t, &artifact.Session{SessionID: "s1", TimestampNS: 1, Status: artifact.StatusRunning}))
	add(line(t, artifact.NewArtifactHeader("run", "s1", "dev", 1, artifact.Host{Name: "h"}, 7)))
	add(line(t, wl))
	add(line(t, &artifact.SLORecord{SessionID: "s1", SLO: []byte(`{"format":"stormlog.infer.slo","version":1,"name":"x","criteria":[{"metric":"ttft","boundary":"client","max_ms":100}]}`)}))
	add("")
	add(line(t, &artifact.CacheState{SessionID: "s1", CaseID: "c1", Requested: "unspecified", Verified: "unverified"}))
	for i := 0; i < 7; i++ {
		for _, c := range []string{"c1", "c2"} {
			phase := artifact.PhaseMeasured
			if i < 2 {
				phase = artifact.PhaseWarmup
			}
			id := fmt.Sprintf("%s_%s_0_%d", c, phase, i)
			r := &artifact.Request{SessionID: "s1", RequestID: id, CaseID: c, Phase: phase, Status: artifact.RequestOK,
				StartedAtNS: p64(int64(100 + i)), EndedAtNS: p64(int64(200 + i)), RequestIndex: p64(int64(i)),
				E2ELatencyMS: pf(float64(i) + 0.5), Stream: true, ArrivalMode: "poisson", PromptMode: "unique",
				PromptDigest: ps(strings.Repeat(fmt.Sprint(i%10), 64)), OutputTokens: p64(4), OutputTokenSource: "server_usage",
				HeldForSlot: artifact.Ptr(i%2 == 0), InFlightAtDispatch: p64(int64(i % 3))}
			switch i % 3 {
			case 0:
				r.ChunkInterarrivalMS = []float64{1.5, 2.25, 3}
				r.TTFTMS = pf(12.5)
				r.XRequestID = ps("inferprobe-run-" + id)
			case 1:
				r.ChunkInterarrivalMS = []float64{}
				r.XRequestID = ps("other-id-" + fmt.Sprint(i))
				r.Status = artifact.RequestTimeout
			}
			add(line(t, r))
		}
		if i == 3 {
			add("   " + line(t, &artifact.PhaseWindow{SessionID: "s1", CaseID: "c1", Phase: artifact.PhaseWarmup}) + "\r")
			add(`{"event_type":"infer.request","schema_version":2,"request_id":"v2"}`)
			add(`{"event_type":"something.new","schema_version":9,"x":[1,2]}`)
			add(line(t, artifact.NewArtifactHeader("run2", "s1", "dev", 2, artifact.Host{Name: "h"}, 8)))
			add(line(t, wl))
		}
	}
	add(line(t, &artifact.PhaseWindow{SessionID: "s1", CaseID: "c1", Phase: artifact.PhaseMeasured, ArrivalMode: "poisson",
		StartedAtNS: p64(90), WindowEndedAtNS: p64(150), DrainedAtNS: p64(300), ScheduledArrivals: p64(5)}))
	add("")
	add(line(t, &artifact.Session{SessionID: "s1", TimestampNS: 9, Status: artifact.StatusCompleted}))
	return b.String()
}

func TestReadInputMatchesSequentialRead(t *testing.T) {
	rich := richArtifact(t)
	lines := strings.SplitAfter(rich, "\n")
	mid := len(lines) / 2
	withLine := func(bad string) string {
		return strings.Join(lines[:mid], "") + bad + "\n" + strings.Join(lines[mid:], "")
	}
	inputs := map[string]string{
		"rich":                rich,
		"truncated last line": rich + `{"event_type":"infer.request","schema_version":1,"session_id":"s1","req`,
		"no final newline":    strings.TrimSuffix(rich, "\n"),
		"integer as float":    withLine(`{"event_type":"infer.request","schema_version":1,"request_index":1.0}`),
		"non-object line":     withLine(`[1,2]`),
		"invalid json":        withLine(`{"event_type":`),
		"long line":           withLine(`{"event_type":"x","schema_version":1,"pad":"` + strings.Repeat("p", 3000) + `"}`),
		"long last line":      rich + strings.Repeat("q", 5000),
		"empty":               "",
		"only blanks":         "\n\n  \n",
		"first line bad":      "nope\n" + rich,
		"span contexts":       rich + spanLines(t, false),
		"unknown context":     rich + spanLines(t, true),
		"context redefined": rich + spanLines(t, false) +
			`{"event_type":"infer.vllm_span_context","schema_version":1,"context_id":"` + spanContextID(t) + `","resource":{},"scope":{}}` + "\n",
	}
	for name, data := range inputs {
		for _, maxLine := range []int{0, 2048} {
			want, wantErr := referenceInput(t, strings.NewReader(data), "a.jsonl", maxLine)
			for _, bs := range []int{1, 7, 300, 4096, 1 << 20} {
				for _, workers := range []int{1, 2, 3} {
					got, gotErr := readFrom(context.Background(), strings.NewReader(data), "a.jsonl", readOptions{blockBytes: bs, workers: workers, maxLineBytes: maxLine})
					sameInput(t, fmt.Sprintf("%s max %d block %d workers %d", name, maxLine, bs, workers), got, want, gotErr, wantErr)
				}
			}
		}
	}
	// The reference is what artifact.ReadFile + NewInput give, and ReadInput reads files.
	path := filepath.Join(t.TempDir(), "rich.jsonl")
	if err := os.WriteFile(path, []byte(rich), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := NewInput(a)
	if want.RequestRecords != 14 || len(want.Cases["c1"]) != 5 || len(want.Cases["c2"]) != 5 || len(a.Others) != 4 {
		t.Fatalf("rich artifact: %d requests, cases %d/%d, others %d", want.RequestRecords, len(want.Cases["c1"]), len(want.Cases["c2"]), len(a.Others))
	}
	a.Requests = nil
	got, err := ReadInput(context.Background(), path)
	if err != nil || got.Cases["c1"][1].gapNS == nil || got.Cases["c1"][1].ChunkInterarrivalMS != nil {
		t.Fatalf("ReadInput (%v): the gaps [1.5 2.25 3] are not packed: %+v", err, got.Cases["c1"][1])
	}
	records, err := ReadInputRecords(context.Background(), path)
	for _, r := range records.Cases["c1"] {
		if r.gapNS != nil || r.Record() != &r.Request {
			t.Fatalf("ReadInputRecords: packed gaps %v", r.ChunkGapsMS())
		}
	}
	sameInput(t, "records", records, want, err, nil)
	sameInput(t, "file", got, want, err, nil)
	// requests were packed: RequestID shares the tail of an inferprobe x_request_id
	r0 := got.Cases["c1"][1]
	if r0.RequestID != "c1_measured_0_3" || *r0.XRequestID != "inferprobe-run-c1_measured_0_3" {
		t.Fatalf("second measured request %q %q", r0.RequestID, *r0.XRequestID)
	}
}

func TestReadInputErrors(t *testing.T) {
	_, err := ReadInput(context.Background(), filepath.Join(t.TempDir(), "missing.jsonl"))
	if !errors.Is(err, artifact.ErrInvalidArtifact) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	rich := richArtifact(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readFrom(ctx, strings.NewReader(rich), "a", readOptions{blockBytes: 64}); !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "a:") {
		t.Fatalf("cancelled: %v", err)
	}
	// a read error after some lines: the complete lines before it are read, then the error
	// names the next line, as artifact.Read does.
	for _, at := range []int{0, 10, len(rich) / 2, len(rich) - 1} {
		mk := func() io.Reader { return io.MultiReader(strings.NewReader(rich[:at]), errReader{}) }
		want, wantErr := referenceInput(t, mk(), "a", 0)
		for _, bs := range []int{5, 100, 1 << 16} {
			got, gotErr := readFrom(context.Background(), mk(), "a", readOptions{blockBytes: bs, workers: 2})
			sameInput(t, fmt.Sprintf("read error at %d block %d", at, bs), got, want, gotErr, wantErr)
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// TestAnalyzeInputEqualsAnalyze: the streamed input gives the same report as the loaded one.
func TestAnalyzeInputEqualsAnalyze(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rich.jsonl")
	if err := os.WriteFile(path, []byte(richArtifact(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseSLOFlags([]string{"e2e:3"})
	if err != nil {
		t.Fatal(err)
	}
	server := &ServerEvidence{Spans: map[string]map[string]any{"inferprobe-run-c1_measured_0_3": {"gen_ai.latency.time_to_first_token": 0.01}}}
	for _, opts := range []Options{{}, {Policy: p}, {Server: server}} {
		want, err := Analyze(a, opts)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ReadInput(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AnalyzeInput(context.Background(), in, opts)
		if err != nil {
			t.Fatal(err)
		}
		var gb, wb bytes.Buffer
		if err := WriteJSON(&gb, got); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&wb, want); err != nil {
			t.Fatal(err)
		}
		if gb.String() != wb.String() || !reflect.DeepEqual(got.Warnings, want.Warnings) {
			t.Fatalf("streamed report differs:\n%s\nwant\n%s", gb.String(), wb.String())
		}
		if got.Summary.TotalRequests != 10 || got.Summary.CaseCount != 2 {
			t.Fatalf("summary %+v", got.Summary)
		}
		// a second analysis of the same input without server evidence clears the join
		again, err := AnalyzeInput(context.Background(), in, Options{})
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := Analyze(a, Options{})
		gb.Reset()
		wb.Reset()
		_ = WriteJSON(&gb, again)
		_ = WriteJSON(&wb, plain)
		if gb.String() != wb.String() {
			t.Fatal("re-analysing an input must not keep an earlier server join")
		}
	}
	// validation: no session, no v1 request
	for _, data := range []string{
		line(t, &artifact.Request{SessionID: "s", RequestID: "r", CaseID: "c", Phase: "measured", Status: "ok"}) + "\n",
		line(t, &artifact.Session{SessionID: "s", Status: "running"}) + "\n" + `{"event_type":"infer.request","schema_version":2}` + "\n",
	} {
		in, err := readFrom(context.Background(), strings.NewReader(data), "x.jsonl", readOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := referenceInput(t, strings.NewReader(data), "x.jsonl", 0)
		a.Artifact.Requests = make([]artifact.Request, a.RequestRecords)
		wantErr := a.Artifact.Validate()
		if _, err := AnalyzeInput(context.Background(), in, Options{}); err == nil || wantErr == nil || err.Error() != wantErr.Error() || !errors.Is(err, artifact.ErrInvalidArtifact) {
			t.Fatalf("validation: %v, want %v", err, wantErr)
		}
	}
}

func FuzzReadInput(f *testing.F) {
	rich := richArtifact(f)
	f.Add([]byte(rich), uint16(7))
	f.Add([]byte(rich[:len(rich)/3]), uint16(1))
	f.Add([]byte(rich+spanLines(f, false)), uint16(5))
	f.Add([]byte("{\"event_type\":\"infer.session\",\"schema_version\":1}\n[1]\n"), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, bs uint16) {
		if len(data) > 1<<16 {
			return
		}
		want, wantErr := referenceInput(t, bytes.NewReader(data), "f", 512)
		got, gotErr := readFrom(context.Background(), bytes.NewReader(data), "f", readOptions{blockBytes: int(bs%700) + 1, workers: 2, maxLineBytes: 512})
		sameInput(t, "fuzz", got, want, gotErr, wantErr)
	})
}
