package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// artifactText is a small complete artifact: every typed record, one per line.
func artifactText(t testing.TB) string {
	var b strings.Builder
	for _, rec := range sampleRecords() {
		line, err := MarshalLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func readAll(text string) ([]Line, Stats, error) {
	var recs []Line
	st, err := Read(strings.NewReader(text), func(r Line) error {
		r.Raw = bytes.Clone(r.Raw)
		recs = append(recs, r)
		return nil
	})
	return recs, st, err
}

func requestLine(t *testing.T, mutate func(string) string) string {
	return mutate(string(mustLine(t, sampleRequest())))
}

func TestReadRejectsIntegersSpelledAsFloats(t *testing.T) {
	good := artifactText(t)
	cases := []struct {
		name, line, field, msg string
	}{
		{"5.0 request_index", requestLine(t, func(s string) string {
			return strings.Replace(s, `"request_index":3`, `"request_index":5.0`, 1)
		}), "request_index", "integer spelled as a float (5.0)"},
		{"1e9 started_at_ns", requestLine(t, func(s string) string {
			return strings.Replace(s, `"started_at_ns":1767225600123456790`, `"started_at_ns":1e9`, 1)
		}), "started_at_ns", "integer spelled as a float (1e9)"},
		{"nested", `{"event_type":"infer.phase_window","schema_version":1,"abandoned_requests":{"running_at_start":1.0,"waited_seconds":0,"still_running":0}}`,
			"abandoned_requests.running_at_start", "integer spelled as a float (1.0)"},
		{"array element", `{"event_type":"infer.session","schema_version":1,"session_id":"s","timestamp_ns":1,"status":"running","config":{"concurrency":[1,2.5]}}`,
			"config.concurrency", "integer spelled as a float (2.5)"},
		{"schema_version", `{"event_type":"infer.request","schema_version":1.0}`, "schema_version", "integer spelled as a float (1.0)"},
		{"schema_version string", `{"event_type":"infer.request","schema_version":"1"}`, "schema_version", "must be an integer"},
		{"event_type number", `{"event_type":5,"schema_version":1}`, "event_type", "must be a string"},
		{"bool for int", requestLine(t, func(s string) string {
			return strings.Replace(s, `"http_status":null`, `"http_status":true`, 1)
		}), "http_status", "expected an integer, got bool"},
		{"overflow", requestLine(t, func(s string) string {
			return strings.Replace(s, `"request_index":3`, `"request_index":9223372036854775808`, 1)
		}), "request_index", "integer out of range"},
	}
	for _, c := range cases {
		// The bad line sits in the middle, at line 4.
		lines := strings.SplitAfter(good, "\n")
		text := strings.Join(lines[:3], "") + c.line + "\n" + strings.Join(lines[3:], "")
		_, _, err := readAll(text)
		var le *LineError
		if !errors.As(err, &le) {
			t.Errorf("%s: error %v, want *LineError", c.name, err)
			continue
		}
		if le.Line != 4 || le.Field != c.field || !strings.Contains(le.Err.Error(), c.msg) {
			t.Errorf("%s: got line %d field %q err %q; want line 4 field %q containing %q", c.name, le.Line, le.Field, le.Err, c.field, c.msg)
		}
		if !errors.Is(err, ErrInvalidArtifact) {
			t.Errorf("%s: error does not match ErrInvalidArtifact", c.name)
		}
		if !strings.Contains(err.Error(), "line 4") {
			t.Errorf("%s: message %q lacks the line number", c.name, err)
		}
	}
}

func TestReadTruncatedLastLine(t *testing.T) {
	text := artifactText(t)
	last := string(mustLine(t, sampleRequest()))
	for _, cut := range []int{1, 17, len(last) / 2, len(last) - 1} {
		recs, st, err := readAll(text + last[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		want := len(sampleRecords())
		if len(recs) != want || st.Truncated == nil || st.Truncated.Line != want+1 || st.Truncated.Bytes != cut {
			t.Fatalf("cut at %d: %d records, truncated %+v", cut, len(recs), st.Truncated)
		}
	}
	// The same cut line followed by a newline is a corrupt middle line: an error.
	_, _, err := readAll(text + last[:40] + "\n" + last + "\n")
	var le *LineError
	if !errors.As(err, &le) || le.Line != len(sampleRecords())+1 || !strings.Contains(le.Error(), "invalid JSON") {
		t.Fatalf("corrupt middle line: %v", err)
	}
	// A complete last line without a newline is a record.
	recs, st, err := readAll(text + last)
	if err != nil || len(recs) != len(sampleRecords())+1 || st.Truncated != nil || !st.MissingFinalNewline {
		t.Fatalf("complete last line: %d records, %+v, %v", len(recs), st, err)
	}
	// A valid but wrong last line without a newline is still an error.
	_, _, err = readAll(text + `{"event_type":"infer.request","schema_version":1,"request_index":2.0}`)
	if !errors.As(err, &le) || le.Field != "request_index" {
		t.Fatalf("bad last line: %v", err)
	}
}

func TestReadKeepsUnknownAndV2Records(t *testing.T) {
	v2 := `{"schema_version":2,"event_type":"infer.request","context":{"run_id":"r","session_id":"s","producer_id":"vllm","source":"vllm","clock_domain":"h/unix_epoch_ns","clock_kind":"wall","collection_mode":"imported","provenance":"reported"},"event_id":"e1","metadata":{},"request_ref":{"producer_id":"vllm","id":"chatcmpl-1"},"start_ns":1.5e3,"end_ns":null,"status":"finished"}`
	unknown := `{"event_type":"infer.brand_new","schema_version":7,"x":[1,2.0,"NaN"]}`
	noType := `{"offset_ms": 12.5}`
	scrape := `{"event_type":"infer.vllm_scrape","schema_version":1,"observed_at_ns":5,"scrape":{"values":{"vllm:x":"NaN"}}}`
	sessionV3 := `{"event_type":"infer.session","schema_version":3,"status":"running"}`
	text := artifactText(t) + v2 + "\n" + unknown + "\n" + noType + "\n" + scrape + "\n" + sessionV3 + "\n"
	recs, st, err := readAll(text)
	if err != nil {
		t.Fatal(err)
	}
	n := len(sampleRecords())
	wantKinds := []Kind{KindRequestV2, {"infer.brand_new", 7}, {}, KindMetricsScrape, {EventSession, 3}}
	for i, want := range wantKinds {
		r := recs[n+i]
		raw, ok := r.Value.(*Raw)
		if !ok || r.Kind != want || raw.Kind != want {
			t.Errorf("line %d: %T kind %v, want *Raw %v", r.Line, r.Value, r.Kind, want)
			continue
		}
		if string(raw.JSON) != []string{v2, unknown, noType, scrape, sessionV3}[i] {
			t.Errorf("line %d: raw text changed: %s", r.Line, raw.JSON)
		}
	}
	if st.Kinds[KindRequestV2] != 1 || st.Kinds[KindRequest] != 1 {
		t.Fatalf("kind counts %v", st.Kinds)
	}
	// Written back, a Raw record is the same line.
	if line := mustLine(t, recs[n].Value); string(line) != v2 {
		t.Fatalf("raw rewrite: %s", line)
	}
}

func TestReadLineErrors(t *testing.T) {
	good := artifactText(t)
	for name, c := range map[string]struct {
		insert, want string
	}{
		"array":   {`[1,2]`, "not a JSON object (an array)"},
		"string":  {`"infer.request"`, "not a JSON object (a string)"},
		"number":  {`42`, "not a JSON object (a number)"},
		"null":    {`null`, "not a JSON object (null)"},
		"garbage": {`{"event_type":"infer.request","schema_version":1,,}`, "invalid JSON"},
		"raw bad": {`{"event_type":"infer.other","schema_version":1,"a":tru}`, "invalid JSON"},
	} {
		_, _, err := readAll(c.insert + "\n" + good)
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || !strings.Contains(le.Error(), c.want) {
			t.Errorf("%s: %v, want line 1 %q", name, err, c.want)
		}
	}
}

func TestReadBlankLinesCRLFAndLimits(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(artifactText(t), "\n"), "\n")
	text := "\n  \n" + strings.Join(lines, "\r\n") + "\r\n\n"
	recs, st, err := readAll(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(lines) || st.BlankLines != 3 || st.Lines != len(lines)+3 {
		t.Fatalf("records %d blank %d lines %d", len(recs), st.BlankLines, st.Lines)
	}
	if recs[0].Line != 3 {
		t.Fatalf("first record on line %d, want 3", recs[0].Line)
	}
	// Line length bound.
	long := `{"event_type":"infer.other","schema_version":1,"pad":"` + strings.Repeat("x", 300) + `"}`
	_, err = Reader{MaxLineBytes: 200}.Read(strings.NewReader(`{"event_type":"infer.other","schema_version":1}`+"\n"+long+"\n"), func(Line) error { return nil })
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(le.Error(), "longer than 200 bytes") {
		t.Fatalf("long line: %v", err)
	}
	// Exactly at the bound is fine, even across the bufio buffer.
	exact := `{"event_type":"infer.other","schema_version":1,"pad":"` + strings.Repeat("y", 400<<10) + `"}`
	st, err = Reader{MaxLineBytes: len(exact)}.Read(strings.NewReader(exact+"\n"+exact), func(Line) error { return nil })
	if err != nil || st.Records != 2 {
		t.Fatalf("line at the bound: %v, %+v", err, st)
	}
	_, err = Reader{MaxLineBytes: len(exact) - 1}.Read(strings.NewReader(exact), func(Line) error { return nil })
	if !errors.As(err, &le) {
		t.Fatalf("last line over the bound: %v", err)
	}
}

func TestReadCallbackErrorStops(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	_, err := Read(strings.NewReader(artifactText(t)), func(Line) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("err %v after %d records", err, n)
	}
	if errors.Is(err, ErrInvalidArtifact) {
		t.Fatal("callback error marked as invalid artifact")
	}
}

func TestValidateAndReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := artifactText(t)
	var noSession, noRequest strings.Builder
	for _, l := range strings.SplitAfter(full, "\n") {
		if !strings.Contains(l, `"infer.session"`) {
			noSession.WriteString(l)
		}
		if !strings.Contains(l, `"infer.request"`) {
			noRequest.WriteString(l)
		}
	}
	v2 := `{"schema_version":2,"event_type":"infer.request","event_id":"e"}` + "\n"
	for name, c := range map[string]struct {
		text, want string
	}{
		"no session":     {noSession.String(), "no infer.session record"},
		"no request":     {noRequest.String(), "no infer.request record"},
		"only v2":        {noRequest.String() + v2, "only 1 correlation-model infer.request v2"},
		"empty":          {"", "empty.jsonl is empty: an inferprobe artifact holds JSONL records"},
		"blank":          {"\n \n\t\n", "blank.jsonl holds only blank lines"},
		"unknown record": {"{}\n", "no infer.session record"},
		"cut session":    {`{"event_type":"infer.session","schema`, "no infer.session record (its last line, line 1, 37 bytes with no newline, is not valid JSON and was not read)"},
		"garbage":        {"garbage", "no infer.session record (its last line, line 1, 7 bytes"},
		"cut request":    {noRequest.String() + `{"event_type":"infer.request"`, "no infer.request record (its last line"},
	} {
		a, err := ReadFile(write(name+".jsonl", c.text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = a.Validate()
		if !errors.Is(err, ErrInvalidArtifact) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want %q", name, err, c.want)
		}
	}
	_, err := ReadFile(filepath.Join(dir, "missing.jsonl"))
	if !errors.Is(err, ErrInvalidArtifact) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	_, err = ReadFile(write("bad.jsonl", full+"[]\n"))
	if !errors.Is(err, ErrInvalidArtifact) || !strings.Contains(err.Error(), "bad.jsonl") {
		t.Fatalf("bad file: %v", err)
	}
	// A truncated artifact loads, says so, and is still valid.
	cut := full + string(mustLine(t, sampleRequest()))[:50]
	a, err := ReadFile(write("cut.jsonl", cut))
	if err != nil || a.Truncated == nil || a.Validate() != nil || a.FinalSession() == nil {
		t.Fatalf("truncated: %+v, %v", a, err)
	}
	// A killed run: no final session.
	running := strings.SplitAfter(full, "\n")
	a, err = ReadFile(write("killed.jsonl", strings.Join(running[:len(running)-2], "")))
	if err != nil || a.FinalSession() != nil || len(a.Sessions) != 1 {
		t.Fatalf("killed run: %v sessions=%d", err, len(a.Sessions))
	}
	// A second header or workload is kept in Others.
	lines := strings.SplitAfter(full, "\n")
	a, err = ReadFile(write("dup.jsonl", full+lines[1]+lines[2]))
	if err != nil || len(a.Others) != 2 || a.Others[0].Kind != KindArtifact || a.Others[1].Kind != KindWorkload {
		t.Fatalf("duplicates: %v %+v", err, a.Others)
	}
	// Cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := strings.Repeat(string(mustLine(t, sampleRequest()))+"\n", 5000)
	if _, err := ReadFileContext(ctx, write("big.jsonl", big)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

func BenchmarkReadRequests(b *testing.B) {
	r := sampleRequest()
	r.ChunkInterarrivalMS = make([]float64, 64)
	for i := range r.ChunkInterarrivalMS {
		r.ChunkInterarrivalMS[i] = 12.3456 + float64(i)
	}
	line := mustLineB(b, r)
	const n = 10000
	data := bytes.Repeat(append(line, '\n'), n)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := Read(bytes.NewReader(data), func(Line) error { return nil })
		if err != nil || st.Records != n {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}

func mustLineB(b *testing.B, rec any) []byte {
	line, err := MarshalLine(rec)
	if err != nil {
		b.Fatal(err)
	}
	return line
}

func TestRequestFastPathTakesWriterOutput(t *testing.T) {
	withEscapes := sampleRequest()
	withEscapes.Status = RequestError
	withEscapes.ErrorMessage = Ptr("HTTP 500: {\"error\": \"engine died\"}\n\tcafé ☃ <b>")
	withEscapes.ChunkInterarrivalMS = nil
	withEscapes.HTTPStatus = Ptr(int64(500))
	withEscapes.ServerErrorType, withEscapes.ServerErrorCode = Ptr("InternalServerError"), Ptr("500")
	for i, r := range []Request{sampleRequest(), withEscapes, {}} {
		var got Request
		if !decodeRequestFast(mustLine(t, r), &got) {
			t.Fatalf("request %d: fast path gave up on the writer's own line", i)
		}
		if r.ChunkInterarrivalMS == nil {
			r.ChunkInterarrivalMS = []float64{} // written as []
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("request %d: fast path decoded\n%+v\nwant\n%+v", i, got, r)
		}
	}
	// Anything unusual is left to encoding/json, which applies its own rules.
	for _, line := range []string{
		`{"Status":"ok"}`, `{"request_index":5.0}`, `{"brand_new_field":1}`, `{"ttft_ms":"1"}`,
		`{"chunk_interarrival_ms":[1,null]}`, `{"status":"ok"} x`, `{"model":"a` + "\x01" + `"}`,
	} {
		var got Request
		if decodeRequestFast([]byte(line), &got) {
			t.Errorf("fast path accepted %s", line)
		}
	}
	// And the reader still decodes those that encoding/json accepts.
	recs, _, err := readAll(`{"event_type":"infer.request","schema_version":1,"Status":"ok","brand_new_field":[1]}` + "\n")
	if err != nil || recs[0].Value.(*Request).Status != "ok" {
		t.Fatalf("fallback: %v", err)
	}
}

// TestReadReuseRequests checks that Reader.ReuseRequests delivers, line by line, the records
// of a read without it: requests of different shapes one after another (a long chunk-gap list
// before a short one, a string pointer before a null one, a line encoding/json must decode).
func TestReadReuseRequests(t *testing.T) {
	long := sampleRequest()
	long.ChunkInterarrivalMS = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	long.ErrorMessage, long.PromptID = Ptr("HTTP 500: {\"error\": \"boom\"}\n\tcafé"), Ptr("p-long")
	short := sampleRequest()
	short.ChunkInterarrivalMS, short.ErrorMessage, short.PromptID, short.TTFTMS = []float64{0.5}, nil, nil, nil
	var b strings.Builder
	b.WriteString(artifactText(t))
	for _, r := range []Request{long, short, {}, long} {
		b.Write(mustLine(t, r))
		b.WriteByte('\n')
	}
	b.WriteString(`{"event_type":"infer.request","schema_version":1,"Status":"ok","brand_new_field":[1]}` + "\n")
	b.Write(mustLine(t, short))
	b.WriteByte('\n')
	text := b.String()
	want, wantSt, err := readAll(text)
	if err != nil {
		t.Fatal(err)
	}
	var got []Line
	requests := 0
	st, err := Reader{ReuseRequests: true}.Read(strings.NewReader(text), func(l Line) error {
		l.Raw = bytes.Clone(l.Raw)
		if r, ok := l.Value.(*Request); ok {
			requests++
			// a deep copy through JSON: the next line overwrites r's memory
			line, err := MarshalLine(r)
			if err != nil {
				return err
			}
			var cp Request
			if err := json.Unmarshal(line, &cp); err != nil {
				return err
			}
			l.Value = &cp
		}
		got = append(got, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if requests < 7 {
		t.Fatalf("only %d requests read", requests)
	}
	if !reflect.DeepEqual(st, wantSt) {
		t.Fatalf("stats %+v, want %+v", st, wantSt)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if r, ok := want[i].Value.(*Request); ok { // the same round trip as got's
			line, err := MarshalLine(r)
			if err != nil {
				t.Fatal(err)
			}
			var cp Request
			if err := json.Unmarshal(line, &cp); err != nil {
				t.Fatal(err)
			}
			want[i].Value = &cp
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("line %d:\n%+v\nwant\n%+v", i+1, got[i].Value, want[i].Value)
		}
	}
}
