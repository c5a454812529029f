package analyze

import (
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// BenchmarkVLLMCaseTelemetry computes a case block over a window of 60 scrapes
// (a one-minute phase at the default interval).
func BenchmarkVLLMCaseTelemetry(b *testing.B) {
	scrapes := []artifact.MetricsScrape{scrapeOf(b, preText, artifact.ScrapeMarkerPhaseStart, 1e9)}
	for i := 0; i < 58; i++ {
		scrapes = append(scrapes, scrapeOf(b, preText, artifact.ScrapeMarkerInterval, int64(2+i)*1e9))
	}
	scrapes = append(scrapes, scrapeOf(b, postText, artifact.ScrapeMarkerPhaseEnd, 61e9))
	for b.Loop() {
		if blk := VLLMCaseTelemetry(scrapes, testCase); blk.State != StateResolved {
			b.Fatal(blk.Reasons)
		}
	}
}
