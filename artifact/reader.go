package artifact

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrInvalidArtifact marks every error that means the artifact itself is
// missing, unreadable, unparsable or invalid — what the CLI maps to exit
// code 5. Test with errors.Is.
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
	// *CacheState, *PhaseWindow, *Request, *Capabilities, *ClockAlignment,
	// *TelemetrySample, *Iteration, *ActivityRef or *SpanContext for those kinds (the Kind*
	// variables), and *Raw for every other kind, including infer.request v2, infer.vllm_span
	// (v2 with Raw.Context unresolved: Read decodes lines one by one; ReadFile resolves it) and
	// lines without an event_type.
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
	// ReuseRequests makes every infer.request v1 Line of one Read share one
	// *Request whose strings, pointers and chunk gaps live in memory the
	// read reuses: like Line.Raw, the Value is valid only during the
	// callback, and a callback that keeps any part of it must copy it. The
	// values are those of a read without it. It saves allocating each
	// request for a reader that copies what it keeps.
	ReuseRequests bool
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
	maxLine := rd.maxLine()
	br := bufio.NewReaderSize(r, 64<<10)
	var acc []byte
	return rd.read(func() ([]byte, bool, error) { return readLine(br, &acc, maxLine) }, fn)
}

// ReadBytes is Read(bytes.NewReader(data), fn) without copying data through a buffer: the
// same records, Stats and errors (FuzzReadBytes checks this). Line.Raw (and, with
// ReuseRequests, the Request's strings) may point into data during the callback.
func (rd Reader) ReadBytes(data []byte, fn func(Line) error) (Stats, error) {
	maxLine := rd.maxLine()
	return rd.read(func() ([]byte, bool, error) { return sliceLine(&data, maxLine) }, fn)
}

// maxLine is MaxLineBytes, or the package default for 0.
func (rd Reader) maxLine() int {
	if rd.MaxLineBytes <= 0 {
		return MaxLineBytes
	}
	return rd.MaxLineBytes
}

// read is Read over next, which returns each line as readLine does.
func (rd Reader) read(next func() ([]byte, bool, error), fn func(Line) error) (Stats, error) {
	maxLine := rd.maxLine()
	st := Stats{Kinds: map[Kind]int{}}
	var sc *requestScratch
	if rd.ReuseRequests {
		sc = newRequestScratch()
	}
	for {
		line, newline, err := next()
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
		rec, lerr := decodeLineIn(text, sc)
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

// sliceLine is readLine over the bytes left in *data: the next line without its '\n' (a view
// of *data), whether it ended in one, or io.EOF when nothing is left; errLineTooLong for a
// line over maxLine bytes. It advances *data past the line.
func sliceLine(data *[]byte, maxLine int) ([]byte, bool, error) {
	d := *data
	if len(d) == 0 {
		return nil, false, io.EOF
	}
	i := bytes.IndexByte(d, '\n')
	if i < 0 {
		*data = d[len(d):]
		if len(d) > maxLine {
			return nil, false, errLineTooLong
		}
		return d, false, nil
	}
	*data = d[i+1:]
	if i > maxLine {
		return nil, false, errLineTooLong
	}
	return d[:i], true, nil
}

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
