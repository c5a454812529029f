package prom

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
