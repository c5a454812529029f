package receiver

import (
	"fmt"
	"sync/atomic"
)

// Decode cost model: the bytes an export is charged on the memory limiter
// while it is read, decoded and converted, measured on this package's
// vLLM-like spans (603 wire bytes, 15 elements each: 912 bytes decoded, 1,096
// as records) and on bodies of empty ResourceSpans (134 bytes decoded per
// 2-byte element), rounded up.
const (
	// costPerWireByte: the body itself plus the strings the decoder copies.
	costPerWireByte = 2
	// costPerElement: one decoded message or attribute (see exportCounts).
	costPerElement = 140
	// costPerSpan: one infer.vllm_span record and its attribute maps.
	costPerSpan = 1024
)

// decodeCost is the limiter charge of an export of wire bytes with counts c:
// costPerWireByte per byte, costPerElement per element, costPerSpan per span.
func decodeCost(wire int, c *exportCounts) int64 {
	return costPerWireByte*int64(wire) + costPerElement*int64(c.elements()) + costPerSpan*int64(c.Spans)
}

// memLimiter bounds the bytes of the exports being read, decoded and
// converted at once, over every connection of both transports. It never
// waits: a charge that does not fit is refused at once, so the caller can
// refuse its export retryably before spending CPU on it.
type memLimiter struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64 // the highest charge since New
}

// tryAcquire charges n bytes when they fit under the limit and reports
// whether they did.
func (l *memLimiter) tryAcquire(n int64) bool {
	for {
		u := l.used.Load()
		if u+n > l.limit {
			return false
		}
		if l.used.CompareAndSwap(u, u+n) {
			for p := l.peak.Load(); u+n > p && !l.peak.CompareAndSwap(p, u+n); p = l.peak.Load() {
			}
			return true
		}
	}
}

// release returns n charged bytes.
func (l *memLimiter) release(n int64) { l.used.Add(-n) }

// inUse returns the bytes charged now.
func (l *memLimiter) inUse() int64 { return l.used.Load() }

// reservation is one export's charge on the limiter, grown as its body is
// read and before it is decoded, and released whole when the export is
// answered (release is idempotent).
type reservation struct {
	l       *memLimiter
	charged int64
}

// memoryError is a charge the limiter refused: need more bytes while
// inUse are held by other exports (retry later), or, when never is set, a
// reservation whose total (need) is over the whole limit.
type memoryError struct {
	need, limit, inUse int64
	never              bool
}

func (e *memoryError) Error() string {
	if e.never {
		return fmt.Sprintf("decoding this export needs about %d bytes, over the receiver's %d-byte memory limit", e.need, e.limit)
	}
	return fmt.Sprintf("the receiver's %d-byte decode memory is in use (%d bytes held by other exports, %d more needed); retry later", e.limit, e.inUse, e.need)
}

// grow charges n more bytes: a *memoryError when they do not fit now
// (never is set when the reservation's total could never fit).
func (r *reservation) grow(n int64) error {
	if n <= 0 {
		return nil
	}
	if r.charged+n > r.l.limit {
		return &memoryError{need: r.charged + n, limit: r.l.limit, never: true}
	}
	if !r.l.tryAcquire(n) {
		return &memoryError{need: n, limit: r.l.limit, inUse: r.l.inUse()}
	}
	r.charged += n
	return nil
}

// growTo charges up to total bytes in all (nothing when already charged).
func (r *reservation) growTo(total int64) error { return r.grow(total - r.charged) }

// release returns the whole charge.
func (r *reservation) release() {
	if r.charged > 0 {
		r.l.release(r.charged)
		r.charged = 0
	}
}
