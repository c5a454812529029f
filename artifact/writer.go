package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FlushInterval bounds how long a written record may stay in the Writer's
// buffer before it is handed to the operating system.
const FlushInterval = 100 * time.Millisecond

// MaxLineBytes is the largest line the Writer writes and the Reader reads by
// default (64 MiB, newline excluded).
const MaxLineBytes = 64 << 20

const (
	flushThreshold = 256 << 10 // write out once this much is buffered
	queueLength    = 4096
)

// ErrClosed is returned by Writer methods called after Close.
var ErrClosed = errors.New("artifact: writer is closed")

// ErrLocked is wrapped by NewWriter's error when another Writer — of this process or another
// — holds the file open: two runs writing one artifact would interleave their lines.
var ErrLocked = errors.New("another run is writing it (the file is locked)")

// errLockHeld is lockFile's answer when the lock is held elsewhere.
var errLockHeld = errors.New("lock held")

// Writer appends records to a JSONL artifact; it is the run's first Sink. One goroutine owns the file;
// Write may be called from any number of goroutines. Each record is encoded
// by its caller into one complete line and queued; the owner appends lines
// to a buffer and writes the buffer, always ending at a line boundary, when
// it holds 256 KiB, at most FlushInterval after its oldest line arrived, on
// Flush and on Close. A process killed at any moment therefore leaves a file
// whose complete lines all parse; at most its last line is cut (the Reader
// reports that as Truncated).
type Writer struct {
	path string
	f    *os.File

	mu     sync.RWMutex // write-locked only by Close; guards closed
	closed bool
	queue  chan writeReq
	done   chan struct{}

	errMu    sync.Mutex
	err      error // first write error; sticky
	closeErr error

	contexts    spanContextTable // the infer.vllm_span_context lines written so far
	lastContext lastSpanContext  // the context of the last span line looked up
}

type writeReq struct {
	line []byte       // one line including '\n', or nil
	own  bool         // line is the Writer's to recycle (putLine) once copied
	ack  chan<- error // Flush: answered after the buffer is written
}

// lines recycles the buffers of encoded lines: withKind and spanLine build a line in one
// (getLine), and the Writer's owner goroutine gives it back (putLine) once it has copied the
// line, so that a run's records (one per request, ~2 KB each) are encoded without allocating
// a buffer per record. A line handed to a caller of MarshalJSON is simply not given back.
var lines = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledLine bounds the capacity of a buffer put back (a huge line's buffer is let go).
const maxPooledLine = 16 << 10

// getLine returns an empty buffer for one line.
func getLine() []byte { return (*lines.Get().(*[]byte))[:0] }

// putLine gives b's buffer back for a later line; b must not be used afterwards.
func putLine(b []byte) {
	if cap(b) <= maxPooledLine {
		b = b[:0]
		lines.Put(&b)
	}
}

// NewWriter creates (or truncates) the artifact at path, creating missing
// parent directories (0755); the file is created 0644. The Writer holds an
// exclusive advisory lock (flock, on unix systems) on the file until Close,
// and truncates the file only once it holds the lock. It fails before
// writing anything when the path cannot be opened, and with an error
// wrapping ErrLocked, leaving the file untouched, when another Writer holds
// the lock.
func NewWriter(path string) (*Writer, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("artifact: creating %s: %w", dir, err)
		}
	}
	return openWriter(path, os.O_WRONLY|os.O_CREATE, true)
}

