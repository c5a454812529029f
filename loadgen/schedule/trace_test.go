package schedule

import (
	"bytes"
	"errors"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadOffsetTrace(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   []time.Duration
		digest string // from CPython: sha256(json.dumps([round(o, 9) for o in offsets]))
	}{
		// Sorted and shifted to start at 0: 1500, 500, 750.5 ms → 0, .2505, 1.0 s.
		{"contract example", "{\"offset_ms\": 1500}\n{\"offset_ms\": 500}\n{\"offset_ms\": 750.5}\n",
			[]time.Duration{0, 250500 * time.Microsecond, time.Second},
			"4d3504df3c9b285442a5fdaff1a50ad8c4a100c733b55d4fcb403fa3690470ae"},
		{"single", `{"offset_ms":0}`, []time.Duration{0},
			"37aed087d1cfac1ac1185c1622819ee5100567b178df43d6c00e8a7db4bc244b"},
		{"blank lines, CRLF, other keys, BOM", "\ufeff{\"offset_ms\": 1500, \"note\": \"x\"}\r\n\r\n   \n{\"offset_ms\": 500}\r\n{\"offset_ms\": 7.505e2}",
			[]time.Duration{0, 250500 * time.Microsecond, time.Second},
			"4d3504df3c9b285442a5fdaff1a50ad8c4a100c733b55d4fcb403fa3690470ae"},
		{"rounding and large spans", "{\"offset_ms\": 0.001}\n{\"offset_ms\": 6e8}\n{\"offset_ms\": 3.3333333}\n{\"offset_ms\": 42}\n",
			[]time.Duration{0, 3332333, 41999000, 599999999999000}, // 6e5 − 1e-6 s
			"308a50cc30219e9b463354c187d5054c4fbd9fe1521a49d518b50ca228ed8018"},
		// Any origin: epoch milliseconds are offsets too; only the span is bounded.
		{"epoch origin", "{\"offset_ms\": 1700000000500}\n{\"offset_ms\": 1700000000000}\n",
			[]time.Duration{0, 500 * time.Millisecond},
			"4c937c22a546957185bb355dd163ad6b63252b654c043916025da673dd2d26f4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, digest, err := ReadOffsetTrace(strings.NewReader(tc.in), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("offsets = %v, want %v", got, tc.want)
			}
			if digest != tc.digest {
				t.Errorf("digest = %s, want %s", digest, tc.digest)
			}
		})
	}
}

func TestReadOffsetTraceErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int // 0: not a *TraceError
		want string
	}{
		// Negative, non-numeric, or a line missing offset_ms → invalid.
		{"negative", "{\"offset_ms\": 1}\n{\"offset_ms\": -5}\n", 2, "arrival trace line 2: offset_ms must be at least 0 milliseconds, not -5"},
		{"string", `{"offset_ms": "5"}`, 1, "offset_ms must be a number"},
		{"bool", `{"offset_ms": true}`, 1, "offset_ms must be a number"},
		{"null", `{"offset_ms": null}`, 1, "offset_ms must be a number"},
		{"object", `{"offset_ms": {"v": 1}}`, 1, "offset_ms must be a number"},
		{"overflow", `{"offset_ms": 1e400}`, 1, "arrival trace line 1: offset_ms 1e400 is out of range (float64 holds at most ±1.8e+308)"},
		// The replay would wait ~3 years for the second arrival.
		{"over the longest span", "{\"offset_ms\": 0}\n\n{\"offset_ms\": 99999999999}\n", 3,
			"arrival trace line 3: the time from the earliest offset_ms (0, line 1) must be at most 604800000 milliseconds (7 days), not 99999999999"},
		{"over the longest span, earliest later", "{\"offset_ms\": 604800501}\n{\"offset_ms\": 500}\n{\"offset_ms\": 1000}\n", 1,
			"arrival trace line 1: the time from the earliest offset_ms (500, line 2) must be at most 604800000 milliseconds (7 days), not 604800001"},
		{"missing", "{\"offset_ms\": 1}\n\n{\"t\": 5}\n", 3, `missing "offset_ms"`},
		{"missing first", "{\"t\": 5}\n{\"offset_ms\": 1}\n", 1, `missing "offset_ms"`},
		{"not object", "{\"offset_ms\": 1}\n[1, 2]\n", 2, "not a JSON object"},
		{"null line", "null\n", 1, "not a JSON object"},
		{"bad json", "{\"offset_ms\": 1}\n{\"offset_ms\": 2\n", 2, "not valid JSON"},
		{"trailing garbage", `{"offset_ms": 1} x`, 1, "not valid JSON"},
		{"NaN literal", `{"offset_ms": NaN}`, 1, "not valid JSON"},
		{"case-sensitive key", `{"OFFSET_MS": 5}`, 1, `missing "offset_ms"`},
		{"empty", "", 0, "arrival trace is empty"},
		{"only blank", "\n  \n\r\n", 0, "arrival trace is empty"},
		{"span too long", "{\"offset_ms\": 0}\n{\"offset_ms\": 1e16}\n", 2, "arrival trace line 2: the time from the earliest offset_ms (0, line 1) must be at most 604800000 milliseconds (7 days), not 10000000000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadOffsetTrace(strings.NewReader(tc.in), 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var te *TraceError
			if tc.line == 0 {
				if errors.As(err, &te) {
					t.Fatalf("unexpected line error %v", err)
				}
				return
			}
			if !errors.As(err, &te) || te.Line != tc.line {
				t.Fatalf("err = %v, want a line-%d error", err, tc.line)
			}
			if !strings.HasPrefix(err.Error(), "arrival trace line ") {
				t.Errorf("message %q does not name the line", err)
			}
		})
	}
}

func TestReadOffsetTraceArtifact(t *testing.T) {
	in := `{"schema_version":1,"event_type":"infer.session","status":"running"}` + "\n"
	_, _, err := ReadOffsetTrace(strings.NewReader(in), 0)
	if !errors.Is(err, ErrNotOffsetTrace) {
		t.Fatalf("err = %v, want ErrNotOffsetTrace", err)
	}
}

func TestReadOffsetTraceLimits(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 11; i++ {
		b.WriteString(`{"offset_ms": 1}` + "\n")
	}
	_, _, err := ReadOffsetTrace(strings.NewReader(b.String()), 10)
	var te *TraceError
	if !errors.Is(err, ErrTooManyArrivals) || !errors.As(err, &te) || te.Line != 11 {
		t.Fatalf("11 lines with max 10: err = %v", err)
	}
	if got, _, err := ReadOffsetTrace(strings.NewReader(b.String()), 11); err != nil || len(got) != 11 {
		t.Fatalf("11 lines with max 11: %d, %v", len(got), err)
	}
	long := `{"offset_ms": 1, "pad": "` + strings.Repeat("x", MaxTraceLineBytes) + `"}`
	_, _, err = ReadOffsetTrace(strings.NewReader("{\"offset_ms\": 0}\n"+long+"\n"), 0)
	if !errors.As(err, &te) || te.Line != 2 || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("long line: err = %v", err)
	}
	// A file over the size limit (MaxTraceBytes; 4 KiB here) is refused, however it ends.
	big := io.MultiReader(strings.NewReader(`{"offset_ms": 0}`+"\n"), &repeatReader{line: []byte("{\"offset_ms\": 1}\n"), left: 1 << 30})
	_, _, err = readOffsetTrace(big, 1<<20, 4096)
	if err == nil || !strings.Contains(err.Error(), "larger than 4096 bytes") {
		t.Fatalf("oversized file: err = %v", err)
	}
	// A reader error surfaces.
	_, _, err = ReadOffsetTrace(io.MultiReader(strings.NewReader(`{"offset_ms": 0}`+"\n"), errReader{}), 0)
	if err == nil || !strings.Contains(err.Error(), "reading arrival trace: boom") {
		t.Fatalf("reader error: err = %v", err)
	}
}

