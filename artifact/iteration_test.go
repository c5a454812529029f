package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleIteration() Iteration {
	return Iteration{
		Context:      Context{RunID: "run-1", SessionID: testSession, ProducerID: "inferprobe.import_trace", Source: "kineto", ClockDomain: "srv/unix_epoch_ns", ClockKind: "wall", CollectionMode: "imported", Provenance: "reported"},
		EventID:      "kineto:rank0.json:ab/step/3",
		IterationRef: IterationRef{ProducerID: "vllm", ID: "3"},
		Source:       IterationVLLM, Name: "execute_context_1(512)_generation_7(7)",
		StepIndex: 3, Rank: Ptr(int64(0)), TraceFile: "rank0.json", TraceAttachmentID: "kineto:rank0.json:ab",
		StartNS: startNS, EndNS: startNS + 9_000_001,
		GPUStartNS: Ptr(startNS + 10), GPUEndNS: Ptr(startNS + 9_100_000),
		ContextRequests: Ptr(int64(1)), ContextTokens: Ptr(int64(512)), GenRequests: Ptr(int64(7)), GenTokens: Ptr(int64(7)),
		Launches: 40, Activities: 41, GPUBusyNS: 8_000_000, SummedDurationNS: 8_500_000, KernelSpanNS: 8_900_000,
		IdleNS: 900_000, IdleHostWaitNS: 600_000, IdleKernelWaitNS: 200_000, IdleOtherNS: 100_000,
		MemcpyNS: 12_345, CommunicationNS: 0, GapToPreviousNS: Ptr(int64(-5)),
	}
}

func sampleActivityRef() ActivityRef {
	return ActivityRef{
		Context: sampleIteration().Context, EventID: "kineto:rank0.json:ab/launch/77/0/kernel",
		Metadata: ActivityMetadata{Intervals: [][2]int64{{0, 10}, {15, 5}}, BusyNS: 15, SummedDurationNS: 17, Activities: 3,
			LaunchName: Ptr("cudaGraphLaunch")},
		ActivityRef: "kineto:rank0.json:ab/launch/77/0/kernel", ActivityKind: "kernel", ActivityDomain: "gpu",
		AttributionStatus: AttributionLinked, IterationRef: &IterationRef{ProducerID: "vllm", ID: "3"},
		CorrelationScope: "ac2g_flow", TraceAttachmentID: "kineto:rank0.json:ab",
		RuntimeCorrelationID: Ptr(int64(77)), CUDACorrelationID: Ptr(int64(77)), DeviceID: Ptr(int64(0)),
		StartNS: startNS + 100, EndNS: startNS + 120,
	}
}

