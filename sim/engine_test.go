package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

type vArrival struct {
	at        int64
	id        string
	prompt    string
	maxTokens int
	ignoreEOS bool
}

type vResult struct {
	id                              string
	arrival, scheduled, first, last int64
	finish                          int64
	generated, preemptions, cached  int
	target                          int
	fin                             uint32
}

type vStats struct {
	steps, preemptions int
	maxUsed            int
	hits               int
}

// simulate drives one engine on a virtual clock: arrivals enter at their times, each step
// lasts exactly its computed duration (at least 1 ns).
func simulate(t *testing.T, cfg Config, arrivals []vArrival) ([]vResult, vStats) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var now int64
	e := newEngine(0, &cfg, nil, func() int64 { return now })
	ms := newMetricSet(&cfg, []*engine{e}, time.Unix(0, 0))
	e.m = ms.engines[0]
	var seqs []*seq
	var st vStats
	i := 0
	for {
		for i < len(arrivals) && arrivals[i].at <= now {
			a := arrivals[i]
			req, aerr := decodeChatRequest(chatBody(a.prompt, a.maxTokens, false, map[string]any{"ignore_eos": a.ignoreEOS}), &cfg)
			if aerr != nil {
				t.Fatalf("arrival %d: %v", i, aerr)
			}
			p := planRequest(&cfg, a.id, req.maxTokens, req.ignoreEOS)
			q := &seq{id: a.id, engine: e, promptLen: req.promptTokens, maxTokens: req.maxTokens, target: p.target,
				targetFin: p.targetFin, hashes: req.hashes, wordSeed: p.wordSeed, arrivalNs: now, notify: make(chan struct{}, 1)}
			e.submit(q)
			seqs = append(seqs, q)
			i++
		}
		if e.waiting.len() == 0 && len(e.running) == 0 {
			if i == len(arrivals) {
				break
			}
			now = arrivals[i].at
			continue
		}
		stp := e.schedule(now)
		if e.kv.used > cfg.NumGPUBlocks || e.kv.used < 0 {
			t.Fatalf("KV blocks used %d of %d", e.kv.used, cfg.NumGPUBlocks)
		}
		if len(e.running) > cfg.MaxNumSeqs {
			t.Fatalf("running %d > cap %d", len(e.running), cfg.MaxNumSeqs)
		}
		st.maxUsed = max(st.maxUsed, e.kv.used)
		if len(stp.seqs) == 0 {
			t.Fatalf("empty step with %d waiting, %d running", e.waiting.len(), len(e.running))
		}
		now += max(int64(stp.dur), 1)
		e.complete(stp, now, nil)
		st.steps++
	}
	if e.kv.used != 0 {
		t.Fatalf("%d blocks still used after every request finished", e.kv.used)
	}
	if e.kv.evictable != len(e.kv.entries) {
		t.Fatalf("evictable %d != cached entries %d", e.kv.evictable, len(e.kv.entries))
	}
	var out []vResult
	for _, q := range seqs {
		_, fin := q.load()
		out = append(out, vResult{q.id, q.arrivalNs, q.scheduledNs, q.firstTokenNs, q.lastTokenNs, q.finishNs,
			q.generated, q.preemptions, q.cachedTokens, q.target, fin})
		st.preemptions += q.preemptions
		st.hits += q.cachedTokens
	}
	return out, st
}

// mixedArrivals is a bursty workload with shared prompt prefixes.
func mixedArrivals(seed uint64, n int) []vArrival {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []vArrival
	var at int64
	shared := words(64)
	for i := 0; i < n; i++ {
		at += int64(r.IntN(int(20 * time.Millisecond)))
		prompt := fmt.Sprintf("q%d ", i) + words(1+r.IntN(200))
		if i%3 == 0 {
			prompt = shared + fmt.Sprintf(" tail%d", i)
		}
		out = append(out, vArrival{at: at, id: fmt.Sprintf("r%d", i), prompt: prompt, maxTokens: 1 + r.IntN(120), ignoreEOS: i%4 == 0})
	}
	return out
}

func pressureConfig() Config {
	c := DefaultConfig()
	c.NumGPUBlocks = 64
	c.BlockSize = 16
	c.MaxModelLen = 1024
	c.MaxNumSeqs = 16
	c.MaxNumBatchedTokens = 512
	return c
}

func TestEngineDeterministic(t *testing.T) {
	cfg := pressureConfig()
	arr := mixedArrivals(3, 60)
	a, sa := simulate(t, cfg, arr)
	b, _ := simulate(t, cfg, arr)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed and arrivals gave different schedules")
	}
	if sa.preemptions == 0 || sa.hits == 0 {
		t.Fatalf("scenario did not exercise preemption (%d) and prefix hits (%d)", sa.preemptions, sa.hits)
	}
	cfg.Seed = 99
	c, _ := simulate(t, cfg, arr)
	if reflect.DeepEqual(a, c) {
		t.Fatalf("another seed gave the same outputs")
	}
}

