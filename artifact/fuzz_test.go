package artifact

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func FuzzRead(f *testing.F) {
	full := artifactText(f)
	f.Add([]byte(full))
	f.Add([]byte(full[:len(full)-37]))
	f.Add([]byte(`{"schema_version":2,"event_type":"infer.request","start_ns":1,"request_ref":{"producer_id":"p","id":"i"}}` + "\n"))
	f.Add([]byte(`{"event_type":"infer.request","schema_version":1,"request_index":5.0}` + "\n"))
	f.Add([]byte(`{"event_type":"infer.phase_window","schema_version":1,"started_at_ns":null,"abandoned_requests":{"running_at_start":1}}`))
	f.Add([]byte("\r\n\n[1]\n"))
	f.Add([]byte(`{"event_type":"infer.capabilities","schema_version":2,"metadata":{"a":[1e308,-0.0,"NaN"]}}` + "\n" + `{"offset_ms":1}`))
	f.Add([]byte(`{"event_type":"infer.session","schema_version":01}` + "\n"))
	f.Add([]byte(`{"EVENT_TYPE":"infer.slo","schema_version":1,"slo":{"x":1.0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lastLine := 0
		st, err := Reader{MaxLineBytes: 1 << 16}.Read(bytes.NewReader(data), func(r Line) error {
			if r.Line <= lastLine {
				t.Fatalf("line %d after %d", r.Line, lastLine)
			}
			lastLine = r.Line
			if r.Value == nil || r.Value.RecordKind() != r.Kind {
				t.Fatalf("line %d: value %T kind %v, record kind %v", r.Line, r.Value, r.Value, r.Kind)
			}
			if r.Kind == KindRequestV2 {
				if _, ok := r.Value.(*Raw); !ok {
					t.Fatalf("infer.request v2 decoded as %T", r.Value)
				}
			}
			if r.Kind.EventType == "" || r.Kind.SchemaVersion == 0 {
				return nil // a headerless object cannot be written back
			}
			// Writing a decoded record and reading it back is stable.
			line1, err := MarshalLine(r.Value)
			if err != nil {
				t.Fatalf("line %d: re-encoding %T: %v", r.Line, r.Value, err)
			}
			var again Line
			n := 0
			if _, err := Read(bytes.NewReader(line1), func(r2 Line) error {
				again = r2
				n++
				return nil
			}); err != nil || n != 1 {
				t.Fatalf("line %d: re-reading %s: %v (%d records)", r.Line, line1, err, n)
			}
			if again.Kind != r.Kind {
				t.Fatalf("kind changed %v → %v", r.Kind, again.Kind)
			}
			line2, err := MarshalLine(again.Value)
			if err != nil || !bytes.Equal(line1, line2) {
				t.Fatalf("unstable encoding\n%s\n%s\n%v", line1, line2, err)
			}
			return nil
		})
		if err != nil {
			return
		}
		if st.Lines < st.Records+st.BlankLines {
			t.Fatalf("stats inconsistent: %+v", st)
		}
	})
}

func FuzzCanonical(f *testing.F) {
	f.Add([]byte(pySLOCanonical))
	f.Add([]byte(`{"z":[1.5,0.1,1e-05,1e20,-0.0],"é":"☃ 𝄞 \u007f"}`))
	f.Add([]byte(`[1e400]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, err := Canonical(json.RawMessage(data))
		if err != nil {
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("canonical text is not JSON: %s", c1)
		}
		c2, err := Canonical(json.RawMessage(c1))
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent:\n%s\n%s\n%v", c1, c2, err)
		}
	})
}

