package analyze

import (
	"hash/maphash"
	"math/bits"
	"slices"
)

// repeats counts the values of n keys that repeat an earlier one: n minus the number of
// distinct keys among key(0) … key(n−1), ignoring the indices whose key reports ok false.
// It hashes each key (hash/maphash, one random seed per call) into one uint64 per key — the
// hash's top bits above the key's index in the low bits.Len(n) bits — and sorts those,
// comparing the keys themselves only within a run of equal hash bits, so the count is exact
// and costs 8 bytes per key, where a set of strings costs a map entry per key.
func repeats(n int, key func(i int) (string, bool)) int {
	if n <= 1 {
		return 0
	}
	seed := maphash.MakeSeed()
	shift := uint(bits.Len(uint(n - 1))) // index bits
	mask := uint64(1)<<shift - 1
	entries := getHashes(n)
	defer func() { putHashes(entries) }()
	for i := range n {
		if k, ok := key(i); ok {
			entries = append(entries, maphash.String(seed, k)&^mask|uint64(i))
		}
	}
	slices.Sort(entries)
	dups := 0
	for start := 0; start < len(entries); {
		h := entries[start] &^ mask
		end := start + 1
		for end < len(entries) && entries[end]&^mask == h {
			end++
		}
		// within a run of equal hash bits (almost always one key), count the keys seen before
		for j := start + 1; j < end; j++ {
			kj, _ := key(int(entries[j] & mask))
			for m := start; m < j; m++ {
				if km, _ := key(int(entries[m] & mask)); km == kj {
					dups++
					break
				}
			}
		}
		start = end
	}
	return dups
}