// OpenAppend opens the existing artifact at path for appending (records written go after
// its last line), with the same exclusive lock as NewWriter. It fails, writing nothing,
// when the file is missing or unreadable, when another Writer holds the lock (an error
// wrapping ErrLocked), or when the file does not end with a newline (its last line was
// cut: a line appended to it would be glued to the cut one).
func OpenAppend(path string) (*Writer, error) {
	w, err := openWriter(path, os.O_RDWR|os.O_APPEND, false)
	if err != nil {
		return nil, err
	}
	if err := w.checkLineEnd(); err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

func openWriter(path string, flag int, truncate bool) (*Writer, error) {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("artifact: opening %s: %w", path, err)
	}
	if err := lockFile(f.Fd()); err != nil {
		_ = f.Close()
		if errors.Is(err, errLockHeld) {
			return nil, fmt.Errorf("artifact: %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("artifact: locking %s: %w", path, err)
	}
	if truncate {
		if err := f.Truncate(0); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("artifact: truncating %s: %w", path, err)
		}
	}
	w := &Writer{
		path:  path,
		f:     f,
		queue: make(chan writeReq, queueLength),
		done:  make(chan struct{}),
	}
	go w.run()
	return w, nil
}

// checkLineEnd reports an error when the file is not empty and its last byte is not a
// newline. It runs before any Write, while the owner goroutine is idle.
func (w *Writer) checkLineEnd() error {
	st, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("artifact: %s: %w", w.path, err)
	}
	if st.Size() == 0 {
		return nil
	}
	last := make([]byte, 1)
	if _, err := w.f.ReadAt(last, st.Size()-1); err != nil {
		return fmt.Errorf("artifact: reading %s: %w", w.path, err)
	}
	if last[0] != '\n' {
		return fmt.Errorf("%w: %s ends in a cut line (no newline after its last record); nothing appended", ErrInvalidArtifact, w.path)
	}
	return nil
}

// Path returns the artifact's path as given to NewWriter.
func (w *Writer) Path() string { return w.path }

// Write encodes rec (see MarshalLine) and queues it as one line. It returns
// an encoding error at once, ErrClosed after Close, or the first error the
// owner goroutine met writing the file (after which nothing more is
// written). A nil return means the line is queued, not that it is on disk:
// call Flush or Close for that. Write blocks while the queue is full.
// Transient records are not part of the artifact: Write skips them and
// returns nil, also after Close.
//
// Spans (*Span, and a *Raw infer.vllm_span v2 with its Context) are
// written as infer.vllm_span v2 lines naming their infer.vllm_span_context
// line (what the spans of one export share), which Write queues before the
// first span line that names it, once per Writer (see spanLine). Span context records
// given to Write are skipped: the Writer writes its own.
func (w *Writer) Write(rec Record) error {
	if IsTransient(rec) {
		return nil
	}
	var line []byte
	var err error
	own := true // a line encoded here; a Raw's own bytes are not the Writer's
	switch r := rec.(type) {
	case *Span:
		line, err = w.spanLine(r)
	case Span:
		line, err = w.spanLine(&r)
	case *SpanContext, SpanContext:
		return nil
	case *Raw:
		line, own, err = w.rawLine(r)
	default:
		line, err = MarshalLine(rec)
	}
	if err != nil || line == nil {
		return err
	}
	return w.enqueue(append(line, '\n'), own)
}

// rawLine is MarshalLine of r, except that a v2 span is decoded against its
// Context and written as a span of this file (spanLine), and a span context
// is skipped (nil line). own says whether the line was encoded here (else it
// shares r's bytes).
func (w *Writer) rawLine(r *Raw) (line []byte, own bool, err error) {
	switch r.Kind.EventType {
	case EventSpanContext:
		return nil, false, nil
	case EventSpan:
		if r.Kind == KindVLLMSpanV2 {
			s, err := DecodeSpanRaw(*r)
			if err != nil {
				return nil, false, err
			}
			line, err := w.spanLine(&s)
			return line, true, err
		}
	}
	line, err = MarshalLine(r)
	return line, false, err
}

// enqueue queues one line (newline included); own: the owner goroutine recycles
// it once copied.
func (w *Writer) enqueue(line []byte, own bool) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	if err := w.writeErr(); err != nil {
		return err
	}
	w.queue <- writeReq{line: line, own: own}
	return nil
}

// Flush waits until every line queued before it has been written to the
// operating system (not fsynced), and returns the first write error if any.
func (w *Writer) Flush() error {
	ack := make(chan error, 1)
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrClosed
	}
	w.queue <- writeReq{ack: ack}
	w.mu.RUnlock()
	return <-ack
}

// Close writes every queued line, fsyncs and closes the file. It returns the
// first error met writing, syncing or closing; a second Close returns
// ErrClosed. Writes racing with Close either land before it or get
// ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.queue)
	<-w.done
	return w.closeErr
}

func (w *Writer) writeErr() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

func (w *Writer) setErr(err error) {
	w.errMu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("artifact: writing %s: %w", w.path, err)
	}
	w.errMu.Unlock()
}

