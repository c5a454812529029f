package sim

import (
	"context"
	"sync/atomic"
)

// seqState is where a sequence is: waiting for admission, running in the batch, or done.
type seqState uint8

const (
	stateWaiting seqState = iota
	stateRunning
	stateDone
)

// seq is one request inside an engine.
type seq struct {
	// Set before submission, read-only afterwards.
	id         string
	engine     *engine
	promptLen  int
	maxTokens  int
	target     int    // tokens after which it finishes with targetFin
	targetFin  uint32 // finLength or finStop
	errorAt    int    // >0: finish with "error" after this many tokens
	truncateAt int    // >0: abort after this many tokens
	hashes     []uint64
	wordSeed   uint64
	arrivalNs  int64
	parent     context.Context // carries the remote span context from traceparent
	temp, topP float64

	// Engine-owned, guarded by engine.mu until fin is set; read-only afterwards.
	state         seqState
	prefillTarget int // tokens to compute before the next token (prompt + generated at admission)
	computed      int // tokens of the current prefill computed so far
	kvTokens      int // tokens with KV slots
	own           int // exclusively held blocks
	shared        []*cacheEntry
	chunk         int // tokens scheduled in the current step
	generated     int
	preemptions   int
	cachedTokens  int // prefix-cache hit tokens at first admission
	admitted      bool
	code          uint32 // finish code once done
	scheduledNs   int64
	firstTokenNs  int64
	lastTokenNs   int64
	finishNs      int64

	// Handler view: prog packs the finish code (high 32 bits) and the tokens generated so
	// far (low 32 bits) so that both are read in one load; the engine-owned fields above
	// are final once the finish code is non-zero.
	prog   atomic.Uint64
	notify chan struct{} // poked (non-blocking) after every change of prog
}

// publish makes generated tokens and a finish code visible to the handler.
func (s *seq) publish(generated int, fin uint32) {
	s.prog.Store(uint64(fin)<<32 | uint64(uint32(generated)))
	s.poke()
}

// load returns the tokens generated so far and the finish code (0 while running).
func (s *seq) load() (avail int, fin uint32) {
	v := s.prog.Load()
	return int(uint32(v)), uint32(v >> 32)
}

func (s *seq) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *seq) blocks() int { return s.own + len(s.shared) }

// seqQueue is a FIFO of sequences that also allows pushing to the front (preemption).
type seqQueue struct {
	buf  []*seq
	head int
}

func (q *seqQueue) len() int    { return len(q.buf) - q.head }
func (q *seqQueue) front() *seq { return q.buf[q.head] }
func (q *seqQueue) pushBack(s *seq) {
	q.buf = append(q.buf, s)
}
func (q *seqQueue) popFront() {
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	} else if q.head >= 1024 && q.head*2 >= len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}
func (q *seqQueue) pushFront(s *seq) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = s
		return
	}
	q.buf = append(q.buf, nil)
	copy(q.buf[1:], q.buf)
	q.buf[0] = s
}
func (q *seqQueue) remove(s *seq) bool {
	for i := q.head; i < len(q.buf); i++ {
		if q.buf[i] == s {
			copy(q.buf[i:], q.buf[i+1:])
			q.buf[len(q.buf)-1] = nil
			q.buf = q.buf[:len(q.buf)-1]
			return true
		}
	}
	return false
}
func (q *seqQueue) drain(f func(*seq)) {
	for i := q.head; i < len(q.buf); i++ {
		f(q.buf[i])
		q.buf[i] = nil
	}
	q.buf, q.head = q.buf[:0], 0
}