// TestIterationRoundTrip writes both records to an artifact and reads them back equal,
// with the header first and nanosecond times exact (beyond float64's precision).
func TestIterationRoundTrip(t *testing.T) {
	it, ref := sampleIteration(), sampleActivityRef()
	unresolved := ActivityRef{ActivityRef: "x", ActivityKind: "gpu_memcpy", ActivityDomain: "gpu", AttributionStatus: AttributionUnresolved,
		CorrelationScope: "none", Metadata: ActivityMetadata{UnresolvedReason: Ptr(UnresolvedNoLaunchRecord)}}
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{&it, &ref, &unresolved} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if !strings.HasPrefix(lines[0], `{"event_type":"infer.iteration","schema_version":2,`) ||
		!strings.HasPrefix(lines[1], `{"event_type":"infer.activity_ref","schema_version":3,`) {
		t.Fatalf("headers: %s / %s", lines[0][:60], lines[1][:60])
	}
	if !strings.Contains(lines[0], `"start_ns":1767225600123456789`) || !strings.Contains(lines[2], `"intervals":[]`) ||
		!strings.Contains(lines[2], `"iteration_ref":null`) || !strings.Contains(lines[1], `"intervals":[[0,10],[15,5]]`) {
		t.Fatalf("fields: %s\n%s\n%s", lines[0], lines[1], lines[2])
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	var refs []ActivityRef
	if _, err := Read(f, func(l Line) error {
		if r, ok := l.Value.(*ActivityRef); ok {
			refs = append(refs, *r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(a.Iterations) != 1 || len(refs) != 2 || a.Stats.Kinds[KindActivityRef] != 2 {
		t.Fatalf("loaded %d iterations, %d refs", len(a.Iterations), len(refs))
	}
	it.Metadata = map[string]any{}
	if !reflect.DeepEqual(a.Iterations[0], it) {
		t.Errorf("iteration:\n got %+v\nwant %+v", a.Iterations[0], it)
	}
	if !reflect.DeepEqual(refs[0], ref) {
		t.Errorf("ref:\n got %+v\nwant %+v", refs[0], ref)
	}
	unresolved.Metadata.Intervals = [][2]int64{}
	if !reflect.DeepEqual(refs[1], unresolved) {
		t.Errorf("unresolved ref:\n got %+v\nwant %+v", refs[1], unresolved)
	}
}

// TestActivityRefV2IsRaw: a version-2 activity ref is not decoded as the v3 type.
func TestActivityRefV2IsRaw(t *testing.T) {
	line := []byte(`{"event_type":"infer.activity_ref","schema_version":2,"activity_ref":"a"}`)
	rec, lerr := decodeLine(line)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if _, ok := rec.Value.(*Raw); !ok {
		t.Fatalf("v2 decoded as %T", rec.Value)
	}
	b, _ := json.Marshal(sampleIteration())
	if rec, _ := decodeLine(b); reflect.TypeOf(rec.Value) != reflect.TypeOf(&Iteration{}) {
		t.Fatalf("v2 iteration decoded as %T", rec.Value)
	}
}

// TestOpenAppend appends after the existing lines, refuses a locked file and a file whose
// last line was cut, leaving both untouched.
func TestOpenAppend(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	first := `{"event_type":"infer.session","schema_version":1,"session_id":"s"}` + "\n"
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := OpenAppend(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAppend(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	it := sampleIteration()
	if err := w.Write(&it); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.HasPrefix(raw, []byte(first)) || bytes.Count(raw, []byte("\n")) != 2 {
		t.Fatalf("appended file:\n%s", raw)
	}
	cut := filepath.Join(dir, "cut.jsonl")
	body := first + `{"event_type":"infer.req`
	if err := os.WriteFile(cut, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAppend(cut); !errors.Is(err, ErrInvalidArtifact) {
		t.Fatalf("cut file: %v", err)
	}
	if got, _ := os.ReadFile(cut); string(got) != body {
		t.Fatal("cut file changed")
	}
	if _, err := OpenAppend(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Fatal("missing file opened")
	}
}

// TestActivityRefEncoding: the hand-written encoding is byte for byte the reflection one,
// for linked, unresolved, kernel-detail and non-ASCII records, and with a changed context.
func TestActivityRefEncoding(t *testing.T) {
	a := sampleActivityRef()
	b := a
	b.IterationRef, b.AttributionStatus = nil, AttributionUnresolved
	b.Metadata = ActivityMetadata{UnresolvedReason: Ptr(UnresolvedAmbiguousRange)}
	b.RuntimeCorrelationID, b.DeviceID = nil, nil
	c := a
	c.Metadata.Name = Ptr("void at::native::k<float, \"q\"> \u00e9 <&> \\ \t")
	c.ActivityRef = "kineto:rank0 ü.json:1/activity/3"
	c.GraphID, c.StreamID = Ptr(int64(-4)), Ptr(int64(7))
	d := c
	d.Context.RunID = "other-run"
	d.Context.Rank = Ptr(int64(3))
	for i, r := range []ActivityRef{a, b, c, d, a} {
		got, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshalActivityRefPlain(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
