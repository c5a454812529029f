package receiver

import (
	"fmt"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
)

// consume is the single consumer goroutine: it hands every queued span to
// Options.Sink in arrival order, keeping the sink's first Write error, until
// the queue is closed and empty. Once abort is set the spans still queued
// are dropped (counted in spansDropped), never delivered.
func (r *Receiver) consume() {
	defer close(r.consumerDone)
	for {
		batch, size, ok := r.q.pop()
		if !ok {
			return
		}
		delivered := 0
		for i := range batch {
			if r.abort.Load() {
				break
			}
			if r.opts.Sink != nil {
				if err := r.opts.Sink.Write(&batch[i]); err != nil {
					r.keepWriteErr(err)
				}
			}
			delivered++
		}
		r.c.spansDelivered.Add(int64(delivered))
		r.c.spansDropped.Add(int64(len(batch) - delivered))
		r.q.done(len(batch), size)
		r.waits.notify()
	}
}

// keepWriteErr keeps err when it is the sink's first Write error.
func (r *Receiver) keepWriteErr(err error) {
	r.writeErrMu.Lock()
	if r.writeErr == nil {
		r.writeErr = err
	}
	r.writeErrMu.Unlock()
}

// WriteErr returns the sink's first Write error, or nil.
func (r *Receiver) WriteErr() error {
	r.writeErrMu.Lock()
	defer r.writeErrMu.Unlock()
	return r.writeErr
}

// queue is the bounded FIFO of decoded exports between the handlers and
// the consumer. Counts include the batch being consumed.
type queue struct {
	mu       sync.Mutex
	cond     sync.Cond
	batches  [][]artifact.Span
	sizes    []int64
	spans    int
	bytes    int64
	maxSpans int
	maxBytes int64
	closed   bool
}

func (q *queue) init(maxSpans int, maxBytes int64) {
	q.cond.L = &q.mu
	q.maxSpans = maxSpans
	q.maxBytes = maxBytes
}

// push queues one export's records charged size bytes. It fails with
// errStopped once the queue is closed, and with an error wrapping
// errQueueFull when the export does not fit whole; an export always fits an
// empty queue.
func (q *queue) push(batch []artifact.Span, size int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errStopped
	}
	if q.spans > 0 && (q.spans+len(batch) > q.maxSpans || q.bytes+size > q.maxBytes) {
		return q.fullErr()
	}
	q.batches = append(q.batches, batch)
	q.sizes = append(q.sizes, size)
	q.spans += len(batch)
	q.bytes += size
	q.cond.Signal()
	return nil
}

// admit refuses an export early — before its body is read and decoded —
// when the queue is at 90% of its span limit or of its byte limit (for
// vLLM-like spans the byte limit binds first: 64 MiB hold about 32,000),
// or the export's expected charge (0 when unknown) would pass the byte
// limit. push decides exactly.
func (q *queue) admit(expect int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.spans > 0 && (10*q.spans >= 9*q.maxSpans || 10*q.bytes >= 9*q.maxBytes || q.bytes+expect > q.maxBytes) {
		return q.fullErr()
	}
	return nil
}

// fullErr describes the queue's content and limits; q.mu is held.
func (q *queue) fullErr() error {
	return fmt.Errorf("%w: %d spans (%d bytes) queued, limits %d spans and %d bytes; retry later",
		errQueueFull, q.spans, q.bytes, q.maxSpans, q.maxBytes)
}

// pop blocks for the next batch; false once the queue is closed and empty.
func (q *queue) pop() ([]artifact.Span, int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.batches) == 0 {
		if q.closed {
			return nil, 0, false
		}
		q.cond.Wait()
	}
	b, s := q.batches[0], q.sizes[0]
	q.batches[0] = nil
	q.batches = q.batches[1:]
	q.sizes = q.sizes[1:]
	return b, s, true
}

// done releases a consumed batch's charge.
func (q *queue) done(spans int, size int64) {
	q.mu.Lock()
	q.spans -= spans
	q.bytes -= size
	q.mu.Unlock()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// queued returns the spans and estimated bytes queued or being consumed.
func (q *queue) queued() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.spans, q.bytes
}