// FuzzRequestFastPath checks the reflection-free infer.request decoder
// against encoding/json: whenever it accepts a line, json.Unmarshal must
// accept it too and produce the same Request.
func FuzzRequestFastPath(f *testing.F) {
	for _, r := range []Request{sampleRequest(), {}, {ErrorMessage: Ptr("HTTP 500: {\"error\": \"boom\"}\n\tü \u2028"), ChunkInterarrivalMS: []float64{}}} {
		line, err := MarshalLine(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(line)
	}
	f.Add([]byte(`{"status":"ok","status":null,"ttft_ms":1,"ttft_ms":null,"finish_reason":"x","finish_reason":null,"chunk_interarrival_ms":[1,2],"chunk_interarrival_ms":[3]}`))
	f.Add([]byte(` { "request_index" : -0 , "dispatch_lag_ms" : -1.5E+3 , "held_for_slot" : true , "stream" : null } `))
	f.Add([]byte(`{"Status":"ok","request_index":5.0,"model":"\ud800x","endpoint":"\xff"}`))
	f.Add([]byte(`{"status":"error","server_error_type":"InternalServerError","server_error_code":"500","server_error_code":null,"server_error_type":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Request
		if !decodeRequestFast(data, &fast) {
			return
		}
		var slow Request
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast and encoding/json differ on %q\nfast %+v\nslow %+v", data, fast, slow)
		}
		// The reused memory of Reader.ReuseRequests gives the same Request, also when it
		// decoded another line before.
		sc := newRequestScratch()
		for i, prev := range [][]byte{nil, fuzzScratchLine, data} {
			if prev != nil && sc.decode(prev) == nil {
				t.Fatalf("scratch decoder refused line %d: %q", i, prev)
			}
			got := sc.decode(data)
			if got == nil {
				t.Fatalf("scratch decoder refused what the fast path took (after line %d): %q", i, data)
			}
			if !reflect.DeepEqual(*got, slow) {
				t.Fatalf("scratch and encoding/json differ on %q (after line %d)\nscratch %+v\nslow    %+v", data, i, *got, slow)
			}
		}
	})
}

// fuzzScratchLine is a full request line that FuzzRequestFastPath decodes into the scratch
// memory before the fuzzed line, so that leftovers of a previous line would show.
var fuzzScratchLine = func() []byte {
	r := sampleRequest()
	r.ChunkInterarrivalMS = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	r.ErrorMessage, r.ServerErrorType, r.PrefixGroup = Ptr("previous"), Ptr("prev-type"), Ptr(int64(99))
	line, err := MarshalLine(r)
	if err != nil {
		panic(err)
	}
	return line
}()

// FuzzReadBytes checks Reader.ReadBytes against Reader.Read over the same bytes: the same
// records, Stats and error, with the default line limit and a small one.
func FuzzReadBytes(f *testing.F) {
	f.Add([]byte(artifactText(f)), 0)
	f.Add([]byte("{\"event_type\":\"x\"}\r\n\n  \n{\"a\":1}"), 12)
	f.Add([]byte("{\"event_type\":\"x\"}\n{\"trunc"), 0)
	f.Add([]byte("[1]\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		rd := Reader{MaxLineBytes: limit % 200}
		type rec struct {
			line  int
			kind  Kind
			raw   string
			value Record
		}
		collect := func(read func(func(Line) error) (Stats, error)) ([]rec, Stats, string) {
			var out []rec
			st, err := read(func(l Line) error {
				out = append(out, rec{l.Line, l.Kind, string(l.Raw), l.Value})
				return nil
			})
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			return out, st, msg
		}
		want, wantSt, wantErr := collect(func(fn func(Line) error) (Stats, error) { return rd.Read(bytes.NewReader(data), fn) })
		got, gotSt, gotErr := collect(func(fn func(Line) error) (Stats, error) { return rd.ReadBytes(data, fn) })
		if gotErr != wantErr {
			t.Fatalf("error %q, Read gives %q", gotErr, wantErr)
		}
		if !reflect.DeepEqual(gotSt, wantSt) {
			t.Fatalf("stats %+v, Read gives %+v", gotSt, wantSt)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("records differ:\n%+v\nRead gives\n%+v", got, want)
		}
	})
}
