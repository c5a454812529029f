package artifact

import (
	"fmt"
	"sync"
)

// MaxWriterSpanContexts bounds the distinct resource+scope pairs one Writer
// gives a context line. A span of a further pair is written as a
// self-contained infer.vllm_span v1 line, so an exporter that varies its
// resource per span cannot grow the Writer's table without bound.
const MaxWriterSpanContexts = 4096

// spanContextTable is a Writer's record of the context lines it has queued:
// the encoded resource and scope → context id.
type spanContextTable struct {
	mu  sync.Mutex
	ids map[string]string // `,"resource":…,"scope":…` → id
	enc map[string]bool   // the ids in use (collision check)
}

// spanLine encodes r as an infer.vllm_span v2 line naming the context of its
// resource and scope, queueing that context's line first when this Writer
// has not written it yet (past MaxWriterSpanContexts, r's v1 line instead).
// The context line is queued while the table is locked, so every span line
// naming it is queued after it, whichever goroutine writes first.
func (w *Writer) spanLine(r *VLLMSpan) ([]byte, error) {
	enc, err := r.resourceScopeEncoding()
	if err != nil {
		return nil, fmt.Errorf("artifact: encoding %T: %w", r, err)
	}
	id, err := w.contextID(enc)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return MarshalLine(r)
	}
	line, err := r.appendLine(make([]byte, 0, 1024), id)
	if err != nil {
		return nil, fmt.Errorf("artifact: encoding %T: %w", r, err)
	}
	if len(line) > MaxLineBytes {
		return nil, fmt.Errorf("artifact: %T encodes to %d bytes, over the %d-byte line limit", r, len(line), MaxLineBytes)
	}
	return line, nil
}

// contextID returns the id of the context encoded as enc, queueing its
// line when it is new; "" when the table is full and enc is not in it.
func (w *Writer) contextID(enc []byte) (string, error) {
	t := &w.contexts
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[string(enc)]; ok {
		return id, nil
	}
	if len(t.ids) >= MaxWriterSpanContexts {
		return "", nil
	}
	id := ContextIDOf(enc)
	if _, clash := t.enc[id]; clash { // two encodings, one 64-bit hash prefix
		return "", nil
	}
	line := contextLine(id, enc)
	if len(line) > MaxLineBytes {
		return "", fmt.Errorf("artifact: %s encodes to %d bytes, over the %d-byte line limit", EventVLLMSpanContext, len(line), MaxLineBytes)
	}
	if err := w.enqueue(append(line, '\n')); err != nil {
		return "", err
	}
	if t.ids == nil {
		t.ids, t.enc = map[string]string{}, map[string]bool{}
	}
	t.ids[string(enc)] = id
	t.enc[id] = true
	return id, nil
}
