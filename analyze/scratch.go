package analyze

import "sync"

// floatScratch and hashScratch hold the value lists that the blocks of a case report fill,
// summarise and drop in turn (latencies, lags, lengths: one float64 per request), so that a
// report takes a few of them instead of one per block; with GOGC off (the analyze verb) every
// list not reused would stay in memory until the process exits.
var floatScratch, hashScratch sync.Pool

// getFloats returns an empty list with room for n values, reused when one is free. Hand it
// back with putFloats once nothing reads it.
func getFloats(n int) []float64 {
	if p, ok := floatScratch.Get().(*[]float64); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]float64, 0, n)
}

func putFloats(values []float64) { floatScratch.Put(&values) }

// getHashes and putHashes are getFloats and putFloats for uint64 lists (repeats).
func getHashes(n int) []uint64 {
	if p, ok := hashScratch.Get().(*[]uint64); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]uint64, 0, n)
}

func putHashes(values []uint64) { hashScratch.Put(&values) }
