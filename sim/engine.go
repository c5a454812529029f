package sim

import (
	"strconv"
	"sync"
	"time"
)

// Finish codes of a sequence, stored in seq.fin (0 while it runs).
const (
	finNone      uint32 = iota
	finLength           // reached max_tokens: finish_reason "length"
	finStop             // seeded early stop: finish_reason "stop"
	finError            // stream-error fault: finish_reason "error"
	finTruncated        // truncate fault: aborted, connection closed mid-stream
	finCancelled        // the client went away
	finRestart          // engine restart fault dropped it
	finShutdown         // the server closed
)

// finishReason is the OpenAI/vLLM finish_reason of a code that has one.
func finishReason(code uint32) string {
	switch code {
	case finLength:
		return "length"
	case finStop:
		return "stop"
	case finError:
		return "error"
	}
	return ""
}

// counted reports whether a finish code is a finished request in vLLM's sense (request-level
// metrics, request_success_total and a span) rather than an abort.
func counted(code uint32) bool { return code == finLength || code == finStop || code == finError }

// engine is one simulated vLLM engine core: scheduler, KV cache and step loop.
type engine struct {
	idx   int
	label string
	cfg   *Config

	mu      sync.Mutex
	waiting seqQueue
	running []*seq
	kv      *kvCache
	m       *engineMetrics
	plan    []*seq
	pub     []*seq
	hitBuf  []*cacheEntry
	steps   int64        // steps completed (for tests)
	closed  bool         // the server closed: submissions end at once with finShutdown
	rec     stepRecorder // the profiling window's steps (POST /start_profile to /stop_profile)

	wake     chan struct{}
	now      func() int64
	onFinish func(*seq) // called without the lock for every counted finish (spans)
}

