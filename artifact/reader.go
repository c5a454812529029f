package artifact

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
)

// ErrInvalidArtifact marks every error that means the artifact itself is
// missing, unreadable, unparsable or invalid — what the CLI maps to exit
// code 5 (stormlog.md §6). Test with errors.Is.
var ErrInvalidArtifact = errors.New("invalid artifact")

// LineError is a bad line: not JSON, not an object, a field of the wrong
// type (an integer field spelled as a float, e.g. 5.0 or 1e9), or a line
// over the length limit. It matches ErrInvalidArtifact with errors.Is.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Field is the JSON path of the offending field ("request_index",
	// "abandoned_requests.running_at_start"), "" when the line as a whole
	// is bad.
	Field string
	Err   error
}

// Error renders "invalid artifact: line N: field F: reason".
func (e *LineError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%v: line %d: field %s: %v", ErrInvalidArtifact, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%v: line %d: %v", ErrInvalidArtifact, e.Line, e.Err)
}

// Unwrap returns ErrInvalidArtifact and the underlying error.
func (e *LineError) Unwrap() []error { return []error{ErrInvalidArtifact, e.Err} }

// Line is one decoded line of an artifact.
type Line struct {
	// Line is the 1-based line number.
	Line int
	// Kind is the line's event_type and schema_version.
	Kind Kind
	// Value is *Session, *ArtifactHeader, *Workload, *SLORecord,
	// *CacheState, *PhaseWindow, *Request, *Capabilities, *ClockAlignment or
	// *TelemetrySample for those kinds (the Kind* variables), and *Raw for every other kind,
	// including infer.request v2 and lines without an event_type.
	Value Record
	// Raw is the line's text (surrounding whitespace removed). It is valid
	// only during the callback; copy it to keep it.
	Raw json.RawMessage
}

// Truncation describes a last line cut short: no trailing newline and not
// valid JSON, as a writer killed mid-line leaves it.
type Truncation struct {
	// Line is the 1-based line number of the cut line.
	Line int
	// Bytes is how many bytes of it are present.
	Bytes int
}

// String describes the truncation for a warning.
func (t Truncation) String() string {
	return fmt.Sprintf("line %d is truncated (%d bytes, no trailing newline); it was ignored", t.Line, t.Bytes)
}

// Stats summarises a read.
type Stats struct {
	// Lines counts lines read, blank and truncated ones included.
	Lines int
	// Records counts records delivered to the callback.
	Records int
	// BlankLines counts whitespace-only lines (skipped).
	BlankLines int
	// Kinds counts records by kind.
	Kinds map[Kind]int
	// MissingFinalNewline is set when the last line parsed but had no
	// trailing newline.
	MissingFinalNewline bool
	// Truncated is set when the last line was cut short and ignored.
	Truncated *Truncation
}

// Reader reads artifacts with non-default limits. The zero value uses
// MaxLineBytes.
type Reader struct {
	// MaxLineBytes bounds one line (newline excluded); 0 means MaxLineBytes.
	MaxLineBytes int
}

// Read streams the artifact in r, calling fn for each record in file order;
// see Reader.Read.
func Read(r io.Reader, fn func(Line) error) (Stats, error) {
	return Reader{}.Read(r, fn)
}

