package sim

import (
	"io"
	"runtime"
	"testing"
)

// countingDiscard counts the bytes written to it and keeps none.
type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkKinetoTrace measures the trace writer on SyntheticSteps, uncompressed to a
// discarding writer: one op is one trace of 2,000 steps (about 27 MB). Reported: MB/s of
// trace JSON (b.SetBytes), bytes_per_step, and peak_heap_MB (the largest heap in use seen
// after each trace: it must not grow with the trace).
func BenchmarkKinetoTrace(b *testing.B) {
	const steps = 2000
	k := KinetoTrace{Rank: 0, WorldSize: 1, BaseNs: 1_700_000_000_000_000_000, Seed: 1}
	var c countingDiscard
	if err := k.Write(&c, SyntheticSteps(steps, k.BaseNs+1e9, 1), io.Discard); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(c.n)
	b.ReportAllocs()
	var ms runtime.MemStats
	var peak uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := k.Write(io.Discard, SyntheticSteps(steps, k.BaseNs+1e9, int64(i)), nil); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	b.ReportMetric(float64(c.n)/steps, "bytes_per_step")
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MB")
}
