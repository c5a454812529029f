package prom

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// FuzzParse feeds arbitrary bodies through the text-parsing path: Parse
// never panics, fails only with ErrOversized or ErrUnparseable, and an
// accepted body becomes a record that encodes to strict JSON, decodes back
// unchanged, and survives the delta computation.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		// Excerpts of the real captures: whole inputs of 90 KB make the
		// fuzzer's minimisation too slow to be useful.
		excerpt(preText, "process_start_time_seconds", "vllm:request_success", "vllm:request_queue_time_seconds",
			"vllm:cache_config_info", "vllm:kv_cache_usage_perc", "vllm:iteration_tokens_total", "http_request_size_bytes"),
		excerpt(mustRead("vllm/datadog-integrations-core_vllm-test-fixture_hybrid-0.4.3-plus-v1-families.prom"),
			"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds", "vllm:prompt_tokens_recomputed_total", "vllm:num_requests_swapped"),
		"# TYPE vllm:x histogram\nvllm:x_bucket{engine=\"0\",le=\"1\"} 1\nvllm:x_bucket{engine=\"0\",le=\"+Inf\"} NaN\nvllm:x_count{engine=\"0\"} 2\n",
		"vllm:a_total{engine=\"0\",finished_reason=\"stop\"} 1\nvllm:a_created{engine=\"0\"} 5\nprocess_start_time_seconds 1e9\n",
		"# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\n",
		"<!DOCTYPE html><html></html>",
		"a{l=\"\\\"\\\\\\n\"} -Inf 1700000000000\n",
		"{\"vllm:quoted.name\",engine=\"0\"} 1\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	for _, q := range quirks { // the whitespace, line and value forms of the format
		f.Add([]byte(q.body))
	}
	lim := Limits{MaxBodyBytes: 1 << 20, MaxSeries: 2000, MaxLineChars: 4096}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Parse(body, lim)
		if err != nil {
			if !errors.Is(err, ErrOversized) && !errors.Is(err, ErrUnparseable) {
				t.Fatalf("error %v is neither oversized nor unparseable", err)
			}
			return
		}
		d := engine.Discover(c)
		rec := artifact.MetricsScrape{
			Header: artifact.HeaderOf(artifact.KindMetricsScrape), ObservationScope: artifact.ScopeEngineAggregate,
			SessionID: "s", RunID: "r", ObservedAtNS: 1, TimestampNS: 1, SourceURL: "http://h/metrics",
			Marker: artifact.ScrapeMarkerPhaseStart, IntervalMS: 1000, Status: artifact.ScrapeOK, ClockDomain: "h/unix_epoch_ns",
			CaseID: artifact.Ptr("c"), Phase: artifact.Ptr(artifact.PhaseMeasured), Scrape: c, Discovery: &d,
		}
		line, err := artifact.MarshalLine(rec)
		if err != nil {
			t.Fatalf("encoding: %v", err)
		}
		if !json.Valid(line) {
			t.Fatalf("invalid JSON: %s", line)
		}
		back, err := artifact.DecodeMetricsScrape(line)
		if err != nil {
			t.Fatalf("decoding our own line: %v\n%s", err, line)
		}
		again, _ := artifact.MarshalLine(back)
		if !bytes.Equal(line, again) {
			i := 0
			for i < len(line) && i < len(again) && line[i] == again[i] {
				i++
			}
			lo := max(i-60, 0)
			t.Fatalf("round trip changed the record at byte %d: %q vs %q", i, line[lo:min(i+60, len(line))], again[lo:min(i+60, len(again))])
		}
		end := back
		end.Marker, end.ObservedAtNS = artifact.ScrapeMarkerPhaseEnd, 2
		blk := analyze.VLLMTelemetry([]artifact.MetricsScrape{rec, end}, []string{"c"}, nil)
		if out, err := json.Marshal(blk); err != nil || !json.Valid(out) {
			t.Fatalf("report: %v", err)
		}
		var buf bytes.Buffer
		if err := analyze.RenderVLLMText(&buf, blk); err != nil {
			t.Fatal(err)
		}
	})
}

// excerpt keeps the lines of the named families (and their _bucket, _sum,
// _count, _total and _created samples) from an exposition.
func excerpt(text string, families ...string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		name := line
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name = rest
		}
		for _, f := range families {
			if strings.HasPrefix(name, f) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}

// FuzzDecodeScrapeRecord: arbitrary lines never panic the record decoder.
func FuzzDecodeScrapeRecord(f *testing.F) {
	c, _ := Parse([]byte(preText), Limits{})
	d := engine.Discover(c)
	good, _ := artifact.MarshalLine(artifact.MetricsScrape{Header: artifact.HeaderOf(artifact.KindMetricsScrape), Marker: artifact.ScrapeMarkerInterval, Status: artifact.ScrapeOK, Scrape: c, Discovery: &d})
	f.Add(good)
	f.Add([]byte(`{"event_type":"infer.vllm_scrape","schema_version":1,"marker":"phase_end","status":"error","error":"HTTP 503"}`))
	f.Add([]byte(`{"event_type":"infer.vllm_scrape","schema_version":1,"marker":"manual","status":"ok","scrape":{"families":{"h":"histogram"},"label_sets":{"0":{}},"values":{"h":{"0":{"buckets":[["+Inf","NaN"]],"sum":null,"count":1}}},"helps":{}},"discovery":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := artifact.DecodeMetricsScrape(line)
		if err != nil {
			if !errors.Is(err, artifact.ErrMetricsScrape) {
				t.Fatalf("error %v does not wrap artifact.ErrMetricsScrape", err)
			}
			return
		}
		blk := analyze.VLLMCaseTelemetry([]artifact.MetricsScrape{r, r}, "c")
		if _, err := json.Marshal(blk); err != nil {
			t.Fatal(err)
		}
	})
}

// The fuzz seeds taken from the captures are valid expositions.
func TestFuzzSeedExcerpts(t *testing.T) {
	c, err := Parse([]byte(excerpt(preText, "process_start_time_seconds", "vllm:request_success", "vllm:request_queue_time_seconds")), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Families) != 5 || c.Families["vllm:request_queue_time_seconds"] != "histogram" || c.Families["vllm:request_success_created"] != "gauge" {
		t.Errorf("families %v", c.Families)
	}
}