// repeatReader yields line over and over, left bytes in all.
type repeatReader struct {
	line []byte
	left int
	pos  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		c := copy(p[n:min(len(p), n+r.left)], r.line[r.pos:])
		n += c
		r.left -= c
		r.pos = (r.pos + c) % len(r.line)
	}
	return n, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestTraceFromSeconds(t *testing.T) {
	got, digest, err := TraceFromSeconds([]float64{1.5, 0.5, 0.7505})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []time.Duration{0, 250500 * time.Microsecond, time.Second}) {
		t.Errorf("offsets = %v", got)
	}
	if digest != "4d3504df3c9b285442a5fdaff1a50ad8c4a100c733b55d4fcb403fa3690470ae" {
		t.Errorf("digest = %s", digest)
	}
	for _, bad := range [][]float64{nil, {math.NaN()}, {1, math.Inf(1)}, {-1, 2}} {
		if _, _, err := TraceFromSeconds(bad); err == nil {
			t.Errorf("TraceFromSeconds(%v) succeeded", bad)
		}
	}
	// An artifact trace whose intended times span more than a week (a replay would wait for
	// the last arrival that long).
	_, _, err = TraceFromSeconds([]float64{1000, 1000 + 604800.5, 1001})
	if want := "the time from the first arrival to the last must be at most 604800 seconds (7 days), not 604800.5"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	in := []float64{3, 1, 2}
	TraceFromSeconds(in)
	if !slices.Equal(in, []float64{3, 1, 2}) {
		t.Error("input slice was modified")
	}
}

// Python's repr / json.dumps of floats, checked against CPython 3.
func TestPyFloatRepr(t *testing.T) {
	point1, point2 := 0.1, 0.2 // variables: a constant 0.1 + 0.2 would be exactly 0.3
	tests := map[float64]string{
		0: "0.0", 0.2505: "0.2505", 1: "1.0", 1e-05: "1e-05", 0.0001: "0.0001", 1e-09: "1e-09",
		123.456: "123.456", 1e15: "1000000000000000.0", 1e16: "1e+16", 1.5e16: "1.5e+16",
		point1 + point2: "0.30000000000000004", 1.0 / 3: "0.3333333333333333", 9.2e9: "9200000000.0",
		-2.5: "-2.5", 1e100: "1e+100", 1.2345e-7: "1.2345e-07",
	}
	for x, want := range tests {
		if got := pyFloatRepr(x); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", x, got, want)
		}
	}
	if got := pyFloatRepr(math.Copysign(0, -1)); got != "-0.0" {
		t.Errorf("-0 = %q", got)
	}
	// round(x, 9) as CPython: ties to even on the exact binary value.
	rounds := map[float64]string{point1 + point2: "0.3", 1.0 / 3: "0.333333333", 0.0009765625: "0.000976562", 1234567.0000000005: "1234567.0"}
	for x, want := range rounds {
		if got := pyFloatRepr(pyRound(x, 9)); got != want {
			t.Errorf("repr(round(%v, 9)) = %q, want %q", x, got, want)
		}
	}
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzReadOffsetTrace: never panics; on success the offsets are sorted, start at 0, are
// within the cap, and the digest is a SHA-256 hex string; on failure the error says so.
func FuzzReadOffsetTrace(f *testing.F) {
	f.Add([]byte("{\"offset_ms\": 1500}\n{\"offset_ms\": 500}\n{\"offset_ms\": 750.5}\n"))
	f.Add([]byte(`{"offset_ms": -1}`))
	f.Add([]byte("{\"offset_ms\": 1e308}\n{\"offset_ms\": 0}"))
	f.Add([]byte(`{"event_type":"infer.request"}`))
	f.Add([]byte("\ufeff{\"offset_ms\":0}\r\n"))
	f.Add([]byte(`{"offset_ms": 1, "offset_ms": "x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, digest, err := ReadOffsetTrace(bytes.NewReader(data), 100)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if len(got) == 0 || len(got) > 100 || got[0] != 0 || !slices.IsSorted(got) {
			t.Fatalf("bad offsets %v", got)
		}
		if !hexDigest.MatchString(digest) {
			t.Fatalf("bad digest %q", digest)
		}
	})
}
