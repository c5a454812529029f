package artifact

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// checkRequestEncoding asserts that r's line is what encoding/json writes for it.
func checkRequestEncoding(t *testing.T, r Request) {
	t.Helper()
	got, gotErr := r.MarshalJSON()
	want, wantErr := r.marshalReflect()
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("errors differ: %v, encoding/json %v", gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("lines differ\ngot  %s\nwant %s", got, want)
	}
}

func TestRequestLineMatchesEncodingJSON(t *testing.T) {
	full := sampleRequest()
	full.Shard = Ptr(int64(3))
	full.PrefixGroup = Ptr(int64(-2))
	full.ErrorType, full.ErrorMessage = Ptr("http_error"), Ptr("a \"quote\" \\ \b\f\n\r\t \x01\x1f \x7f <&> \u2028\u2029 é 𝄞 \xff\xfe end")
	full.ServerErrorType, full.ServerErrorCode, full.HTTPStatus = Ptr("InternalServerError"), Ptr("500"), Ptr(int64(500))
	full.HeldForSlot = Ptr(true)
	full.ChunkInterarrivalMS = []float64{0, math.Copysign(0, -1), 1, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 123456789.125, -3.25e22, math.MaxFloat64, math.SmallestNonzeroFloat64}
	empty := Request{}
	emptyGaps := Request{ChunkInterarrivalMS: []float64{}}
	for name, r := range map[string]Request{"sample": sampleRequest(), "full": full, "zero": empty, "empty gaps": emptyGaps} {
		t.Run(name, func(t *testing.T) { checkRequestEncoding(t, r) })
	}
	line, err := MarshalLine(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"error_message":"a \"quote\" \\ \b\f\n\r\t \u0001\u001f ` + "\x7f" + ` <&> \u2028\u2029 é 𝄞 \ufffd\ufffd end"`,
		`"chunk_interarrival_ms":[0,-0,1,0.000001,9.99e-7,1e-7,1.5e-300,100000000000000000000,1e+21,123456789.125,-3.25e+22,`, `"shard":3}`} {
		if !strings.Contains(string(line), want) {
			t.Errorf("line lacks %s:\n%s", want, line)
		}
	}
}

func TestRequestLineNonFiniteIsEncodingJSONsError(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := sampleRequest()
		r.TTFTMS = Ptr(f)
		checkRequestEncoding(t, r)
		r = sampleRequest()
		r.ChunkInterarrivalMS = []float64{1, f}
		checkRequestEncoding(t, r)
		if _, err := MarshalLine(r); err == nil || !strings.Contains(err.Error(), "unsupported value") {
			t.Errorf("MarshalLine of a %v chunk gap: %v, want encoding/json's unsupported value", f, err)
		}
	}
}

// FuzzRequestEncode: a Request decoded from any line, with any string, float and integer
// set in its fields, encodes to what encoding/json writes.
func FuzzRequestEncode(f *testing.F) {
	line, _ := sampleRequest().MarshalJSON()
	f.Add(line, "x", 1.5, int64(7), uint8(0))
	f.Add([]byte(`{"model":"\ud800\u2028"}`), "\x00\xff\u2029<>&", 1e-7, int64(-1), uint8(255))
	f.Add([]byte(`{}`), "", 1e21, int64(math.MinInt64), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64, i int64, sel uint8) {
		var r Request
		_ = json.Unmarshal(data, &r)
		switch sel % 4 {
		case 0:
			r.Model, r.ErrorMessage, r.TTFTMS = s, &s, &x
		case 1:
			r.SessionID, r.ServerErrorCode, r.ChunkInterarrivalMS = s, &s, []float64{x, -x}
		case 2:
			r.Endpoint, r.PromptID, r.Shard, r.DispatchLagMS = s, &s, &i, &x
		case 3:
			r.Phase, r.TraceID, r.RequestIndex, r.TargetInputTokens = s, &s, &i, i
		}
		checkRequestEncoding(t, r)
	})
}