// Read streams the artifact in r, calling fn for each record in file order.
// It dispatches on event_type and schema_version (infer.request v2 is kept
// as *Raw, never decoded as a v1 Request), keeps unknown kinds as *Raw,
// skips blank lines, and strips a trailing CR. A last line without a
// trailing newline that is not valid JSON is reported in Stats.Truncated and
// ignored. Anything else that is wrong — invalid JSON, a non-object line, a
// non-string event_type, a non-integer schema_version, a field of the wrong
// type (an integer spelled as a float), a line over the limit, a read
// error — stops the read with a *LineError (or an error wrapping
// ErrInvalidArtifact). An error returned by fn stops the read and is
// returned as is. Memory use is bounded by one line.
func (rd Reader) Read(r io.Reader, fn func(Line) error) (Stats, error) {
	maxLine := rd.MaxLineBytes
	if maxLine <= 0 {
		maxLine = MaxLineBytes
	}
	st := Stats{Kinds: map[Kind]int{}}
	br := bufio.NewReaderSize(r, 64<<10)
	var acc []byte
	for {
		line, newline, err := readLine(br, &acc, maxLine)
		if err == io.EOF {
			return st, nil
		}
		st.Lines++
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return st, &LineError{Line: st.Lines, Err: fmt.Errorf("line is longer than %d bytes", maxLine)}
			}
			return st, fmt.Errorf("%w: reading line %d: %w", ErrInvalidArtifact, st.Lines, err)
		}
		text := bytes.TrimSpace(line)
		if len(text) == 0 {
			st.BlankLines++
			continue
		}
		if !newline {
			if !json.Valid(text) {
				st.Truncated = &Truncation{Line: st.Lines, Bytes: len(line)}
				return st, nil
			}
			st.MissingFinalNewline = true
		}
		rec, lerr := decodeLine(text)
		if lerr != nil {
			lerr.Line = st.Lines
			return st, lerr
		}
		rec.Line = st.Lines
		st.Records++
		st.Kinds[rec.Kind]++
		if err := fn(rec); err != nil {
			return st, err
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its '\n', whether it ended in one,
// or io.EOF when nothing is left. The slice is valid until the next call.
func readLine(br *bufio.Reader, acc *[]byte, maxLine int) ([]byte, bool, error) {
	*acc = (*acc)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		switch err {
		case nil:
			if len(*acc)+len(chunk)-1 > maxLine {
				return nil, false, errLineTooLong
			}
			if len(*acc) == 0 {
				return chunk[:len(chunk)-1], true, nil
			}
			*acc = append(*acc, chunk...)
			return (*acc)[:len(*acc)-1], true, nil
		case bufio.ErrBufferFull:
			if len(*acc)+len(chunk) > maxLine {
				return nil, false, errLineTooLong
			}
			*acc = append(*acc, chunk...)
		case io.EOF:
			if len(*acc)+len(chunk) == 0 {
				return nil, false, io.EOF
			}
			if len(*acc)+len(chunk) > maxLine {
				return nil, false, errLineTooLong
			}
			*acc = append(*acc, chunk...)
			return *acc, false, nil
		default:
			return nil, false, err
		}
	}
}

// decodeLine decodes one non-blank line (whitespace trimmed). The returned
// error has Line unset.
func decodeLine(text []byte) (Line, *LineError) {
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
			return Kind{}, &LineError{Field: "schema_version", Err: fmt.Errorf("schema_version must be an integer, got %s", truncateForError(v))}
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
	case EventVLLMScrape:
		return EventVLLMScrape
	case EventVLLMSpan:
		return EventVLLMSpan
	case EventTelemetrySample:
		return EventTelemetrySample
	}
	return string(b)
}

// Artifact is a whole artifact loaded for analysis, records in file order.
type Artifact struct {
	// Path is the file read.
	Path string
	// Sessions holds every infer.session v1 record: normally the running
	// one first and the final one last.
	Sessions []Session
	// Header is the first infer.artifact v2 record, nil when there is none.
	Header *ArtifactHeader
	// Workload is the first infer.workload v1 record, nil when there is none.
	Workload *Workload
	// SLOs holds every infer.slo v1 record (more than one is an input error
	// for analysis, stormlog.md §5 item 47).
	SLOs            []SLORecord
	CacheStates     []CacheState
	PhaseWindows    []PhaseWindow
	Requests        []Request
	Capabilities    []Capabilities
	ClockAlignments []ClockAlignment
	// TelemetrySamples holds every infer.telemetry_sample v1 record.
	TelemetrySamples []TelemetrySample
	// Others holds every record kept as *Raw (infer.request v2, vLLM scrapes
	// and spans, unknown kinds) and any infer.artifact or
	// infer.workload after the first.
	Others []Raw
	// Truncated is set when the last line was cut short and ignored.
	Truncated *Truncation
	// Stats is the read's summary.
	Stats Stats
}

