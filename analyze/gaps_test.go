package analyze

import (
	"math"
	"reflect"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// Chunk gaps that are whole nanoseconds below 2^31 are packed as int32 and read back as the
// same float64s; any other list (a fraction of a nanosecond, 2.1 s or more, −0, NaN, ±Inf, an
// empty list) stays in ChunkInterarrivalMS as recorded.
func TestPackedGapsReadBackTheSameValues(t *testing.T) {
	tenth := 0.1
	for _, c := range []struct {
		gaps   []float64
		packed bool
	}{
		{[]float64{1.5, 2.25, 3}, true},
		{[]float64{10.058326, 9.968055, 0, 21.489, 2147.483647}, true},
		{[]float64{tenth + 2*tenth}, false}, // 0.30000000000000004
		{[]float64{1, 2147.483648}, false},
		{[]float64{1, math.Copysign(0, -1)}, false},
		{[]float64{1, math.NaN()}, false},
		{[]float64{math.Inf(1)}, false},
		{[]float64{-1}, false},
		{[]float64{}, false},
		{nil, false},
	} {
		var p packer
		r := &artifact.Request{RequestID: "r", ChunkInterarrivalMS: c.gaps}
		got := p.request(r)
		if packed := got.gapNS != nil; packed != c.packed || packed && got.ChunkInterarrivalMS != nil {
			t.Errorf("%v: packed %v (gaps field %v), want packed %v", c.gaps, packed, got.ChunkInterarrivalMS, c.packed)
		}
		if !reflect.DeepEqual(r.ChunkInterarrivalMS, c.gaps) {
			t.Errorf("%v: the decoded record changed to %v", c.gaps, r.ChunkInterarrivalMS)
		}
		back := got.ChunkGapsMS()
		if len(back) != len(c.gaps) || got.gapLen() != len(c.gaps) || (c.gaps == nil) != (back == nil) {
			t.Fatalf("%v: read back %v (%d)", c.gaps, back, got.gapLen())
		}
		for i := range back {
			if math.Float64bits(back[i]) != math.Float64bits(c.gaps[i]) {
				t.Errorf("%v: gap %d read back as %v", c.gaps, i, back[i])
			}
		}
		if rec := got.Record(); !reflect.DeepEqual(rec.ChunkInterarrivalMS, back) || rec.RequestID != "r" {
			t.Errorf("%v: record gaps %v, id %q", c.gaps, rec.ChunkInterarrivalMS, rec.RequestID)
		}
	}
}
