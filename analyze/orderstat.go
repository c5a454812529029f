package analyze

import (
	"math"
	"slices"
	"unsafe"
)

// smallSpread is the value count up to which spread95Of copies the values and selects in
// the copy; above it, it counts them into histogram buckets instead (spreadBuckets).
const smallSpread = 1 << 16

// spreadBits is how many of the top bits of a value's order key name its histogram bucket:
// sign, exponent and the top 8 mantissa bits, so one bucket spans 1/256 of an octave.
const spreadBits = 20

// spread95Of is spread95 of the finite values that each hands to its yield function, in any
// order (each is called up to three times and must hand over the same values each time):
// the same {p50, p95, max}, by the same rank and interpolation rule as quantileInPlace, but
// without holding a copy of the values when there are many. Above smallSpread values it
// counts them into 2^spreadBits buckets of their order key (order-preserving for finite
// floats), finds the bucket of each order statistic it needs, and selects within the values
// of those buckets only (a few MiB instead of 8 bytes a value). NaN and ±Inf are skipped.
func spread95Of(each func(yield func(float64))) Spread95 {
	n, hi := 0, math.Inf(-1)
	each(func(v float64) {
		if finite(v) {
			n++
			if v > hi { // maxOf's rule: the first of equal maxima
				hi = v
			}
		}
	})
	return spread95Counted(n, hi, each)
}

// spread95Counted is spread95Of for a caller that has counted the n finite values and found
// their maximum hi already (one pass fewer).
func spread95Counted(n int, hi float64, each func(yield func(float64))) Spread95 {
	if n == 0 {
		return Spread95{}
	}
	if n <= smallSpread {
		values := make([]float64, 0, n)
		each(func(v float64) {
			if finite(v) {
				values = append(values, v)
			}
		})
		return spread95(values)
	}
	ranks := []float64{0.5 * float64(n-1), 0.95 * float64(n-1)}
	var ks []int // the order statistics (0-based) the quantiles need
	for _, rank := range ranks {
		if lower := int(math.Floor(rank)); lower < n-1 {
			ks = append(ks, lower, lower+1)
		}
	}
	stats := orderStats(each, n, ks)
	quantile := func(rank float64) *float64 {
		lower := int(math.Floor(rank))
		if lower >= n-1 {
			return f64Ptr(hi)
		}
		a, b, weight := stats[lower], stats[lower+1], rank-float64(lower)
		if weight == 0 || a == b {
			return f64Ptr(a)
		}
		return f64Ptr(a + weight*(b-a))
	}
	return Spread95{P50: quantile(ranks[0]), P95: quantile(ranks[1]), Max: f64Ptr(hi)}
}

// orderKey maps a finite float to a uint64 whose order is the float's (−0 just below +0).
func orderKey(v float64) uint64 {
	b := math.Float64bits(v)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// orderStats returns the k-th smallest (0-based) of the n finite values each yields, for
// every k of ks (each 0 ≤ k < n), by bucket histogram: one pass counts the values per
// bucket, a second keeps the values of the buckets holding a wanted k, which are then sorted.
func orderStats(each func(yield func(float64)), n int, ks []int) map[int]float64 {
	counts := make([]uint32, 1<<spreadBits)
	each(func(v float64) {
		if finite(v) {
			counts[orderKey(v)>>(64-spreadBits)]++
		}
	})
	type want struct {
		bucket uint64
		rank   int // within the bucket
	}
	wants := make(map[int]want, len(ks))
	kept := map[uint64][]float64{}
	below := 0
	for b, c := range counts {
		for _, k := range ks {
			if k >= below && k < below+int(c) {
				wants[k] = want{uint64(b), k - below}
				kept[uint64(b)] = nil
			}
		}
		below += int(c)
	}
	each(func(v float64) {
		if !finite(v) {
			return
		}
		b := orderKey(v) >> (64 - spreadBits)
		if list, ok := kept[b]; ok {
			kept[b] = append(list, v)
		}
	})
	for _, list := range kept {
		slices.Sort(list)
	}
	out := make(map[int]float64, len(ks))
	for k, w := range wants {
		out[k] = kept[w.bucket][w.rank]
	}
	return out
}

// SortFloats sorts finite values ascending in place, as sortFloats does (a radix sort from
// a few thousand values): for callers that rank many values (compare, pareto).
func SortFloats(values []float64) { sortFloats(values) }

// radixMin is the length from which sortFloats sorts by radix instead of comparisons.
const radixMin = 1 << 12

// sortFloats sorts values ascending as sort.Float64s does (the same sorted values; of equal
// values only −0 and +0 can be told apart, and sortFloats puts −0 first). From radixMin
// values without NaN it sorts their order keys (orderKey) by least-significant-digit radix,
// radixBits a pass (a pass is skipped when every key has the same digit), the keys held in
// the values' own memory and one list from hashScratch: linear time where comparison
// sorting takes n·log n.
func sortFloats(values []float64) {
	if len(values) < radixMin || slices.ContainsFunc(values, math.IsNaN) {
		slices.Sort(values) // NaN: sort.Float64s's order
		return
	}
	// the keys take the values' own memory: each value becomes its key in place, and back
	keys := unsafe.Slice((*uint64)(unsafe.Pointer(&values[0])), len(values))
	for i, v := range values {
		keys[i] = orderKey(v)
	}
	radixSort(keys)
	for i, k := range keys {
		values[i] = fromOrderKey(k)
	}
}

// fromOrderKey is orderKey's inverse.
func fromOrderKey(k uint64) float64 {
	if k>>63 == 1 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// radixSort sorts keys ascending, radixBits a pass from the lowest, through a second list
// from hashScratch.
func radixSort(keys []uint64) {
	tmp := getHashes(len(keys))[:len(keys)]
	defer func() { putHashes(tmp) }()
	src, dst := keys, tmp
	var counts [1 << radixBits]int
	for shift := uint(0); shift < 64; shift += radixBits {
		clear(counts[:])
		for _, k := range src {
			counts[k>>shift&radixMask]++
		}
		if counts[src[0]>>shift&radixMask] == len(src) {
			continue // one digit for all: this pass changes nothing
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		for _, k := range src {
			d := k >> shift & radixMask
			dst[counts[d]] = k
			counts[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// radixBits is the digit of radixSort: 2^11 counters stay in the first-level cache.
const (
	radixBits = 11
	radixMask = 1<<radixBits - 1
)
