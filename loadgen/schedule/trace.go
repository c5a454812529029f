package schedule

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// Size limits of an --arrival-trace file read by ReadOffsetTrace.
const (
	// MaxTraceLineBytes is the longest line accepted (a trace line is ~25 bytes).
	MaxTraceLineBytes = 64 << 10
	// MaxTraceBytes is the largest trace accepted (1,000,000 arrivals take ~30 MB).
	MaxTraceBytes = 256 << 20
)

// ErrNotOffsetTrace is returned (wrapped) by ReadOffsetTrace when the first line is a JSON
// object without offset_ms but with event_type: the file looks like an inferprobe (or
// Stormlog) artifact, whose measured requests the caller should replay instead.
var ErrNotOffsetTrace = errors.New("arrival trace has no offset_ms lines (it looks like an artifact)")

// TraceError is an invalid line of an arrival trace. Line is 1-based and counts every line,
// blank ones included.
type TraceError struct {
	Line int
	Err  error
}

func (e *TraceError) Error() string { return fmt.Sprintf("arrival trace line %d: %v", e.Line, e.Err) }

// Unwrap returns the underlying error (ErrTooManyArrivals for an over-long trace).
func (e *TraceError) Unwrap() error { return e.Err }

// ReadOffsetTrace reads an --arrival-trace in the offset form: JSON lines, each an object
// with a numeric "offset_ms" (milliseconds; other keys are ignored; blank lines are
// skipped). The offsets are sorted and shifted so that the
// first is 0: 1500, 500, 750.5 ms become 0, 250.5 ms, 1 s. It returns them with the trace
// digest that infer.workload records under arrival.trace.digest (see TraceFromSeconds).
//
// maxArrivals caps the number of lines with an offset (≤ 0 means MaxArrivals); more is a
// *TraceError wrapping ErrTooManyArrivals. Other errors: a line that is not valid JSON or
// not an object, a missing offset_ms, an offset_ms that is not a number (strings,
// booleans, null), negative or beyond float64's range, an offset more than
// artifact.MaxSeconds (7 days) after the earliest one (the replay would wait that long; the
// error names its line and the earliest's), a line over MaxTraceLineBytes, a file over
// MaxTraceBytes, an empty or all-blank file, and
// ErrNotOffsetTrace (wrapped) when the first line looks like an artifact record (an object
// with event_type and no offset_ms): the caller then reads the file as an artifact. Line
// errors are *TraceError values naming the line. A UTF-8 byte-order mark is ignored. All
// of these are the contract's "unreadable --arrival-trace" (exit 5).
func ReadOffsetTrace(r io.Reader, maxArrivals int) ([]time.Duration, string, error) {
	return readOffsetTrace(r, maxArrivals, MaxTraceBytes)
}

func readOffsetTrace(r io.Reader, maxArrivals int, maxBytes int64) ([]time.Duration, string, error) {
	if maxArrivals <= 0 {
		maxArrivals = MaxArrivals
	}
	lr := &io.LimitedReader{R: r, N: maxBytes + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), MaxTraceLineBytes)
	var offsets []float64
	var lines []int // the line of each offset
	line := 0
	// Past the size limit the last line read may be cut short: report the size, not the cut.
	fail := func(err error) ([]time.Duration, string, error) {
		if lr.N <= 0 {
			return nil, "", fmt.Errorf("arrival trace is larger than %d bytes", maxBytes)
		}
		return nil, "", err
	}
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return fail(&TraceError{line, errors.New(`not a JSON object (each line is {"offset_ms": n})`)})
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return fail(&TraceError{line, fmt.Errorf("not valid JSON: %v", err)})
		}
		raw, ok := obj["offset_ms"]
		if !ok {
			if len(offsets) == 0 {
				if _, artifact := obj["event_type"]; artifact {
					return nil, "", fmt.Errorf("line %d has event_type and no offset_ms: %w", line, ErrNotOffsetTrace)
				}
			}
			return fail(&TraceError{line, errors.New(`missing "offset_ms"`)})
		}
		ms, err := offsetMS(raw)
		if err != nil {
			return fail(&TraceError{line, err})
		}
		if len(offsets) == maxArrivals {
			return nil, "", &TraceError{line, fmt.Errorf("more than %d arrivals: %w", maxArrivals, ErrTooManyArrivals)}
		}
		offsets = append(offsets, ms/1000)
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fail(&TraceError{line + 1, fmt.Errorf("longer than %d bytes", MaxTraceLineBytes)})
		}
		return fail(fmt.Errorf("reading arrival trace: %w", err))
	}
	if lr.N <= 0 {
		return fail(nil)
	}
	if len(offsets) == 0 {
		return nil, "", errors.New(`arrival trace is empty (expected JSON lines of {"offset_ms": n})`)
	}
	if err := checkSpan(offsets, lines); err != nil {
		return nil, "", err
	}
	return TraceFromSeconds(offsets)
}

