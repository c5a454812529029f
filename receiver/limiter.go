package receiver

import (
	"fmt"
	"runtime"
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
//
// A body buffer of minRetired or more that an export has let go of (one
// outgrown while inflating, or one too large to pool) stays charged as
// garbage until a collection has run since: without that, bodies inflating to the 16 MiB limit freed memory only
// on paper, and 40 gzip bombs at once (19 kB each) took the process to
// 734 MB. Garbage of a quarter of the limit, a charge refused while garbage
// is pending, or garbage with no export in flight starts one collection
// (runtime.GC on a goroutine of its own, one at a time), after which the
// garbage charged before it began is released.
// Smaller buffers are released as before: a vLLM export (about 300 kB) lets
// go of none this large, so its receiver never forces a collection — one per
// export would land on a load generator's timing.
type memLimiter struct {
	limit   int64
	used    atomic.Int64 // charged: the exports' bytes and the garbage
	peak    atomic.Int64 // the highest charge since New
	garbage atomic.Int64 // of used: let-go buffers no collection has run since
	// collecting is set while a collection started by kick runs.
	collecting atomic.Bool
	// collect runs a collection (runtime.GC when nil; tests replace it).
	collect func()
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

// release returns n charged bytes; with garbage pending and nothing else
// charged, it starts a collection.
func (l *memLimiter) release(n int64) {
	if u := l.used.Add(-n); u > 0 && u == l.garbage.Load() {
		l.kick()
	}
}

// retire moves n charged bytes of a let-go buffer into garbage, and starts a
// collection once garbage reaches a quarter of the limit.
func (l *memLimiter) retire(n int64) {
	if n > 0 && l.garbage.Add(n) >= l.limit/4 {
		l.kick()
	}
}

// kick starts a collection unless one runs; when it is done, the garbage
// charged before it began is released.
func (l *memLimiter) kick() {
	if !l.collecting.CompareAndSwap(false, true) {
		return
	}
	g := l.garbage.Load()
	go func() {
		if l.collect != nil {
			l.collect()
		} else {
			runtime.GC()
		}
		l.garbage.Add(-g)
		l.used.Add(-g)
		l.collecting.Store(false)
		if l.garbage.Load() >= l.limit/4 || (l.garbage.Load() > 0 && l.used.Load() == l.garbage.Load()) {
			l.kick() // garbage let go of during the collection
		}
	}()
}

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
		if r.l.garbage.Load() > 0 {
			r.l.kick()
		}
		return &memoryError{need: n, limit: r.l.limit, inUse: r.l.inUse()}
	}
	r.charged += n
	return nil
}

// growTo charges up to total bytes in all (nothing when already charged).
func (r *reservation) growTo(total int64) error { return r.grow(total - r.charged) }

// minRetired is the smallest let-go buffer kept charged as garbage (see
// memLimiter).
const minRetired = 1 << 20

// shrink returns n bytes of the charge (a small buffer let go of).
func (r *reservation) shrink(n int64) {
	n = min(n, r.charged)
	r.charged -= n
	r.l.release(n)
}

// retire moves n bytes of the charge (a buffer let go of) into the limiter's
// garbage (see memLimiter).
func (r *reservation) retire(n int64) {
	n = min(n, r.charged)
	r.charged -= n
	r.l.retire(n)
}

// release returns the whole charge.
func (r *reservation) release() {
	if r.charged > 0 {
		r.l.release(r.charged)
		r.charged = 0
	}
}