func newEngine(idx int, cfg *Config, m *engineMetrics, now func() int64) *engine {
	return &engine{
		idx:   idx,
		label: itoa(idx),
		cfg:   cfg,
		kv:    newKVCache(cfg.NumGPUBlocks),
		m:     m,
		wake:  make(chan struct{}, 1),
		now:   now,
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func (e *engine) blocksFor(tokens int) int {
	return (tokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize
}

// submit queues a sequence (or ends it at once when the server has closed).
func (e *engine) submit(s *seq) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		s.state = stateDone
		s.code = finShutdown
		s.finishNs = e.now()
		s.publish(0, finShutdown)
		return
	}
	s.state = stateWaiting
	e.waiting.pushBack(s)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// step is one scheduled engine iteration.
type step struct {
	seqs       []*seq
	t0         int64 // planned at (unix ns)
	prefill    int   // prefill tokens computed
	prefilling int   // sequences computing a prefill chunk
	decoding   int   // sequences decoding one token
	dur        time.Duration
}

// schedule plans one step at time t0 (unix ns), as vLLM V1's scheduler: the running
// sequences first, then, unless that had to preempt, admissions from the waiting queue, all
// within the step's token budget. The caller holds e.mu.
func (e *engine) schedule(t0 int64) step {
	st := step{seqs: e.plan[:0], t0: t0}
	budget, preempted := e.scheduleRunning(&st, e.cfg.MaxNumBatchedTokens)
	if !preempted { // as vLLM V1: no admission in a step that had to preempt
		e.admitWaiting(&st, budget, t0)
	}
	e.hitBuf = e.hitBuf[:0]
	e.plan = st.seqs
	if len(st.seqs) > 0 {
		st.dur = e.stepDuration(st.prefill, st.decoding)
	}
	return st
}

// scheduleRunning adds the running sequences to st in order while budget lasts: a sequence
// still prefilling gets the next chunk of its prefill, a decoding one a token, for which it
// may need a new KV block; when none is free the newest running sequences are preempted
// until one is (or until the sequence itself was the newest). It returns the budget left
// and whether it preempted.
func (e *engine) scheduleRunning(st *step, budget int) (left int, preempted bool) {
	for i := 0; i < len(e.running); i++ {
		s := e.running[i]
		if budget == 0 {
			break
		}
		if s.computed < s.prefillTarget {
			c := min(s.prefillTarget-s.computed, budget)
			s.chunk = c
			budget -= c
			st.prefill += c
			st.prefilling++
			st.seqs = append(st.seqs, s)
			continue
		}
		if need := e.blocksFor(s.kvTokens+1) - s.blocks(); need > 0 {
			for e.kv.free() < need && s.state == stateRunning {
				e.preempt(e.running[len(e.running)-1])
				preempted = true
			}
			if s.state != stateRunning {
				break // s was the newest and preempted itself; nothing after it is left
			}
			e.kv.alloc(need)
			s.own += need
		}
		s.kvTokens++
		s.chunk = 1
		budget--
		st.decoding++
		st.seqs = append(st.seqs, s)
	}
	return budget, preempted
}

// admitWaiting admits waiting sequences to st in FIFO order while the running batch is below
// MaxNumSeqs and budget lasts. A head whose blocks do not fit stops admission (head-of-line
// blocking, as vLLM's FCFS policy). Each admitted sequence gets the first chunk of its
// prefill, the cached blocks excepted.
func (e *engine) admitWaiting(st *step, budget int, t0 int64) {
	for e.waiting.len() > 0 && len(e.running) < e.cfg.MaxNumSeqs && budget > 0 {
		s := e.waiting.front()
		hits, need, fits := e.admission(s)
		if !fits {
			break
		}
		e.waiting.popFront()
		hitTok := e.admit(s, hits, need, t0)
		c := min(s.prefillTarget-hitTok, budget)
		s.chunk = c
		budget -= c
		st.prefill += c
		st.prefilling++
		st.seqs = append(st.seqs, s)
		e.running = append(e.running, s)
	}
}

// admission looks up the prefix-cache blocks s would reuse (its full prompt blocks, the last
// prompt token always left to compute) and the new blocks it needs for its prompt and
// generated tokens; fits reports whether the free blocks, less the reused ones that are
// only evictable now, hold them.
func (e *engine) admission(s *seq) (hits []*cacheEntry, need int, fits bool) {
	hits = e.hitBuf[:0]
	if s.hashes != nil {
		hits = e.kv.lookup(s.hashes, (s.promptLen-1)/e.cfg.BlockSize, hits)
	}
	evictableHits := 0
	for _, h := range hits {
		if h.ref == 0 {
			evictableHits++
		}
	}
	need = e.blocksFor(s.promptLen+s.generated) - len(hits)
	return hits, need, e.kv.free()-evictableHits >= need
}

// admit makes s running with the cached blocks hits and need new ones, its prefill to
// compute its prompt and generated tokens from the first uncached one; the first admission
// fixes its scheduled time and cached tokens. With prefix caching on, every admission counts
// the prompt in vllm:prefix_cache_queries_total and the cached tokens in
// vllm:prefix_cache_hits_total. It returns the cached tokens.
func (e *engine) admit(s *seq, hits []*cacheEntry, need int, t0 int64) (hitTok int) {
	for _, h := range hits {
		e.kv.acquire(h)
	}
	s.shared = append(s.shared[:0], hits...)
	e.kv.alloc(need)
	s.own = need
	total := s.promptLen + s.generated
	hitTok = len(hits) * e.cfg.BlockSize
	s.computed = hitTok
	s.prefillTarget = total
	s.kvTokens = total
	s.state = stateRunning
	if !s.admitted {
		s.admitted = true
		s.scheduledNs = t0
		s.cachedTokens = hitTok
	}
	if e.cfg.EnablePrefixCaching {
		e.m.prefixQueries.Add(float64(s.promptLen))
		e.m.prefixHits.Add(float64(hitTok))
	}
	return hitTok
}

// stepDuration is the simulated length of a step: DecodeStepBase, plus DecodeStepPerSeq per
// decoding sequence, plus the prefill tokens at PrefillTokensPerSec (none when that is 0).
func (e *engine) stepDuration(prefill, decoding int) time.Duration {
	cfg := e.cfg
	d := cfg.DecodeStepBase + time.Duration(decoding)*cfg.DecodeStepPerSeq
	if cfg.PrefillTokensPerSec > 0 && prefill > 0 {
		d += time.Duration(float64(prefill) / cfg.PrefillTokensPerSec * float64(time.Second))
	}
	return d
}

// preempt sends a running sequence (the newest) back to the head of the queue, freeing its
// blocks (vLLM's recompute preemption). The caller holds e.mu.
func (e *engine) preempt(s *seq) {
	e.removeRunning(s)
	e.freeBlocks(s)
	s.state = stateWaiting
	s.computed, s.prefillTarget, s.kvTokens, s.chunk = 0, 0, 0, 0
	s.preemptions++
	e.m.preemptions.Inc()
	e.waiting.pushFront(s)
}

func (e *engine) removeRunning(s *seq) {
	for i, r := range e.running {
		if r == s {
			copy(e.running[i:], e.running[i+1:])
			e.running[len(e.running)-1] = nil
			e.running = e.running[:len(e.running)-1]
			return
		}
	}
}

func (e *engine) freeBlocks(s *seq) {
	e.kv.release(s.own)
	s.own = 0
	for _, c := range s.shared {
		e.kv.drop(c)
	}
	s.shared = s.shared[:0]
}

// complete applies a step that ended at t1 (unix ns): every scheduled sequence whose prefill
// completed or that decoded emits one token. It returns the sequences that finished in a
// counted way (for spans). A profiling window records the step. The caller holds e.mu.
func (e *engine) complete(st step, t1 int64, finished []*seq) []*seq {
	e.record(st, t1)
	m := e.m
	iterTokens, generated := 0, 0
	anyDone := false
	pub := e.pub[:0]
	for _, s := range st.seqs {
		c := s.chunk
		s.chunk = 0
		if s.state != stateRunning || c == 0 {
			continue
		}
		if s.computed < s.prefillTarget {
			s.computed += c
			if s.computed < s.prefillTarget {
				continue // chunked prefill goes on next step
			}
			e.registerBlocks(s)
			if s.generated == 0 {
				s.firstTokenNs = t1
				iterTokens += s.promptLen
				m.promptTokens.Add(float64(s.promptLen))
				m.promptLocal.Add(float64(s.promptLen - s.cachedTokens))
				m.promptCacheHit.Add(float64(s.cachedTokens))
				m.promptCached.Add(float64(s.cachedTokens))
				m.ttft.Observe(float64(t1-s.arrivalNs) / 1e9)
			}
		}
		if s.generated > 0 {
			m.itl.Observe(float64(t1-s.lastTokenNs) / 1e9)
		}
		s.generated++
		s.lastTokenNs = t1
		iterTokens++
		generated++
		var fin uint32
		switch {
		case s.errorAt > 0 && s.generated >= s.errorAt:
			fin = finError
		case s.truncateAt > 0 && s.generated >= s.truncateAt:
			fin = finTruncated
		case s.generated >= s.target:
			fin = s.targetFin
		}
		if fin != finNone {
			e.end(s, fin, t1)
			anyDone = true
			if counted(fin) {
				finished = append(finished, s)
			}
		}
		pub = append(pub, s)
	}
	if iterTokens > 0 {
		m.genTokens.Add(float64(generated))
		m.iterTokens.Observe(float64(iterTokens))
	}
	// Publish only now, so that a client that has seen its tokens or its finish also sees
	// them in every counter.
	for _, s := range pub {
		s.publish(s.generated, s.code)
	}
	clear(pub)
	e.pub = pub[:0]
	if anyDone {
		n := 0
		for _, s := range e.running {
			if s.state == stateRunning {
				e.running[n] = s
				n++
			}
		}
		clear(e.running[n:])
		e.running = e.running[:n]
	}
	e.steps++
	return finished
}

// record adds st, ended at t1, to an open profiling window. The caller holds e.mu.
func (e *engine) record(st step, t1 int64) {
	if e.rec.active {
		e.rec.add(Step{StartNs: st.t0, EndNs: max(t1, st.t0),
			ContextRequests: st.prefilling, ContextTokens: st.prefill,
			GenerationRequests: st.decoding, GenerationTokens: st.decoding})
	}
}

// registerBlocks caches the sequence's full prompt blocks once its prefill has computed them.
func (e *engine) registerBlocks(s *seq) {
	for j := len(s.shared); j < len(s.hashes) && s.own > 0; j++ {
		if c := e.kv.register(s.hashes[j]); c != nil {
			s.own--
			s.shared = append(s.shared, c)
		}
	}
}

// end finishes a sequence at t (unix ns) with code, frees its blocks, and records the
// request-level metrics of counted finishes; the caller publishes it. The caller holds e.mu.
func (e *engine) end(s *seq, code uint32, t int64) {
	s.state = stateDone
	s.code = code
	e.freeBlocks(s)
	s.finishNs = t
	if counted(code) {
		e.m.observeFinished(s, code)
	}
}

// abort ends a waiting or running sequence from outside the step loop (client gone, restart,
// shutdown). It is a no-op for a finished sequence.
func (e *engine) abort(s *seq, code uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.state == stateDone {
		return
	}
	if s.state == stateWaiting {
		e.waiting.remove(s)
	} else {
		e.removeRunning(s)
	}
	e.end(s, code, e.now())
	s.publish(s.generated, code)
}

// dropAll aborts every sequence with code and empties the KV cache; with m non-nil the engine
// switches to that metric set (restart); with closeEngine it refuses later submissions.
func (e *engine) dropAll(code uint32, m *engineMetrics, closeEngine bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = e.closed || closeEngine
	t := e.now()
	end := func(s *seq) {
		s.state = stateDone
		s.code = code
		s.own, s.shared, s.chunk = 0, nil, 0
		s.finishNs = t
		s.publish(s.generated, code)
	}
	e.waiting.drain(end)
	for _, s := range e.running {
		end(s)
	}
	clear(e.running)
	e.running = e.running[:0]
	e.kv.clear()
	if m != nil {
		e.m = m
	}
}

// snapshot returns the gauges of vLLM's scheduler stats.
func (e *engine) snapshot() (running, waiting int, kvUsage float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running), e.waiting.len(), e.kv.usage()
}

// resetPrefixCache empties the prefix cache unless sequences hold blocks.
func (e *engine) resetPrefixCache() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kv.reset()
}

// run is the real-time step loop; it returns when done is closed.
func (e *engine) run(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var finished []*seq
	for {
		e.mu.Lock()
		for e.waiting.len() == 0 && len(e.running) == 0 {
			e.mu.Unlock()
			select {
			case <-e.wake:
			case <-done:
				return
			}
			e.mu.Lock()
		}
		t0 := e.now()
		st := e.schedule(t0)
		e.mu.Unlock()
		if len(st.seqs) == 0 {
			// Nothing schedulable (cannot happen with a valid config); wait for a change.
			select {
			case <-e.wake:
			case <-done:
				return
			}
			continue
		}
		if st.dur > 0 {
			if d := time.Duration(t0 + int64(st.dur) - e.now()); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-done:
					timer.Stop()
					return
				}
			}
		}
		e.mu.Lock()
		finished = e.complete(st, e.now(), finished[:0])
		e.mu.Unlock()
		if e.onFinish != nil {
			for _, s := range finished {
				e.onFinish(s)
			}
		}
		clear(finished)
	}
}