func TestEngineInvariants(t *testing.T) {
	cfg := pressureConfig()
	cfg.StopProbability = 0.3
	arr := mixedArrivals(11, 80)
	res, st := simulate(t, cfg, arr)
	stops := 0
	for i, r := range res {
		if r.generated != r.target {
			t.Errorf("%s: generated %d, target %d", r.id, r.generated, r.target)
		}
		if !(r.arrival <= r.scheduled && r.scheduled < r.first && r.first <= r.last && r.last == r.finish) {
			t.Errorf("%s: times out of order %+v", r.id, r)
		}
		if r.fin == finStop {
			stops++
			if arr[i].ignoreEOS || r.generated >= arr[i].maxTokens {
				t.Errorf("%s: stop with ignore_eos=%v at %d/%d", r.id, arr[i].ignoreEOS, r.generated, arr[i].maxTokens)
			}
		} else if r.fin != finLength || r.generated != arr[i].maxTokens {
			t.Errorf("%s: fin %d generated %d max %d", r.id, r.fin, r.generated, arr[i].maxTokens)
		}
		if r.cached%cfg.BlockSize != 0 {
			t.Errorf("%s: cached %d not whole blocks", r.id, r.cached)
		}
	}
	if stops == 0 {
		t.Errorf("no early stops at stop-prob 0.3")
	}
	if st.maxUsed > cfg.NumGPUBlocks {
		t.Errorf("used %d blocks of %d", st.maxUsed, cfg.NumGPUBlocks)
	}
}

// TestEngineStepTimes checks the step-time model on a virtual clock: chunked prefill at the
// configured throughput, then decode steps of base + per-seq.
func TestEngineStepTimes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefillTokensPerSec = 10000
	cfg.DecodeStepBase = 5 * time.Millisecond
	cfg.DecodeStepPerSeq = time.Millisecond
	cfg.MaxNumBatchedTokens = 256
	cfg.StopProbability = 0
	res, st := simulate(t, cfg, []vArrival{{at: 0, id: "one", prompt: words(1000), maxTokens: 4}})
	r := res[0]
	// 1000 prompt tokens in chunks of 256: 4 steps of 5 ms + their share of 100 ms.
	if want := int64(4*5*time.Millisecond + 100*time.Millisecond); r.first != want {
		t.Errorf("first token at %v, want %v", time.Duration(r.first), time.Duration(want))
	}
	if want := r.first + 3*int64(6*time.Millisecond); r.last != want {
		t.Errorf("last token at %v, want %v", time.Duration(r.last), time.Duration(want))
	}
	if st.steps != 7 {
		t.Errorf("%d steps, want 4 prefill + 3 decode", st.steps)
	}
	// Two requests decode together: each step costs base + 2 × per-seq.
	res, _ = simulate(t, cfg, []vArrival{{at: 0, id: "a", prompt: "x", maxTokens: 5}, {at: 0, id: "b", prompt: "y", maxTokens: 5}})
	if d := res[0].last - res[0].first; d != 4*int64(7*time.Millisecond) {
		t.Errorf("batched decode %v, want 4 × 7 ms", time.Duration(d))
	}
}

// TestEngineZeroLatency: a config with all times zero still completes every request.
func TestEngineZeroLatency(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefillTokensPerSec, cfg.DecodeStepBase, cfg.DecodeStepPerSeq = 0, 0, 0
	res, _ := simulate(t, cfg, mixedArrivals(5, 30))
	for _, r := range res {
		if r.generated != r.target {
			t.Fatalf("%s: %d of %d tokens", r.id, r.generated, r.target)
		}
	}
	s := startSim(t, cfg)
	resp := post(t, s.URL(), chatBody("zero latency", 50, true, nil), nil)
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r := summarise(t, evs); !r.done || num(t, r.usage, "completion_tokens") != len(strings.Fields(r.content)) {
		t.Fatalf("zero-latency stream: done %v usage %v", r.done, r.usage)
	}
}

func TestKVCacheLRUAndReset(t *testing.T) {
	k := newKVCache(4)
	k.alloc(2)
	a, b := k.register(1), k.register(2)
	if a == nil || b == nil || k.register(1) != nil {
		t.Fatal("register")
	}
	k.drop(a)
	k.drop(b) // both evictable now, a oldest
	if k.used != 0 || k.evictable != 2 || k.free() != 4 || k.usage() != 0 {
		t.Fatalf("used %d evictable %d", k.used, k.evictable)
	}
	k.alloc(3) // needs one eviction: the oldest (hash 1)
	if _, ok := k.entries[1]; ok {
		t.Fatal("oldest block not evicted")
	}
	if _, ok := k.entries[2]; !ok {
		t.Fatal("newer block evicted")
	}
	if k.reset() {
		t.Fatal("reset succeeded while blocks are used")
	}
	hits := k.lookup([]uint64{2, 3}, 5, nil)
	if len(hits) != 1 {
		t.Fatalf("lookup %d", len(hits))
	}
	k.acquire(hits[0])
	if k.used != 4 || k.evictable != 0 {
		t.Fatalf("after acquire used %d evictable %d", k.used, k.evictable)
	}
	k.drop(hits[0])
	k.release(3)
	if !k.reset() || len(k.entries) != 0 || k.free() != 4 {
		t.Fatal("reset of an idle cache")
	}
}

// TestServerDeterministic: two servers with the same seed answer the same sequence of
// requests (no X-Request-Id, so ids come from the seeded generator) identically.
func TestServerDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		cfg := fastConfig()
		cfg.Seed = seed
		cfg.StopProbability = 0.5
		s := startSim(t, cfg)
		var all strings.Builder
		for i := 0; i < 5; i++ {
			resp := post(t, s.URL(), chatBody(words(5+i), 12, i%2 == 0, nil), nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// Drop the created stamps, which are wall-clock seconds.
			for _, line := range strings.Split(string(b), "\n") {
				if j := strings.Index(line, `"created":`); j >= 0 {
					k := strings.Index(line[j:], ",")
					line = line[:j] + line[j+k:]
				}
				all.WriteString(line + "\n")
			}
		}
		_ = s.Close()
		return all.String()
	}
	a, b, c := run(42), run(42), run(43)
	if a != b {
		t.Fatalf("same seed, different answers:\n%s\n---\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same answers")
	}
	if !strings.Contains(a, `"finish_reason":"stop"`) {
		t.Fatalf("no early stop in\n%s", a)
	}
}
