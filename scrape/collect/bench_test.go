package collect

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/proc"
)

// BenchmarkPollNoGPU measures one --no-gpu poll (liveness check and RSS of a
// real process, the test binary itself, plus encoding the sample). At a
// 100 ms interval the share of one core is ns/op / 1e8.
func BenchmarkPollNoGPU(b *testing.B) {
	ctx := context.Background()
	p, err := proc.Open(ctx, os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(ctx, Config{RunID: "bench", Interval: 100 * time.Millisecond, Host: artifact.HostIdentity(), Process: p,
		Sink: artifact.SinkFunc(func(s artifact.Record) error { _, err := artifact.MarshalLine(s); return err })})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, done, err := c.Poll(ctx); done || err != nil {
			b.Fatal(done, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e8*100, "%core@100ms")
}
