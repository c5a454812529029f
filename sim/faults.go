package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// requestPlan is everything drawn for one request from the generator seeded with
// (Config.Seed, FNV-1a of the request id). Every value is drawn on every request, in a fixed
// order, so changing one knob never shifts the draws of another.
type requestPlan struct {
	wordSeed    uint64
	target      int
	targetFin   uint32
	reset       bool
	reject      int // 0, 429 or 503
	slowHeaders time.Duration
	errorAt     int // >0: the engine finishes with "error" after this many tokens
	truncateAt  int // >0: the engine aborts after this many tokens and the connection closes
	stallAt     int // content event index before which the stream stalls; -1 none
	stall       time.Duration
}

func requestRNG(seed uint64, id string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// planRequest draws a request's output and faults.
func planRequest(cfg *Config, id string, maxTokens int, ignoreEOS bool) requestPlan {
	r := requestRNG(cfg.Seed, id)
	f := &cfg.Faults
	p := requestPlan{wordSeed: r.Uint64(), stallAt: -1}

	uStop := r.Float64()
	stopLen := 1 + r.IntN(max(maxTokens-1, 1))
	p.target, p.targetFin = maxTokens, finLength
	if !ignoreEOS && maxTokens > 1 && uStop < cfg.StopProbability {
		p.target, p.targetFin = stopLen, finStop
	}

	uReset, u429, u503, uSlow := r.Float64(), r.Float64(), r.Float64(), r.Float64()
	uErr, errPos := r.Float64(), 1+r.IntN(p.target)
	uTrunc, truncPos := r.Float64(), 1+r.IntN(p.target)
	chunks := (p.target + cfg.TokensPerChunk - 1) / cfg.TokensPerChunk
	uStall, stallPos := r.Float64(), r.IntN(chunks)

	switch {
	case uReset < f.Reset:
		p.reset = true
	case u429 < f.Reject429:
		p.reject = 429
	case u503 < f.Reject503:
		p.reject = 503
	}
	if uSlow < f.SlowHeaders {
		p.slowHeaders = f.SlowHeadersDuration
	}
	switch {
	case uErr < f.StreamError:
		p.errorAt = errPos
	case uTrunc < f.Truncate:
		p.truncateAt = truncPos
	}
	if uStall < f.Stall {
		p.stallAt, p.stall = stallPos, f.StallDuration
	}
	return p
}
