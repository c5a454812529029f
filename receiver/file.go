package receiver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// Limits of ReadSpanFile.
const (
	// MaxSpanFileLineBytes bounds one line of a spans file (one OTLP export
	// or one span): 64 MiB, the artifact's line limit.
	MaxSpanFileLineBytes = artifact.MaxLineBytes
	// MaxSpanFileDocumentBytes bounds a file that is not one JSON value per
	// line (a pretty-printed OTLP JSON document): it is read whole.
	MaxSpanFileDocumentBytes = 64 << 20
	// MaxSpanFileBytes bounds the whole file: 1 GiB.
	MaxSpanFileBytes = 1 << 30
	// MaxSpanFileSpans bounds the spans of one file.
	MaxSpanFileSpans = 1_000_000
)

// ErrInvalidSpanFile is wrapped by every ReadSpanFile / ReadSpans error
// about the file's content (as opposed to opening or reading it).
var ErrInvalidSpanFile = errors.New("invalid spans file")

// ReadSpanFile reads the spans of `analyze --vllm-spans FILE`. The file
// holds, one JSON value per line (blank lines skipped):
//
//   - OTLP JSON ExportTraceServiceRequest objects ({"resourceSpans": ...},
//     what a collector's file exporter writes) → Source "otlp_json_file";
//     ids must be hex (base64 ids are refused), 64-bit integers may be
//     numbers or strings and are read exactly;
//   - infer.vllm_span v1 records (DecodeSpan) and v2 records, resolved
//     against the infer.vllm_span_context lines before them (an artifact
//     file as the Writer writes it; an unknown context is an error); lines
//     of other event_types, e.g. the rest of an artifact, are skipped →
//     Source "jsonl_file";
//   - span objects in the infer.vllm_span shape without the header — at
//     least "name", with start_unix_ns, end_unix_ns, attributes, ... as
//     available (the stormlog sink format) → Source "jsonl_file".
//
// A file whose first value spans several lines (a pretty-printed OTLP
// document) is read whole, up to MaxSpanFileDocumentBytes. SessionID and
// RunID are left as the lines had them (empty for OTLP and plain span
// lines: the caller stamps them); ReceivedAtNS is nil for OTLP and plain
// span lines. ClockDomain is the line's, else the resource's host.name,
// else "unknown-host/unix_epoch_ns". RequestID is recovered from
// gen_ai.request.id when the line has none. Errors name the path and line
// and wrap ErrInvalidSpanFile (a file without any span-bearing line, an
// invalid line, a span without a name, end before start, limits exceeded);
// a missing file gives the *fs.PathError of os.Open.
func ReadSpanFile(path string) ([]artifact.Span, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("receiver: %s: %w: is a directory", path, ErrInvalidSpanFile)
		}
		if st.Size() > MaxSpanFileBytes {
			return nil, fmt.Errorf("receiver: %s: %w: %d bytes, over the %d-byte limit", path, ErrInvalidSpanFile, st.Size(), int64(MaxSpanFileBytes))
		}
	}
	spans, err := ReadSpans(f)
	if err != nil {
		return nil, fmt.Errorf("receiver: %s: %w", path, err)
	}
	return spans, nil
}

// ReadSpans reads the content of a spans file from r; see ReadSpanFile.
func ReadSpans(r io.Reader) ([]artifact.Span, error) {
	rd := &spanReader{}
	br := bufio.NewReaderSize(io.LimitReader(r, MaxSpanFileBytes+1), 64<<10)
	var acc []byte
	lineNo := 0
	first := true
	var total int64
	for {
		line, err := readLine(br, &acc, MaxSpanFileLineBytes)
		if err == io.EOF {
			break
		}
		lineNo++
		if err != nil {
			return nil, rd.lineErr(lineNo, err)
		}
		total += int64(len(line)) + 1
		if total > MaxSpanFileBytes {
			return nil, fmt.Errorf("%w: over %d bytes", ErrInvalidSpanFile, int64(MaxSpanFileBytes))
		}
		text := bytes.TrimSpace(line)
		if len(text) == 0 {
			continue
		}
		if first {
			first = false
			if !json.Valid(text) && text[0] == '{' {
				// Not one value per line: read the document whole.
				return rd.document(text, br)
			}
		}
		if err := rd.value(text); err != nil {
			return nil, rd.lineErr(lineNo, err)
		}
	}
	return rd.finish()
}

// spanReader accumulates the spans of one file.
type spanReader struct {
	spans    []artifact.Span
	bearing  int // lines that were OTLP exports or spans
	skipped  int // artifact records of other event types
	nonEmpty bool
	contexts artifact.SpanContexts // the infer.vllm_span_context lines read so far
}

func (rd *spanReader) lineErr(line int, err error) error {
	if errors.Is(err, ErrInvalidSpanFile) {
		return fmt.Errorf("line %d: %w", line, err)
	}
	return fmt.Errorf("line %d: %w: %v", line, ErrInvalidSpanFile, err)
}

func (rd *spanReader) finish() ([]artifact.Span, error) {
	if !rd.nonEmpty {
		return nil, fmt.Errorf("%w: the file is empty", ErrInvalidSpanFile)
	}
	if rd.bearing == 0 {
		return nil, fmt.Errorf("%w: no OTLP export, infer.vllm_span record or span object in it (%d other records skipped)", ErrInvalidSpanFile, rd.skipped)
	}
	return rd.spans, nil
}

