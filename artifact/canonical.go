package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNonFinite is returned by Canonical and Digest for a NaN or infinite
// number: canonical JSON has no spelling for them.
var ErrNonFinite = errors.New("artifact: canonical JSON refuses NaN and infinite numbers")

// Canonical returns the canonical JSON text of v, the input of every digest
// (workload_digest, SLO digest). It is the text Python's json.dumps(sort_keys=True,
// separators=(",", ":")) writes after integral floats are turned into ints:
//
//   - object keys sorted by code point, no whitespace;
//   - a number with an integral value written as an integer, so 500, 500.0
//     and 5e2 are the same text (-0.0 is 0; 1e20 is 100000000000000000000);
//     other numbers in Python's repr form (0.1, 1e-05);
//   - strings ASCII-only: \" \\ \b \f \n \r \t, other characters outside
//     0x20–0x7e as \uXXXX (lowercase hex, surrogate pairs above U+FFFF).
//
// v is marshalled with encoding/json first (a json.RawMessage is used as
// it is). A NaN or infinite float64 is refused (ErrNonFinite); a Float's
// non-finite value is its string spelling ("NaN") and is kept as a string.
func Canonical(v any) ([]byte, error) {
	var data []byte
	switch x := v.(type) {
	case json.RawMessage:
		data = x
	default:
		var err error
		data, err = json.Marshal(v)
		if err != nil {
			var unsupported *json.UnsupportedValueError
			if errors.As(err, &unsupported) && (unsupported.Str == "NaN" || strings.HasSuffix(unsupported.Str, "Inf")) {
				return nil, fmt.Errorf("%w (%s)", ErrNonFinite, unsupported.Str)
			}
			return nil, fmt.Errorf("artifact: canonical JSON: %w", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("artifact: canonical JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("artifact: canonical JSON: trailing data after the value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Digest returns the SHA-256 of Canonical(v) as 64 lowercase hex digits, the
// spelling of workload_digest and the SLO digest (upstream writes the bare
// hexdigest, no "sha256:" prefix).
func Digest(v any) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		s, err := canonicalNumber(string(x))
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case string:
		writeCanonicalString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range sortedKeys(make([]string, 0, len(x)), x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonicalString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("artifact: canonical JSON: unexpected %T", v)
	}
	return nil
}

// canonicalNumber spells a JSON number literal canonically.
func canonicalNumber(s string) (string, error) {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0", nil
		}
		return s, nil // an integer of any size is kept as written
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("%w (%s)", ErrNonFinite, s)
	}
	if f == math.Trunc(f) {
		if f == 0 {
			return "0", nil
		}
		return new(big.Float).SetFloat64(f).Text('f', 0), nil
	}
	// Python's repr: shortest round-trip digits, scientific below 1e-4
	// (every non-integral float64 is below 1e16, repr's upper switch).
	if math.Abs(f) < 1e-4 {
		return strconv.FormatFloat(f, 'e', -1, 64), nil
	}
	return strconv.FormatFloat(f, 'f', -1, 64), nil
}

const hexDigits = "0123456789abcdef"

func writeCanonicalString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, r := range s { // invalid UTF-8 reads as U+FFFD, as encoding/json decodes it
		switch {
		case r == '"':
			buf.WriteString(`\"`)
		case r == '\\':
			buf.WriteString(`\\`)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r == '\b':
			buf.WriteString(`\b`)
		case r == '\f':
			buf.WriteString(`\f`)
		case r >= 0x20 && r <= 0x7e:
			buf.WriteByte(byte(r))
		case r > 0xffff:
			r -= 0x10000
			writeU(buf, 0xd800+(r>>10))
			writeU(buf, 0xdc00+(r&0x3ff))
		default:
			if r == utf8.RuneError {
				r = 0xfffd
			}
			writeU(buf, r)
		}
	}
	buf.WriteByte('"')
}

// writeU writes the escape \uXXXX of a BMP code point or surrogate.
func writeU(buf *bytes.Buffer, r rune) {
	var a [6]byte
	buf.Write(appendU(a[:0], r))
}

// appendU appends the JSON escape \uXXXX (lowercase hex) of a BMP code point
// or a surrogate half.
func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[(r>>12)&0xf], hexDigits[(r>>8)&0xf], hexDigits[(r>>4)&0xf], hexDigits[r&0xf])
}
