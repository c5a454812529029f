package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

var fastPrefix = []byte(`{"event_type":"`)

const fastVersion = `,"schema_version":`

// parseKind reads a line's event_type and schema_version. Lines written by
// this package start with both and take a fast path; anything else is
// decoded in full.
func parseKind(line []byte) (Kind, *LineError) {
	if k, ok := fastKind(line); ok {
		return k, nil
	}
	var h struct {
		EventType     json.RawMessage `json:"event_type"`
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return Kind{}, lineError(err)
	}
	var k Kind
	if len(h.EventType) > 0 && string(h.EventType) != "null" {
		if h.EventType[0] != '"' {
			return Kind{}, &LineError{Field: "event_type", Err: errors.New("event_type must be a string")}
		}
		if err := json.Unmarshal(h.EventType, &k.EventType); err != nil {
			return Kind{}, &LineError{Field: "event_type", Err: err}
		}
	}
	if v := h.SchemaVersion; len(v) > 0 && string(v) != "null" {
		switch {
		case isIntegerLiteral(v):
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return Kind{}, &LineError{Field: "schema_version", Err: fmt.Errorf("integer out of range (%s)", v)}
			}
			k.SchemaVersion = n
		case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
			return Kind{}, &LineError{Field: "schema_version", Err: fmt.Errorf("integer spelled as a float (%s)", v)}
		default:
			return Kind{}, &LineError{Field: "schema_version", Err: fmt.Errorf("schema_version must be an integer, got %s", truncateText(string(v), 40))}
		}
	}
	return k, nil
}

func isIntegerLiteral(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func fastKind(line []byte) (Kind, bool) {
	if !bytes.HasPrefix(line, fastPrefix) {
		return Kind{}, false
	}
	rest := line[len(fastPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return Kind{}, false
	}
	name := rest[:end]
	for _, c := range name {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return Kind{}, false
		}
	}
	rest = rest[end+1:]
	if !bytes.HasPrefix(rest, []byte(fastVersion)) {
		return Kind{}, false
	}
	rest = rest[len(fastVersion):]
	j := 0
	if j < len(rest) && rest[j] == '-' {
		j++
	}
	digits := j
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == digits || j >= len(rest) || (rest[j] != ',' && rest[j] != '}') {
		return Kind{}, false
	}
	if j-digits > 1 && rest[digits] == '0' { // leading zero: let the full decoder judge
		return Kind{}, false
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return Kind{}, false
	}
	return Kind{EventType: eventTypeString(name), SchemaVersion: n}, true
}

// eventTypeString returns the constant for a known event type, avoiding an
// allocation per line.
func eventTypeString(b []byte) string {
	switch string(b) {
	case EventSession:
		return EventSession
	case EventArtifact:
		return EventArtifact
	case EventWorkload:
		return EventWorkload
	case EventSLO:
		return EventSLO
	case EventCacheState:
		return EventCacheState
	case EventPhaseWindow:
		return EventPhaseWindow
	case EventRequest:
		return EventRequest
	case EventCapabilities:
		return EventCapabilities
	case EventClockAlignment:
		return EventClockAlignment
	case EventMetricsScrape:
		return EventMetricsScrape
	case EventSpan:
		return EventSpan
	case EventSpanContext:
		return EventSpanContext
	case EventTelemetrySample:
		return EventTelemetrySample
	case EventActivityRef:
		return EventActivityRef
	case EventIteration:
		return EventIteration
	}
	return string(b)
}
