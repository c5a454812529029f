package prom

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

func TestParseRealCapture(t *testing.T) {
	c, err := Parse([]byte(preText), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{
		"vllm:prompt_tokens_total":            "counter",
		"vllm:prompt_tokens_created":          "gauge",
		"vllm:iteration_tokens_total":         "histogram",
		"vllm:iteration_tokens_total_created": "gauge",
		"vllm:num_requests_waiting":           "gauge",
		"http_request_size_bytes":             "summary",
		"process_start_time_seconds":          "gauge",
	}
	for name, want := range kinds {
		if got := c.Families[name]; got != want {
			t.Errorf("%s is %q, want %q", name, got, want)
		}
	}
	// 52 families declared with samples, plus their _created stamps.
	if n := strings.Count(preText, "# TYPE "); len(c.Families) != n {
		t.Errorf("%d families, want %d (one per # TYPE)", len(c.Families), n)
	}
	// Every vLLM series of engine 0 shares one label set.
	id := ""
	for sid, ls := range c.LabelSets {
		if len(ls) == 2 && ls["engine"] == "0" && strings.HasPrefix(ls["model_name"], "/home/") {
			id = sid
		}
	}
	if id == "" {
		t.Fatal("no {engine, model_name} label set")
	}
	for _, fam := range []string{"vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc", "vllm:request_queue_time_seconds", "vllm:prompt_tokens_created"} {
		if _, ok := c.Values[fam][id]; !ok {
			t.Errorf("%s does not use the shared label set %s", fam, id)
		}
	}
	q := c.Values["vllm:request_queue_time_seconds"][id].Dist
	if q == nil || len(q.Buckets) != 22 || q.Buckets[0].LE != "0.3" || q.Buckets[3].LE != "1.0" || q.Buckets[21].LE != "+Inf" || float64(*q.Count) != 108 {
		t.Fatalf("queue time %+v", q)
	}
	if s := float64(*q.Sum); s != 0.22379724495112896 {
		t.Errorf("queue time sum %v", s)
	}
	if got := c.Helps["vllm:num_requests_waiting"]; got != "Number of requests waiting to be processed." {
		t.Errorf("help %q", got)
	}
	// The summary without quantiles keeps its sum and count.
	for sid, v := range c.Values["http_request_size_bytes"] {
		if c.LabelSets[sid]["handler"] == "/v1/completions" && (v.Dist == nil || float64(*v.Dist.Count) != 108 || len(v.Dist.Buckets) != 0) {
			t.Errorf("summary %+v", v.Dist)
		}
	}
}

func TestParseRejectsNonPrometheusBodies(t *testing.T) {
	for name, body := range map[string]string{
		"html":       "<!DOCTYPE html>\n<html><head><title>Login</title></head><body><h1>Please sign in</h1></body></html>\n",
		"empty":      "",
		"comments":   "# just a comment\n\n",
		"plain text": "Service Unavailable\n",
		"json":       `{"error":"Unauthorized"}`,
		"cut line":   "vllm:num_requests_running{engine=\"0\"",
		"duplicate":  "a 1\na 2\n",
		"dup bucket": "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"1.0\"} 1\nh_count 1\nh_sum 1\n",
		"neg count":  "# TYPE h histogram\nh_bucket{le=\"1\"} -1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(body), Limits{})
			if !errors.Is(err, ErrUnparseable) || !strings.HasPrefix(err.Error(), "unparseable response") {
				t.Errorf("error %v, want unparseable response", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	lim := Limits{MaxBodyBytes: 1000, MaxSeries: 3, MaxLineChars: 40}
	cases := map[string]string{
		"body":     strings.Repeat("# padding padding padding\n", 50),
		"series":   "a 1\nb 1\nc 1\nd 1\n",
		"families": "# TYPE a gauge\n# TYPE b gauge\n# TYPE c gauge\n# TYPE d gauge\na 1\n",
		"line":     "a{l=\"" + strings.Repeat("x", 40) + "\"} 1\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(body), lim)
			if !errors.Is(err, ErrOversized) || !strings.HasPrefix(err.Error(), "oversized") {
				t.Errorf("error %v, want oversized", err)
			}
		})
	}
	// Characters, not bytes: 30 two-byte runes fit 40 characters.
	ok := "a{l=\"" + strings.Repeat("é", 30) + "\"} 1\n"
	if _, err := Parse([]byte(ok), lim); err != nil {
		t.Errorf("a %d-byte line of %d characters: %v", len(ok)-1, len([]rune(ok))-1, err)
	}
	if _, err := Parse([]byte("a 1\nb 1\nc 1\n"), lim); err != nil {
		t.Errorf("exactly at the series limit: %v", err)
	}
	// The defaults: 20,000 series pass, 20,001 do not.
	var b strings.Builder
	for i := 0; i < DefaultMaxSeries; i++ {
		b.WriteString("s{i=\"")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString("\",n=\"")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\"} 1\n")
	}
	if _, err := Parse([]byte(b.String()), Limits{}); err != nil {
		t.Fatalf("20,000 series: %v", err)
	}
	b.WriteString("t 1\n")
	if _, err := Parse([]byte(b.String()), Limits{}); !errors.Is(err, ErrOversized) {
		t.Errorf("20,001 series: %v", err)
	}
	if _, err := Parse([]byte("a{l=\""+strings.Repeat("x", DefaultMaxLineChars)+"\"} 1\n"), Limits{}); !errors.Is(err, ErrOversized) {
		t.Errorf("a line over 65,536 characters: %v", err)
	}
}

func TestFormatBound(t *testing.T) {
	for v, want := range map[float64]string{
		0.3: "0.3", 1000: "1000.0", 0.001: "0.001", 7680: "7680.0", 0: "0.0", 1e-05: "1e-05", 1e16: "1e+16", -2.5: "-2.5",
	} {
		if got := formatBound(v); got != want {
			t.Errorf("formatBound(%v) = %q, want %q", v, got, want)
		}
	}
}

// Non-finite samples are kept and written as strings.
func TestNonFiniteSamplesRoundTrip(t *testing.T) {
	c, err := Parse([]byte("g NaN\nh +Inf\ni -Inf\n# TYPE x histogram\nx_bucket{le=\"+Inf\"} NaN\nx_count +Inf\n"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := artifact.MetricsScrape{Header: artifact.HeaderOf(artifact.KindMetricsScrape), Marker: artifact.ScrapeMarkerManual, Status: artifact.ScrapeOK, Scrape: c, Discovery: &artifact.ScrapeDiscovery{}}
	line, err := artifact.MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"NaN"`, `"+Inf"`, `"-Inf"`, `"sum":null`} {
		if !bytes.Contains(line, []byte(want)) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}
	back, err := artifact.DecodeMetricsScrape(line)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := artifact.MarshalLine(back)
	if !bytes.Equal(line, again) {
		t.Errorf("round trip changed the record:\n%s\n%s", line, again)
	}
}

// A record written by artifact.Writer comes back through the artifact
// reader (as Raw) and artifact.MetricsScrapes.
func TestRecordThroughTheArtifact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := []artifact.MetricsScrape{scrapeOf(t, preText, artifact.ScrapeMarkerPhaseStart, 1e9), failedScrape(artifact.ScrapeMarkerInterval, 2e9), scrapeOf(t, postText, artifact.ScrapeMarkerPhaseEnd, 14e9)}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	first := raw[:bytes.IndexByte(raw, '\n')]
	if !bytes.HasPrefix(first, []byte(`{"event_type":"infer.vllm_scrape","schema_version":1,"observation_scope":"engine_aggregate"`)) {
		t.Errorf("line starts %.120s", first)
	}
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := artifact.MetricsScrapes(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Status != artifact.ScrapeError || *got[1].Error != "HTTP 503" || got[1].Scrape != nil {
		t.Fatalf("scrapes %d %+v", len(got), got[1])
	}
	for i := range recs {
		want, _ := artifact.MarshalLine(recs[i])
		have, _ := artifact.MarshalLine(got[i])
		if !bytes.Equal(want, have) {
			t.Errorf("record %d changed through the artifact", i)
		}
	}
	b := analyze.VLLMCaseTelemetry(got, testCase)
	if d := engine0(t, b).Counters["request_success"].Delta; d == nil || *d != 32 {
		t.Errorf("request_success from the artifact: %v", deref(d))
	}
}

func TestDecodeScrapeRecordErrors(t *testing.T) {
	good, _ := artifact.MarshalLine(scrapeOf(t, "a 1\n", artifact.ScrapeMarkerManual, 1))
	for name, line := range map[string]string{
		"not json":       "{",
		"other kind":     strings.Replace(string(good), `"infer.vllm_scrape"`, `"infer.vllm_span"`, 1),
		"version 2":      strings.Replace(string(good), `"schema_version":1`, `"schema_version":2`, 1),
		"bad marker":     strings.Replace(string(good), `"marker":"manual"`, `"marker":"later"`, 1),
		"ok no scrape":   strings.Replace(string(good), `"scrape":{`, `"scrape":null,"x":{`, 1),
		"error no error": strings.Replace(string(good), `"status":"ok"`, `"status":"error"`, 1),
		"bad status":     strings.Replace(string(good), `"status":"ok"`, `"status":"fine"`, 1),
		"float time":     strings.Replace(string(good), `"observed_at_ns":1,`, `"observed_at_ns":1.5,`, 1),
		"bad value":      strings.Replace(string(good), `"a":{"0":1}`, `"a":{"0":"one"}`, 1),
		"undefined set":  strings.Replace(string(good), `"a":{"0":1}`, `"a":{"7":1}`, 1),
		"trailing":       string(good) + " {}",
	} {
		if name != "not json" && line == string(good) {
			t.Fatalf("%s: the mutation did not apply to %s", name, good)
		}
		if _, err := artifact.DecodeMetricsScrape([]byte(line)); !errors.Is(err, artifact.ErrMetricsScrape) {
			t.Errorf("%s: error %v, want artifact.ErrMetricsScrape", name, err)
		}
	}
	if _, err := artifact.DecodeMetricsScrape(good); err != nil {
		t.Errorf("good record: %v", err)
	}
	var b artifact.SeriesBucket
	for _, bad := range []string{`["x",1]`, `[1,1]`, `["1"]`, `["1",1,2]`, `["1","many"]`} {
		if err := b.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("bucket %s accepted", bad)
		}
	}
	var d artifact.SeriesDistribution
	if err := d.UnmarshalJSON([]byte(`{"buckets":[],"sum":1}`)); err == nil {
		t.Error("a histogram value without count accepted")
	}
}
