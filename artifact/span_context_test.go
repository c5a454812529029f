package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// spanSet builds n spans over three resource+scope pairs: groups of one export sharing
// their maps (ShareSpanMaps, as the receiver makes them), and spans with their own, equal,
// maps (as a file or a test makes them).
func spanSet(n int) []Span {
	resources := []map[string]any{
		{"service.name": "vllm", "host.name": "gpu-1", "vllm.process_id": int64(7), "z": []any{1.5, "x"}},
		{"service.name": "vllm", "host.name": "gpu-2", "vllm.process_id": int64(8)},
		{},
	}
	scopes := []map[string]any{
		{"name": "vllm.llm_engine", "version": "0.9"},
		{"name": "vllm.llm_engine", "attributes": map[string]any{"k": int64(1)}},
		{"name": "x"},
	}
	recs := make([]Span, n)
	for i := range recs {
		r := sampleRecord()
		g := i % 3
		r.SpanID = Ptr(fmt.Sprintf("%016x", i+1))
		r.Attributes = map[string]any{AttrRequestID: fmt.Sprintf("chatcmpl-%d", i), "i": int64(i), "f": float64(i) + 0.5}
		if i%4 == 0 { // a map of its own with the group's content
			r.Resource = cloneMap(resources[g])
			r.Scope = cloneMap(scopes[g])
		} else {
			r.Resource, r.Scope = resources[g], scopes[g]
		}
		if i%5 == 0 {
			r.Status, r.ParentSpanID, r.Dropped = nil, nil, map[string]int64{"events": 3}
		}
		recs[i] = r
	}
	ShareSpanMaps(recs)
	return recs
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// unshared is r as a decoded record compares: without the shared encoding.
func unshared(r Span) Span {
	r.shared = nil
	return r
}

// Spans written by several goroutines through one Writer come back field for field (ids,
// times, name, kind, status, attributes, resource, scope, dropped, request id, digest); each
// context line is written once, before the first span naming it.
func TestWriterSpanContextsRoundTrip(t *testing.T) {
	in := spanSet(300)
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(in); i += 4 {
				var rec Record = &in[i]
				if i%7 == 0 {
					rec = in[i] // by value too
				}
				if err := w.Write(rec); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(line, `{"event_type":"infer.vllm_span_context"`) {
			c, err := DecodeSpanContext([]byte(line))
			if err != nil || defined[c.ID] {
				t.Fatalf("line %d: context %v twice or bad: %v", i+1, c, err)
			}
			defined[c.ID] = true
			continue
		}
		id, err := spanContextID([]byte(line))
		if err != nil || !defined[id] {
			t.Fatalf("line %d names context %q before its line: %v", i+1, id, err)
		}
	}
	if len(defined) != 3 {
		t.Fatalf("%d contexts, want 3", len(defined))
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Span{}
	for _, o := range a.Others {
		s, err := DecodeSpanRaw(o)
		if err != nil || o.Kind != KindVLLMSpanV2 {
			t.Fatalf("%v: %v", o.Kind, err)
		}
		got[*s.SpanID] = s
	}
	if len(got) != len(in) || a.Stats.Kinds[KindSpanContext] != 3 {
		t.Fatalf("read back %d spans, %d contexts", len(got), a.Stats.Kinds[KindSpanContext])
	}
	for i := range in {
		g := got[*in[i].SpanID]
		if !reflect.DeepEqual(g, unshared(in[i])) {
			t.Fatalf("span %d differs:\n got %#v\nwant %#v", i, g, in[i])
		}
		if g.ContentDigest() != in[i].ContentDigest() {
			t.Fatalf("span %d digest changed", i)
		}
	}
	// v2 lines are less than half the v1 lines' bytes for a vLLM-like span set
	v1 := 0
	for i := range in {
		line, _ := MarshalLine(&in[i])
		v1 += len(line) + 1
	}
	if len(data) >= v1 {
		t.Fatalf("artifact %d bytes, v1 lines %d", len(data), v1)
	}
}

// Old artifacts: v1 lines, resource and scope inline, read exactly as before.
func TestReadV1SpanLines(t *testing.T) {
	in := spanSet(10)
	var b bytes.Buffer
	for i := range in {
		line, err := MarshalLine(&in[i])
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "old.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range a.Others {
		viaRaw, err1 := DecodeSpanRaw(o)
		direct, err2 := DecodeSpan(o.JSON)
		if err1 != nil || err2 != nil || o.Kind != KindSpan || o.Context != nil {
			t.Fatalf("%d: %v %v %v", i, o.Kind, err1, err2)
		}
		if !reflect.DeepEqual(viaRaw, direct) || !reflect.DeepEqual(viaRaw, unshared(in[i])) {
			t.Fatalf("%d: v1 read differs", i)
		}
	}
	// A v1 Raw written again stays as it is.
	w, err := NewWriter(filepath.Join(t.TempDir(), "copy.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&a.Others[0]); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	again, _ := os.ReadFile(w.Path())
	if !bytes.Equal(bytes.TrimSpace(again), a.Others[0].JSON) {
		t.Fatalf("v1 raw rewritten: %s", again)
	}
}

// writeSpans writes recs through a new Writer at path.
func writeSpans(t *testing.T, path string, recs []Record) {
	t.Helper()
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Records read from one artifact and written into another (a merge, a copy) give a
// readable file: v2 spans are re-encoded against the new file's contexts and the source's
// context lines are not copied; concatenated artifacts repeat a context harmlessly.
func TestSpanContextsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	in := spanSet(6)
	writeSpans(t, filepath.Join(dir, "a.jsonl"), []Record{&in[0], &in[1], &in[2]})
	writeSpans(t, filepath.Join(dir, "b.jsonl"), []Record{&in[3], &in[4], &in[5]})
	var merged []Record
	var cat []byte
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		cat = append(cat, data...)
		if _, err := Read(bytes.NewReader(data), func(l Line) error { return nil }); err != nil {
			t.Fatal(err)
		}
		a, err := ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Others {
			merged = append(merged, &a.Others[i])
		}
		merged = append(merged, &SpanContext{ID: "ignored"}) // skipped by the Writer
	}
	writeSpans(t, filepath.Join(dir, "m.jsonl"), merged)
	if err := os.WriteFile(filepath.Join(dir, "cat.jsonl"), cat, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"m.jsonl", "cat.jsonl"} {
		a, err := ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(name, err)
		}
		if len(a.Others) != 6 {
			t.Fatalf("%s: %d spans", name, len(a.Others))
		}
		for i, o := range a.Others {
			s, err := DecodeSpanRaw(o)
			if err != nil || !reflect.DeepEqual(s, unshared(in[i])) {
				t.Fatalf("%s span %d: %v", name, i, err)
			}
		}
	}
}

// A span naming a context the file has not defined (yet), a context line whose id is not
// its content's (edited, or reformatted), unsorted attribute keys, and malformed lines are
// errors naming the line, never a panic.
func TestSpanContextErrors(t *testing.T) {
	in := spanSet(1)
	path := filepath.Join(t.TempDir(), "a.jsonl")
	writeSpans(t, path, []Record{&in[0]})
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	ctxLine, spanLine := lines[0], lines[1]
	id, _ := spanContextID([]byte(spanLine))
	other := `{"event_type":"infer.vllm_span_context","schema_version":1,"context_id":"` + id + `","resource":{"a":1},"scope":{}}` + "\n"
	cases := map[string]struct {
		file, field string
		is          error
		line        int
	}{
		"span before its context":           {spanLine + ctxLine, "context", ErrUnknownSpanContext, 1},
		"unknown id":                        {ctxLine + strings.Replace(spanLine, id, "feedfeedfeedfeed", 1), "context", ErrUnknownSpanContext, 2},
		"no context field":                  {strings.Replace(spanLine, `"context":"`+id+`",`, "", 1), "context", nil, 1},
		"redefined (id not of its content)": {ctxLine + other, "", nil, 2},
		"edited session":                    {strings.Replace(ctxLine, `"session_id":"`, `"session_id":"x`, 1) + spanLine, "", nil, 1},
		"keys unsorted":                     {strings.Replace(ctxLine, `"attribute_keys":[`, `"attribute_keys":["zzz",`, 1) + spanLine, "", nil, 1},
		"reformatted":                       {strings.Replace(ctxLine, `"context_id":`, `"context_id": `, 1) + spanLine, "", nil, 1},
		"context id missing":                {`{"event_type":"infer.vllm_span_context","schema_version":1,"resource":{}}` + "\n", "", nil, 1},
		"context bad resource":              {`{"event_type":"infer.vllm_span_context","schema_version":1,"context_id":"x","resource":[1]}` + "\n", "", nil, 1},
	}
	for name, c := range cases {
		p := filepath.Join(t.TempDir(), "bad.jsonl")
		if err := os.WriteFile(p, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(p)
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || le.Field != c.field || !errors.Is(err, ErrInvalidArtifact) || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// the same context twice with the same content is fine (appended or concatenated files)
	p := filepath.Join(t.TempDir(), "twice.jsonl")
	_ = os.WriteFile(p, []byte(ctxLine+spanLine+ctxLine+spanLine), 0o600)
	if a, err := ReadFile(p); err != nil || len(a.Others) != 2 {
		t.Fatalf("repeated context: %v", err)
	}
	// decoding a v2 line alone, or with another context, is an error
	if _, err := DecodeSpan([]byte(spanLine)); !errors.Is(err, ErrNotSpan) {
		t.Fatalf("v2 via DecodeSpan: %v", err)
	}
	if _, err := DecodeSpanRaw(Raw{Kind: KindVLLMSpanV2, JSON: []byte(spanLine)}); !errors.Is(err, ErrUnknownSpanContext) {
		t.Fatalf("unresolved v2: %v", err)
	}
	if _, err := DecodeSpanRaw(Raw{Kind: KindVLLMSpanV2, JSON: []byte(spanLine), Context: &SpanContext{ID: "other"}}); err == nil {
		t.Fatal("v2 with a context of another id decoded")
	}
	withResource := strings.Replace(strings.TrimSpace(spanLine), `"attribute_values":`, `"resource":{},"attribute_values":`, 1)
	var s SpanContexts
	c, _ := DecodeSpanContext([]byte(strings.TrimSpace(ctxLine)))
	_ = s.Add(c)
	if _, err := s.DecodeSpan([]byte(withResource)); err == nil {
		t.Fatal("v2 line with an inline resource decoded")
	}
	if got, err := s.DecodeSpan([]byte(strings.TrimSpace(spanLine))); err != nil || !reflect.DeepEqual(got, unshared(in[0])) {
		t.Fatalf("DecodeSpan: %v", err)
	}
}

// The Writer falls back to self-contained v1 lines past MaxWriterSpanContexts contexts.
func TestWriterSpanContextLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	recs := make([]Record, 0, MaxWriterSpanContexts+2)
	for i := range MaxWriterSpanContexts + 2 {
		r := sampleRecord()
		r.Resource = map[string]any{"i": int64(i)}
		recs = append(recs, &r)
	}
	writeSpans(t, path, recs)
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k := a.Stats.Kinds
	if k[KindSpanContext] != MaxWriterSpanContexts || k[KindVLLMSpanV2] != MaxWriterSpanContexts || k[KindSpan] != 2 {
		t.Fatalf("kinds %v", k)
	}
	last, err := DecodeSpanRaw(a.Others[len(a.Others)-1])
	if err != nil || last.Resource["i"] != int64(MaxWriterSpanContexts+1) {
		t.Fatalf("last span %v: %v", last.Resource, err)
	}
}

// readContexts reads data as ReadFile files span contexts and spans.
func readContexts(data []byte) (*Artifact, error) {
	a := &Artifact{}
	_, err := Read(bytes.NewReader(data), func(l Line) error {
		switch v := l.Value.(type) {
		case *SpanContext:
			return a.KeepSpanContext(v, l.Line)
		case *Raw:
			return a.KeepRaw(v, l.Line)
		}
		return nil
	})
	return a, err
}

// FuzzSpanContexts reads arbitrary files with span contexts: every span the reader resolves
// decodes or fails cleanly, and a decoded one encoded again as the Writer encodes it (its
// context line, then its v2 line) reads back with the same content.
func FuzzSpanContexts(f *testing.F) {
	in := spanSet(4)
	path := filepath.Join(f.TempDir(), "seed.jsonl")
	w, _ := NewWriter(path)
	for i := range in {
		_ = w.Write(&in[i])
	}
	_ = w.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	lines := bytes.SplitAfter(seed, []byte("\n"))
	f.Add(bytes.Join([][]byte{lines[1], lines[0]}, nil))
	f.Add([]byte(`{"event_type":"infer.vllm_span_context","schema_version":1,"context_id":"a","resource":{"x":[1,{"y":1e400}]},"scope":null}` + "\n" +
		`{"event_type":"infer.vllm_span","schema_version":2,"context":"a","name":"n","start_unix_ns":"5"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		a, err := readContexts(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidArtifact) {
				t.Fatalf("error %v does not match ErrInvalidArtifact", err)
			}
			return
		}
		for _, o := range a.Others {
			if o.Kind.EventType != EventSpan {
				continue
			}
			s, err := DecodeSpanRaw(o)
			if err != nil {
				continue
			}
			enc, err := s.resourceScopeEncoding()
			if err != nil {
				continue // a value MarshalJSON refuses too
			}
			keys := sortedKeys(nil, s.Attributes)
			body := contextBody(nil, s.SessionID, s.RunID, s.Source, s.ClockDomain, enc, keys)
			id := ContextIDOf(body)
			line, err := s.appendV2(append(contextLine(id, body), '\n'), id, keys)
			if err != nil {
				continue
			}
			b, err := readContexts(line)
			if err != nil || len(b.Others) != 1 {
				t.Fatalf("re-encoded span unreadable: %v\n%s", err, line)
			}
			back, err := DecodeSpanRaw(b.Others[0])
			if err != nil || back.ContentDigest() != s.ContentDigest() || back.SessionID != s.SessionID || back.RunID != s.RunID ||
				back.Source != s.Source || back.ClockDomain != s.ClockDomain || !reflect.DeepEqual(back.ReceivedAtNS, s.ReceivedAtNS) ||
				!reflect.DeepEqual(back.TimestampNS, s.TimestampNS) || !reflect.DeepEqual(back.RequestID, s.RequestID) {
				t.Fatalf("re-encoded span differs: %v\n%#v\n%#v", err, back, s)
			}
		}
	})
}

// BenchmarkDecodeSpanLine is the reader's cost of one span line: a v1 line (DecodeSpan)
// against the v2 line the Writer writes (DecodeSpanRaw with its resolved context).
func BenchmarkDecodeSpanLine(b *testing.B) {
	rec := sampleRecord()
	v1, err := MarshalLine(&rec)
	if err != nil {
		b.Fatal(err)
	}
	enc, _ := rec.resourceScopeEncoding()
	keys := sortedKeys(nil, rec.Attributes)
	body := contextBody(nil, rec.SessionID, rec.RunID, rec.Source, rec.ClockDomain, enc, keys)
	c, err := DecodeSpanContext(contextLine(ContextIDOf(body), body))
	if err != nil {
		b.Fatal(err)
	}
	v2, err := rec.appendV2(nil, c.ID, keys)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("v1", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(v1)))
		for range b.N {
			if _, err := DecodeSpan(v1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v2", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(v2)))
		raw := Raw{Kind: KindVLLMSpanV2, JSON: v2, Context: c}
		for range b.N {
			if _, err := DecodeSpanRaw(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Replay hands a sink the spans of v1 and v2 lines alike, equal to what was written.
func TestReplaySpanContexts(t *testing.T) {
	in := spanSet(5)
	path := newSpanArtifact(t, in)
	old, _ := MarshalLine(&in[0]) // an old v1 line appended
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.Write(append(old, '\n'))
	_ = f.Close()
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mem := &Memory{}
	if _, err := a.Replay(mem); err != nil {
		t.Fatal(err)
	}
	got := mem.Records()
	if len(got) != len(in)+1 {
		t.Fatalf("%d records replayed", len(got))
	}
	for i, r := range got {
		if want := unshared(in[i%len(in)]); !reflect.DeepEqual(*r.(*Span), want) {
			t.Fatalf("span %d differs:\n got %#v\nwant %#v", i, r, want)
		}
	}
}

// Consecutive spans that differ from the last context in one respect only — the attribute
// names (as many of them), the source, the run or the resource — each name their own
// context and read back whole.
func TestWriterSpanContextChangesOneThing(t *testing.T) {
	base := spanSet(1)[0]
	base.Attributes = map[string]any{"i": int64(1), "f": 0.5}
	mk := func(i int, mod func(*Span)) Span {
		r := base
		r.SpanID = Ptr(fmt.Sprintf("%016x", i+1))
		mod(&r)
		return r
	}
	in := []Span{
		mk(0, func(*Span) {}),
		mk(1, func(r *Span) { r.Attributes = map[string]any{"j": int64(2), "f": 1.5} }),
		mk(2, func(*Span) {}),
		mk(3, func(r *Span) { r.Source = SpanSourceGRPC }),
		mk(4, func(r *Span) { r.RunID = "run-other" }),
		mk(5, func(r *Span) { r.Resource = map[string]any{"service.name": "other"}; r.shared = nil }),
		mk(6, func(*Span) {}),
	}
	a, err := ReadFile(newSpanArtifact(t, in))
	if err != nil {
		t.Fatal(err)
	}
	if n := a.Stats.Kinds[KindSpanContext]; n != 5 {
		t.Fatalf("%d contexts, want 5", n)
	}
	var got []Span
	for _, o := range a.Others {
		if o.Kind != KindVLLMSpanV2 {
			continue
		}
		s, err := DecodeSpanRaw(o)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if len(got) != len(in) {
		t.Fatalf("%d spans read back, want %d", len(got), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(got[i], unshared(in[i])) {
			t.Fatalf("span %d differs:\n got %#v\nwant %#v", i, got[i], in[i])
		}
	}
}

// newSpanArtifact writes in, in order, into a new artifact (writeSpans) and returns its path.
func newSpanArtifact(t *testing.T, in []Span) string {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	recs := make([]Record, len(in))
	for i := range in {
		recs[i] = &in[i]
	}
	writeSpans(t, path, recs)
	return path
}