// offsetRange is the rule of one offset_ms value; spanRange that of the time from the
// earliest offset to any other, which is how long the replay waits for it.
var (
	offsetRange = artifact.Range{Min: 0, Max: math.Inf(1), Unit: "milliseconds"}
	spanRange   = artifact.Range{Min: 0, Max: artifact.MaxSeconds * 1000, Unit: "milliseconds"}
)

// checkSpan refuses a trace whose offsets (seconds, each read from lines[i]) lie more than
// artifact.MaxSeconds after the earliest one, naming the first such line.
func checkSpan(offsets []float64, lines []int) error {
	first := 0
	for i, v := range offsets {
		if v < offsets[first] {
			first = i
		}
	}
	for i, v := range offsets {
		if err := spanRange.Check((v - offsets[first]) * 1000); err != nil {
			return &TraceError{lines[i], fmt.Errorf("the time from the earliest offset_ms (%s, line %d) %w", formatMS(offsets[first]), lines[first], err)}
		}
	}
	return nil
}

// formatMS writes an offset in seconds as the milliseconds it was read from.
func formatMS(secs float64) string { return strconv.FormatFloat(secs*1000, 'g', -1, 64) }

// offsetMS parses an offset_ms value: a JSON number, within float64's range and ≥ 0.
func offsetMS(raw json.RawMessage) (float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, fmt.Errorf("offset_ms must be a number, got %s", clip(raw))
	}
	v, err := artifact.ParseNumber(string(raw))
	if err != nil {
		return 0, fmt.Errorf("offset_ms %w", err)
	}
	if err := offsetRange.Check(v); err != nil {
		return 0, fmt.Errorf("offset_ms %w", err)
	}
	return v, nil
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// TraceFromSeconds turns recorded arrival times in seconds (any origin, any order: e.g.
// (intended_at_ns − min)/1e9 of an artifact's measured requests) into replay offsets: sorted
// and shifted so the first is 0, rounded to the nanosecond. The digest is the SHA-256 (hex)
// of the JSON list of the shifted offsets in seconds, each rounded to 9 decimals and written
// as Python's json.dumps writes floats ("[0.0, 0.2505, 1.0]"), so that it equals the
// arrival.trace.digest Stormlog records for the same trace. Errors: an empty list, a value
// that is negative or not finite, a span (first to last) over artifact.MaxSeconds.
func TraceFromSeconds(offsets []float64) ([]time.Duration, string, error) {
	if len(offsets) == 0 {
		return nil, "", errors.New("arrival trace has no arrivals")
	}
	sorted := slices.Clone(offsets)
	for i, v := range sorted {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, "", fmt.Errorf("arrival %d: offset %g s is not a finite number ≥ 0", i, v)
		}
	}
	slices.Sort(sorted)
	first := sorted[0]
	if err := artifact.Seconds(0, false).Check(sorted[len(sorted)-1] - first); err != nil {
		return nil, "", fmt.Errorf("the time from the first arrival to the last %w", err)
	}
	out := make([]time.Duration, len(sorted))
	var js strings.Builder
	js.Grow(len(sorted) * 14)
	js.WriteByte('[')
	for i, v := range sorted {
		v -= first
		d, err := seconds(v)
		if err != nil {
			return nil, "", err
		}
		out[i] = d
		if i > 0 {
			js.WriteString(", ")
		}
		js.WriteString(pyFloatRepr(pyRound(v, 9)))
	}
	js.WriteByte(']')
	sum := sha256.Sum256([]byte(js.String()))
	return out, hex.EncodeToString(sum[:]), nil
}

// pyRound returns Python's round(x, n) for a float: the double nearest to x correctly
// rounded to n decimals (ties to even on the exact binary value, as strconv does).
func pyRound(x float64, n int) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	if err != nil {
		return x
	}
	return v
}

// pyFloatRepr formats a finite float as Python's repr (and json.dumps) does: the shortest
// digits that round-trip, in positional form with at least one decimal ("1.0", "0.2505")
// when the decimal exponent is in [-4, 16), otherwise in exponent form ("1e-05", "1.5e+16").
func pyFloatRepr(x float64) string {
	if x == 0 {
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if exp >= -4 && exp < 16 {
		if exp < 0 {
			return sign + "0." + strings.Repeat("0", -exp-1) + digits
		}
		if len(digits) <= exp+1 {
			return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
		}
		return sign + digits[:exp+1] + "." + digits[exp+1:]
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	esign := "+"
	if exp < 0 {
		esign, exp = "-", -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return sign + m + "e" + esign + es
}
