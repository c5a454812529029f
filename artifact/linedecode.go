package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// decodeLine decodes one non-blank line (whitespace trimmed). The returned
// error has Line unset.
func decodeLine(text []byte) (Line, *LineError) { return decodeLineIn(text, nil) }

// decodeLineIn is decodeLine with an infer.request v1 line decoded into sc
// when sc is not nil (the Request is then valid until sc's next line).
func decodeLineIn(text []byte, sc *requestScratch) (Line, *LineError) {
	if text[0] != '{' {
		if err := syntaxError(text); err != nil {
			return Line{}, &LineError{Err: err}
		}
		return Line{}, &LineError{Err: fmt.Errorf("not a JSON object (%s)", jsonTypeName(text[0]))}
	}
	kind, lerr := parseKind(text)
	if lerr != nil {
		return Line{}, lerr
	}
	rec := Line{Kind: kind, Raw: text}
	var err error
	switch kind {
	case KindSession:
		rec.Value, err = decodeAs[Session](text)
	case KindArtifact:
		rec.Value, err = decodeAs[ArtifactHeader](text)
	case KindWorkload:
		rec.Value, err = decodeAs[Workload](text)
	case KindSLO:
		rec.Value, err = decodeAs[SLORecord](text)
	case KindCacheState:
		rec.Value, err = decodeAs[CacheState](text)
	case KindPhaseWindow:
		rec.Value, err = decodeAs[PhaseWindow](text)
	case KindRequest:
		if sc != nil {
			if r := sc.decode(text); r != nil {
				rec.Value = r
				break
			}
			rec.Value, err = decodeAs[Request](text)
			break
		}
		r := new(Request)
		if decodeRequestFast(text, r) {
			rec.Value = r
		} else {
			rec.Value, err = decodeAs[Request](text)
		}
	case KindCapabilities:
		rec.Value, err = decodeAs[Capabilities](text)
	case KindClockAlignment:
		rec.Value, err = decodeAs[ClockAlignment](text)
	case KindTelemetrySample:
		rec.Value, err = decodeAs[TelemetrySample](text)
	case KindIteration:
		rec.Value, err = decodeAs[Iteration](text)
	case KindActivityRef:
		rec.Value, err = decodeAs[ActivityRef](text)
	case KindSpanContext:
		rec.Value, err = DecodeSpanContext(text)
	default:
		if err := syntaxError(text); err != nil {
			return Line{}, &LineError{Err: err}
		}
		rec.Value = &Raw{Kind: kind, JSON: bytes.Clone(text)}
	}
	if err != nil {
		return Line{}, lineError(err)
	}
	return rec, nil
}

func decodeAs[T any](text []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(text, v); err != nil {
		return nil, err
	}
	return v, nil
}

// syntaxError returns the JSON syntax error of text, or nil when it is valid.
func syntaxError(text []byte) error {
	if json.Valid(text) {
		return nil
	}
	var v json.RawMessage
	err := json.Unmarshal(text, &v)
	if err == nil {
		err = errors.New("invalid JSON")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func jsonTypeName(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a bool"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// lineError turns an encoding/json error into a LineError naming the field.
func lineError(err error) *LineError {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return &LineError{Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		got := te.Value
		if num, ok := strings.CutPrefix(got, "number "); ok && te.Type != nil && isIntKind(te.Type.Kind()) {
			if strings.ContainsAny(num, ".eE") {
				return &LineError{Field: field, Err: fmt.Errorf("integer spelled as a float (%s)", num)}
			}
			return &LineError{Field: field, Err: fmt.Errorf("integer out of range (%s)", num)}
		}
		want := "a value of another type"
		if te.Type != nil {
			want = describeType(te.Type)
		}
		return &LineError{Field: field, Err: fmt.Errorf("expected %s, got %s", want, got)}
	}
	return &LineError{Err: err}
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func describeType(t reflect.Type) string {
	switch {
	case isIntKind(t.Kind()):
		return "an integer"
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return "a number"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a bool"
	case t.Kind() == reflect.Slice:
		return "an array"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return "an object"
	}
	return t.String()
}