// FinalSession returns the last infer.session record with a terminal status
// (completed, interrupted, incomplete), or nil when the artifact has none
// (the producer was killed before writing it).
func (a *Artifact) FinalSession() *Session {
	for i := len(a.Sessions) - 1; i >= 0; i-- {
		if a.Sessions[i].Terminal() {
			return &a.Sessions[i]
		}
	}
	return nil
}

// Validate checks what every analysis needs: at least one infer.session v1
// and one infer.request v1 record (stormlog.md §6, analyze exits 5
// otherwise). The error wraps ErrInvalidArtifact.
func (a *Artifact) Validate() error {
	name := a.Path
	if name == "" {
		name = "artifact"
	}
	if len(a.Sessions) == 0 {
		return fmt.Errorf("%w: %s has no infer.session record", ErrInvalidArtifact, name)
	}
	if len(a.Requests) == 0 {
		if n := a.Stats.Kinds[KindRequestV2]; n > 0 {
			return fmt.Errorf("%w: %s has no infer.request v1 record (only %d correlation-model infer.request v2 records)", ErrInvalidArtifact, name, n)
		}
		return fmt.Errorf("%w: %s has no infer.request record", ErrInvalidArtifact, name)
	}
	return nil
}

// ReadFile loads the artifact at path; see ReadFileContext.
func ReadFile(path string) (*Artifact, error) {
	return ReadFileContext(context.Background(), path)
}

// ReadFileContext loads the artifact at path into memory, checking ctx
// every few thousand lines. It does not call Validate. A missing or
// unreadable file and every read error wrap ErrInvalidArtifact (and, for a
// missing file, fs.ErrNotExist); ctx's error is returned as is. Repeated
// low-cardinality strings of requests (session, case, phase, endpoint,
// model, status, sources, modes) share one copy.
func ReadFileContext(ctx context.Context, path string) (*Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArtifact, err)
	}
	defer f.Close()
	a := &Artifact{Path: path}
	strs := map[string]string{}
	intern := func(s *string) {
		if v, ok := strs[*s]; ok {
			*s = v
			return
		}
		if len(strs) < 1<<16 {
			strs[*s] = *s
		}
	}
	st, err := Read(f, func(rec Line) error {
		if rec.Line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		switch v := rec.Value.(type) {
		case *Session:
			a.Sessions = append(a.Sessions, *v)
		case *ArtifactHeader:
			if a.Header == nil {
				a.Header = v
			} else {
				a.Others = append(a.Others, Raw{Kind: rec.Kind, JSON: bytes.Clone(rec.Raw)})
			}
		case *Workload:
			if a.Workload == nil {
				a.Workload = v
			} else {
				a.Others = append(a.Others, Raw{Kind: rec.Kind, JSON: bytes.Clone(rec.Raw)})
			}
		case *SLORecord:
			a.SLOs = append(a.SLOs, *v)
		case *CacheState:
			a.CacheStates = append(a.CacheStates, *v)
		case *PhaseWindow:
			a.PhaseWindows = append(a.PhaseWindows, *v)
		case *Request:
			for _, s := range []*string{&v.SessionID, &v.CaseID, &v.Phase, &v.Endpoint, &v.Model, &v.Status,
				&v.PromptTokenSource, &v.OutputTokenSource, &v.ArrivalMode, &v.PromptMode} {
				intern(s)
			}
			a.Requests = append(a.Requests, *v)
		case *Capabilities:
			a.Capabilities = append(a.Capabilities, *v)
		case *ClockAlignment:
			a.ClockAlignments = append(a.ClockAlignments, *v)
		case *TelemetrySample:
			a.TelemetrySamples = append(a.TelemetrySamples, *v)
		case *Raw:
			a.Others = append(a.Others, *v)
		}
		return nil
	})
	a.Stats = st
	a.Truncated = st.Truncated
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
