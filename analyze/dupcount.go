package analyze

import (
	"hash/maphash"
	"slices"
)

// repeats counts the values of n keys that repeat an earlier one: n minus the number of
// distinct keys among key(0) … key(n−1), ignoring the indices whose key reports ok false.
// It hashes each key (hash/maphash, one random seed per call) and sorts the hashes, comparing
// the keys themselves only within a run of equal hashes, so the count is exact and costs
// 16 bytes per key, where a set of strings costs a map entry per key.
func repeats(n int, key func(i int) (string, bool)) int {
	seed := maphash.MakeSeed()
	type entry struct {
		h uint64
		i int32
	}
	entries := make([]entry, 0, n)
	for i := range n {
		if k, ok := key(i); ok {
			entries = append(entries, entry{maphash.String(seed, k), int32(i)})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return 0
	})
	dups := 0
	for start := 0; start < len(entries); {
		end := start + 1
		for end < len(entries) && entries[end].h == entries[start].h {
			end++
		}
		// within a run of equal hashes (almost always one key), count the keys seen before
		for j := start + 1; j < end; j++ {
			kj, _ := key(int(entries[j].i))
			for m := start; m < j; m++ {
				if km, _ := key(int(entries[m].i)); km == kj {
					dups++
					break
				}
			}
		}
		start = end
	}
	return dups
}