// run is the owner goroutine: the only code that touches w.f.
func (w *Writer) run() {
	defer close(w.done)
	buf := make([]byte, 0, flushThreshold+4096)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	// end is the file's size after the last whole write: a write cut short (a full disk) is
	// truncated back to the last whole line it wrote, so the file keeps whole lines only.
	end := int64(-1)
	if st, err := w.f.Stat(); err == nil {
		end = st.Size()
	}
	flush := func() {
		if armed {
			timer.Stop()
			armed = false
		}
		if len(buf) == 0 {
			return
		}
		if w.writeErr() == nil {
			n, err := w.f.Write(buf)
			switch {
			case err != nil:
				w.setErr(err)
				if n > 0 && end >= 0 { // keep the whole lines written, cut the partial one
					_ = w.f.Truncate(end + int64(bytes.LastIndexByte(buf[:n], '\n')+1)) // best effort
				}
			case end >= 0:
				end += int64(n)
			}
		}
		if cap(buf) > 4*flushThreshold {
			buf = make([]byte, 0, flushThreshold+4096) // let a huge line's buffer go
		} else {
			buf = buf[:0]
		}
	}
	for {
		select {
		case req, ok := <-w.queue:
			if !ok {
				flush()
				err := w.writeErr()
				if serr := w.f.Sync(); serr != nil && err == nil {
					err = fmt.Errorf("artifact: syncing %s: %w", w.path, serr)
				}
				if cerr := w.f.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("artifact: closing %s: %w", w.path, cerr)
				}
				w.closeErr = err
				return
			}
			if req.line != nil {
				buf = append(buf, req.line...)
				if req.own {
					putLine(req.line)
				}
				if len(buf) >= flushThreshold {
					flush()
				} else if !armed {
					timer.Reset(FlushInterval)
					armed = true
				}
			}
			if req.ack != nil {
				flush()
				req.ack <- w.writeErr()
			}
		case <-timer.C:
			armed = false
			flush()
		}
	}
}

// marshalRequest encodes rec when it is a Request (ok false otherwise), with one copy of it
// on the stack (Request's MarshalJSON, a value method whose receiver's address is taken,
// makes two; a comma-ok assertion also makes two). A send goroutine writes its record at
// the deepest point of its short life, so every byte of frame there can make its stack grow
// (a copy of the whole stack); not inlined, so that MarshalLine's frame does not carry the
// copy for the other records.
//
//go:noinline
func marshalRequest(rec any) (line []byte, ok bool, err error) {
	switch r := rec.(type) {
	case Request:
		line, err = r.marshalLine()
		return line, true, err
	}
	return nil, false, nil
}

// MarshalLine encodes one record as a single JSON line without the trailing
// newline. rec must encode to a JSON object whose "event_type" is a string
// and whose "schema_version" is an integer: every record type of this
// package does (they write both first), as does a type embedding Header or
// a *Raw read from an artifact. Strings are not HTML-escaped. An encoding
// error (e.g. a NaN float64 — use Float for sample values), a missing
// header, or a line over MaxLineBytes is an error.
func MarshalLine(rec any) ([]byte, error) {
	var line []byte
	var err error
	if l, ok, e := marshalRequest(rec); ok {
		line, err = l, e
	} else if own, ok := rec.(selfEncoding); ok {
		line, err = own.MarshalJSON() // compact and valid already
	} else {
		line, err = encodeJSON(rec)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact: encoding %T: %w", rec, err)
	}
	if len(line) > MaxLineBytes {
		return nil, fmt.Errorf("artifact: %T encodes to %d bytes, over the %d-byte line limit", rec, len(line), MaxLineBytes)
	}
	if len(line) == 0 || line[0] != '{' {
		return nil, fmt.Errorf("artifact: %T does not encode to a JSON object", rec)
	}
	k, lerr := parseKind(line)
	if lerr != nil {
		return nil, fmt.Errorf("artifact: %T: %w", rec, lerr.Err)
	}
	if k.EventType == "" || k.SchemaVersion == 0 {
		return nil, fmt.Errorf("artifact: %T has no event_type and schema_version", rec)
	}
	if bytes.IndexByte(line, '\n') >= 0 { // cannot happen with encoding/json; kept as a guard
		return nil, fmt.Errorf("artifact: %T encodes to more than one line", rec)
	}
	return line, nil
}
