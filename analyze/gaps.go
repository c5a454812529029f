package analyze

import (
	"math"
	"unsafe"

	"github.com/inferprobe/inferprobe/artifact"
)

// nsBlock is the number of packed chunk gaps (int32 ns) per shared block.
const nsBlock = 64 << 10

// packedGaps returns r's packed chunk gaps (ns); nil when they are not packed.
func (r *Request) packedGaps() []int32 {
	if r.gapNS == nil {
		return nil
	}
	return unsafe.Slice(r.gapNS, r.gapCount)
}

// gapMS is a packed gap in ms: exactly the float64 it was packed from (packGaps).
func gapMS(ns int32) float64 { return float64(ns) / 1e6 }

// gapLen is the number of r's chunk gaps.
func (r *Request) gapLen() int {
	if r.gapNS != nil {
		return int(r.gapCount)
	}
	return len(r.ChunkInterarrivalMS)
}

// eachGap hands r's chunk gaps (ms) to yield in order.
func (r *Request) eachGap(yield func(float64)) {
	if r.gapNS != nil {
		for _, ns := range r.packedGaps() {
			yield(gapMS(ns))
		}
		return
	}
	for _, g := range r.ChunkInterarrivalMS {
		yield(g)
	}
}

// ChunkGapsMS returns the request's chunk gaps (ms) as recorded: ChunkInterarrivalMS, or a
// new slice holding the packed gaps.
func (r *Request) ChunkGapsMS() []float64 {
	if r.gapNS == nil {
		return r.ChunkInterarrivalMS
	}
	out := make([]float64, 0, r.gapCount)
	r.eachGap(func(g float64) { out = append(out, g) })
	return out
}

// Record returns the request's record: the embedded artifact.Request, or, when its chunk
// gaps are packed, a copy of it with ChunkInterarrivalMS holding them.
func (r *Request) Record() *artifact.Request {
	if r.gapNS == nil {
		return &r.Request
	}
	rec := r.Request
	rec.ChunkInterarrivalMS = r.ChunkGapsMS()
	return &rec
}

// packGaps copies chunk gaps v into p's int32 blocks as whole nanoseconds when every gap is
// one exactly (gap = n / 1e6 for an integer 0 ≤ n < 2^31, not −0: the values a recorder
// writes from nanosecond durations below 2.1 s), returning the first and the count; ok is
// false (nothing copied) otherwise, or without gaps. Half the memory of float64 gaps, the
// same values.
func (p *packer) packGaps(v []float64) (first *int32, n int32, ok bool) {
	if len(v) == 0 || len(v) > nsBlock/8 {
		return nil, 0, false
	}
	for _, g := range v {
		ns := math.Round(g * 1e6)
		if !(ns >= 0 && ns <= math.MaxInt32) || math.Signbit(g) || gapMS(int32(ns)) != g {
			return nil, 0, false
		}
	}
	if cap(p.ns)-len(p.ns) < len(v) {
		p.ns = make([]int32, 0, nsBlock)
	}
	start := len(p.ns)
	for _, g := range v {
		p.ns = append(p.ns, int32(math.Round(g*1e6)))
	}
	return &p.ns[start], int32(len(v)), true
}
