package vllm

import (
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// BenchmarkParseCapture parses the real 0.30.0 capture (90 KB, 52
// families) into the compact form.
func BenchmarkParseCapture(b *testing.B) {
	body := []byte(preText)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRecord encodes one scrape record as an artifact line.
func BenchmarkEncodeRecord(b *testing.B) {
	rec := scrapeOf(b, preText, artifact.ScrapeMarkerInterval, 1)
	for b.Loop() {
		if _, err := artifact.MarshalLine(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCaseTelemetry computes a case block over a window of 60 scrapes
// (a one-minute phase at the default interval).
func BenchmarkCaseTelemetry(b *testing.B) {
	scrapes := []artifact.VLLMScrape{scrapeOf(b, preText, artifact.ScrapeMarkerPhaseStart, 1e9)}
	for i := 0; i < 58; i++ {
		scrapes = append(scrapes, scrapeOf(b, preText, artifact.ScrapeMarkerInterval, int64(2+i)*1e9))
	}
	scrapes = append(scrapes, scrapeOf(b, postText, artifact.ScrapeMarkerPhaseEnd, 61e9))
	for b.Loop() {
		if blk := CaseTelemetry(scrapes, testCase); blk.State != StateResolved {
			b.Fatal(blk.Reasons)
		}
	}
}
