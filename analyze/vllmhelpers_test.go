package analyze

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

const (
	fixtureDir = "testdata"
	testCase   = "c8_in512_out128"
)

var (
	preText  = mustRead("stormlog/vllm/q05_c08_metrics_pre.txt")
	postText = mustRead("stormlog/vllm/q05_c08_metrics_post.txt")
)

func mustRead(rel string) string {
	b, err := os.ReadFile(filepath.Join(fixtureDir, rel))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// scrapeOf parses text into an ok record of testCase's measured phase.
func scrapeOf(t testing.TB, text, marker string, observedNS int64) artifact.MetricsScrape {
	t.Helper()
	c, err := prom.Parse([]byte(text), prom.Limits{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	d := engine.Discover(c)
	return artifact.MetricsScrape{
		Header:           artifact.HeaderOf(artifact.KindMetricsScrape),
		ObservationScope: artifact.ScopeEngineAggregate,
		SessionID:        "s", RunID: "run-1",
		ObservedAtNS: observedNS, TimestampNS: observedNS,
		SourceURL: "http://127.0.0.1:8000/metrics", Marker: marker, IntervalMS: 1000,
		Status: artifact.ScrapeOK, ClockDomain: "h/unix_epoch_ns",
		CaseID: artifact.Ptr(testCase), Phase: artifact.Ptr(artifact.PhaseMeasured),
		Scrape: c, Discovery: &d,
	}
}

// failedScrape is an error record of testCase's measured phase.
func failedScrape(marker string, observedNS int64) artifact.MetricsScrape {
	return artifact.MetricsScrape{
		Header: artifact.HeaderOf(artifact.KindMetricsScrape), ObservationScope: artifact.ScopeEngineAggregate,
		SessionID: "s", RunID: "run-1", ObservedAtNS: observedNS, TimestampNS: observedNS,
		SourceURL: "http://127.0.0.1:8000/metrics", Marker: marker, IntervalMS: 1000,
		Status: artifact.ScrapeError, ClockDomain: "h/unix_epoch_ns",
		CaseID: artifact.Ptr(testCase), Phase: artifact.Ptr(artifact.PhaseMeasured),
		HTTPStatus: artifact.Ptr(503), Error: artifact.Ptr("HTTP 503"),
	}
}

// scrapeWindow builds the standard scrape window: start at 1 s, end at 14 s (13 s).
func scrapeWindow(t testing.TB, pre, post string) []artifact.MetricsScrape {
	return []artifact.MetricsScrape{scrapeOf(t, pre, artifact.ScrapeMarkerPhaseStart, 1e9), scrapeOf(t, post, artifact.ScrapeMarkerPhaseEnd, 14e9)}
}

// setValue substitutes value for the value of every sample line whose text
// up to the value matches seriesRE.
func setValue(t testing.TB, text, seriesRE, value string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(` + seriesRE + `) \S+$`)
	out := re.ReplaceAllString(text, "${1} "+value)
	if out == text {
		t.Fatalf("no line matches %q", seriesRE)
	}
	return out
}

// dropLines removes the sample lines matching re.
func dropLines(t testing.TB, text, lineRE string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + lineRE + `.*\n`)
	out := re.ReplaceAllString(text, "")
	if out == text {
		t.Fatalf("no line matches %q", lineRE)
	}
	return out
}

func mustReplace(t testing.TB, text, old, new string) string {
	t.Helper()
	if !strings.Contains(text, old) {
		t.Fatalf("text lacks %q", old)
	}
	return strings.ReplaceAll(text, old, new)
}

// engine0 returns the block of engine "0", failing the test without it.
func engine0(t testing.TB, b *VLLMCaseBlock) *VLLMEngineBlock {
	t.Helper()
	e := b.Engines["0"]
	if e == nil {
		t.Fatalf("no engine 0 block; engines %v, reasons %v", keysOf(b.Engines), b.Reasons)
	}
	return e
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return sortedKeys(setOf(out))
}

func setOf(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// toJSON marshals v and fails on error; the result must be strict JSON.
func toJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	return b
}

func renderVLLMText(t testing.TB, b *VLLMBlock) string {
	t.Helper()
	var buf bytes.Buffer
	if err := RenderVLLMText(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// deref returns *p, or nil for a nil pointer (for messages).
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
