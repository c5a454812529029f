package artifact

import (
	"bytes"
	"fmt"
	"sync"
)

// MaxWriterSpanContexts bounds the distinct span contexts one Writer writes
// (see SpanContext). A span needing a further one is written as a
// self-contained infer.vllm_span v1 line, so an exporter that varies its
// resource or attribute names per span cannot grow the Writer's table
// without bound.
const MaxWriterSpanContexts = 4096

// spanContextTable is a Writer's record of the context lines it has queued:
// the context body (contextBody) → context id.
type spanContextTable struct {
	mu  sync.Mutex
	ids map[string]string
	use map[string]bool // the ids in use (a hash collision check)
}

// spanLine encodes r as an infer.vllm_span v2 line naming its context,
// queueing that context's line first when this Writer has not written it
// yet (past MaxWriterSpanContexts, r's v1 line instead). The context line is
// queued while the table is locked, so every span line naming it is queued
// after it, whichever goroutine writes first.
func (w *Writer) spanLine(r *Span) ([]byte, error) {
	enc, err := r.resourceScopeEncoding()
	if err != nil {
		return nil, fmt.Errorf("artifact: encoding %T: %w", r, err)
	}
	id, keys, ok := w.lastContext.match(r, enc)
	if !ok {
		var arr [32]string
		keys = sortedKeys(arr[:0], r.Attributes)
		var kb [1024]byte
		body := contextBody(kb[:0], r.SessionID, r.RunID, r.Source, r.ClockDomain, enc, keys)
		if id, err = w.contextID(body); err != nil {
			return nil, err
		}
		if id == "" {
			return MarshalLine(r)
		}
		w.lastContext.store(r, enc, id, keys)
	}
	line, err := r.appendV2(getLine(), id, keys)
	if err != nil {
		return nil, fmt.Errorf("artifact: encoding %T: %w", r, err)
	}
	if len(line) > MaxLineBytes {
		return nil, fmt.Errorf("artifact: %T encodes to %d bytes, over the %d-byte line limit", r, len(line), MaxLineBytes)
	}
	return line, nil
}

// contextID returns the id of the context with body, queueing its line when
// it is new; "" when the table is full (or the id clashes) and body is not in it.
func (w *Writer) contextID(body []byte) (string, error) {
	t := &w.contexts
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[string(body)]; ok {
		return id, nil
	}
	if len(t.ids) >= MaxWriterSpanContexts {
		return "", nil
	}
	id := ContextIDOf(body)
	if t.use[id] { // two bodies, one 64-bit hash prefix
		return "", nil
	}
	line := contextLine(id, body)
	if len(line) > MaxLineBytes {
		return "", fmt.Errorf("artifact: %s encodes to %d bytes, over the %d-byte line limit", EventSpanContext, len(line), MaxLineBytes)
	}
	if err := w.enqueue(append(line, '\n'), false); err != nil {
		return "", err
	}
	if t.ids == nil {
		t.ids, t.use = map[string]string{}, map[string]bool{}
	}
	t.ids[string(body)] = id
	t.use[id] = true
	return id, nil
}

// lastSpanContext is the context of a Writer's last v2 span line whose context was looked
// up: a span with the same session, run, source, clock domain, resource and scope encoding
// and attribute names (the spans of one export, and of the next) takes its id and sorted
// names without building and hashing the context body again. Its keys are never
// modified, only replaced.
type lastSpanContext struct {
	mu                          sync.Mutex
	session, run, source, clock string
	enc                         []byte
	keys                        []string
	id                          string
}

// match returns the last context's id and sorted attribute names when r (whose resource
// and scope encode to enc) has that context.
func (c *lastSpanContext) match(r *Span, enc []byte) (string, []string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == "" || len(r.Attributes) != len(c.keys) || r.SessionID != c.session || r.RunID != c.run ||
		r.Source != c.source || r.ClockDomain != c.clock || !bytes.Equal(enc, c.enc) {
		return "", nil, false
	}
	for _, k := range c.keys {
		if _, ok := r.Attributes[k]; !ok {
			return "", nil, false
		}
	}
	return c.id, c.keys, true
}

// store makes r's context (id, sorted names keys) the last one.
func (c *lastSpanContext) store(r *Span, enc []byte, id string, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session, c.run, c.source, c.clock = r.SessionID, r.RunID, r.Source, r.ClockDomain
	c.enc = append(c.enc[:0:0], enc...)
	c.keys = append([]string(nil), keys...)
	c.id = id
}