// document reads a multi-line file as a sequence of JSON values.
func (rd *spanReader) document(head []byte, rest io.Reader) ([]artifact.Span, error) {
	buf := bytes.NewBuffer(append(append([]byte(nil), head...), '\n'))
	n, err := buf.ReadFrom(io.LimitReader(rest, MaxSpanFileDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSpanFile, err)
	}
	if n > MaxSpanFileDocumentBytes {
		return nil, fmt.Errorf("%w: a multi-line JSON document over %d bytes (write one export per line)", ErrInvalidSpanFile, MaxSpanFileDocumentBytes)
	}
	dec := json.NewDecoder(buf)
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("JSON value %d: %w: %v", i, ErrInvalidSpanFile, err)
		}
		if err := rd.value(bytes.TrimSpace(raw)); err != nil {
			return nil, fmt.Errorf("JSON value %d: %w", i, err)
		}
	}
	return rd.finish()
}

// probe tells the kinds of line apart.
type probe struct {
	EventType      *string         `json:"event_type"`
	ResourceSpans  json.RawMessage `json:"resourceSpans"`
	ResourceSpans2 json.RawMessage `json:"resource_spans"`
	Name           json.RawMessage `json:"name"`
}

// value handles one JSON value of the file.
func (rd *spanReader) value(text []byte) error {
	rd.nonEmpty = true
	if text[0] != '{' {
		if !json.Valid(text) {
			return fmt.Errorf("%w: invalid JSON", ErrInvalidSpanFile)
		}
		return fmt.Errorf("%w: not a JSON object", ErrInvalidSpanFile)
	}
	var p probe
	if err := json.Unmarshal(text, &p); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSpanFile, err)
	}
	var recs []artifact.Span
	switch {
	case p.EventType != nil && *p.EventType == artifact.EventSpanContext:
		c, err := artifact.DecodeSpanContext(text)
		if err == nil {
			err = rd.contexts.Add(c)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidSpanFile, err)
		}
		rd.skipped++
		return nil
	case p.EventType != nil:
		if *p.EventType != artifact.EventSpan {
			rd.skipped++
			return nil
		}
		rec, err := rd.contexts.DecodeSpan(text)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidSpanFile, err)
		}
		rec.Source = artifact.SpanSourceJSONL
		if rec.ClockDomain == "" {
			rec.ClockDomain = resourceDomain(rec.Resource)
		}
		recs = []artifact.Span{rec}
	case p.ResourceSpans != nil || p.ResourceSpans2 != nil:
		req := ptraceotlp.NewExportRequest()
		if err := decodeJSONExport(req, text); err != nil {
			return fmt.Errorf("%w: undecodable OTLP JSON export: %v", ErrInvalidSpanFile, truncate(err.Error(), 300))
		}
		td := req.Traces()
		if n := td.SpanCount(); len(rd.spans)+n > MaxSpanFileSpans {
			return fmt.Errorf("%w: more than %d spans", ErrInvalidSpanFile, MaxSpanFileSpans)
		}
		conv := convertTraces(td, convertOptions{source: artifact.SpanSourceOTLPFile})
		if conv.rejected > 0 {
			return fmt.Errorf("%w: %s", ErrInvalidSpanFile, conv.reason)
		}
		recs = conv.records
	case p.Name != nil:
		rec, err := artifact.DecodeSpanObject(text)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidSpanFile, err)
		}
		if rec.RequestID == nil {
			if id, ok := rec.String(artifact.AttrRequestID); ok {
				rec.RequestID = join.RecoverRequestID(id)
			}
		}
		rec.Source = artifact.SpanSourceJSONL
		if rec.ClockDomain == "" {
			rec.ClockDomain = resourceDomain(rec.Resource)
		}
		recs = []artifact.Span{rec}
	default:
		return fmt.Errorf("%w: neither an OTLP export (resourceSpans), an infer.vllm_span record nor a span object (name)", ErrInvalidSpanFile)
	}
	if len(rd.spans)+len(recs) > MaxSpanFileSpans {
		return fmt.Errorf("%w: more than %d spans", ErrInvalidSpanFile, MaxSpanFileSpans)
	}
	rd.bearing++
	rd.spans = append(rd.spans, recs...)
	return nil
}

// resourceDomain is the clock domain named by a decoded resource's host.name.
func resourceDomain(res map[string]any) string {
	h, _ := res["host.name"].(string)
	return clockDomainName(h)
}

// readLine returns the next line without its newline (a trailing CR kept;
// TrimSpace removes it). Lines over max are an error.
func readLine(br *bufio.Reader, acc *[]byte, max int) ([]byte, error) {
	*acc = (*acc)[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(*acc)+len(frag) > max+1 {
			return nil, fmt.Errorf("%w: a line over %d bytes", ErrInvalidSpanFile, max)
		}
		switch {
		case err == nil:
			if len(*acc) == 0 {
				return frag[:len(frag)-1], nil
			}
			*acc = append(*acc, frag[:len(frag)-1]...)
			return *acc, nil
		case errors.Is(err, bufio.ErrBufferFull):
			*acc = append(*acc, frag...)
		case err == io.EOF:
			if len(*acc) == 0 && len(frag) == 0 {
				return nil, io.EOF
			}
			*acc = append(*acc, frag...)
			return *acc, nil
		default:
			return nil, err
		}
	}
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
