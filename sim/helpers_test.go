package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fastConfig is a config with short, nonzero step times so tests run quickly but still
// exercise the real-time loop.
func fastConfig() Config {
	c := DefaultConfig()
	c.DecodeStepBase = time.Millisecond
	c.DecodeStepPerSeq = 20 * time.Microsecond
	c.PrefillTokensPerSec = 200000
	c.StopProbability = 0
	return c
}

func startSim(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := Start(context.Background(), cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func withGroundTruth(t testing.TB, cfg *Config) string {
	p := filepath.Join(t.TempDir(), "gt.jsonl")
	cfg.GroundTruthPath = p
	return p
}

var testClient = &http.Client{Timeout: 20 * time.Second}

// chatBody builds a request body; extra fields are merged in.
func chatBody(prompt string, maxTokens int, stream bool, extra map[string]any) []byte {
	m := map[string]any{
		"model":    "inferprobe-sim",
		"messages": []map[string]any{{"role": "user", "content": prompt}},
		"stream":   stream,
	}
	if maxTokens > 0 {
		m["max_tokens"] = maxTokens
	}
	if stream {
		m["stream_options"] = map[string]any{"include_usage": true}
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func post(t testing.TB, url string, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

// sseEvent is one parsed "data:" event.
type sseEvent struct {
	raw  string
	done bool
	obj  map[string]any
}

// readSSE parses an event stream strictly: every event is exactly "data: <payload>\n\n".
func readSSE(t testing.TB, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	br := bufio.NewReader(r)
	var evs []sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return evs, nil
			}
			return evs, err
		}
		if !strings.HasPrefix(line, "data: ") || !strings.HasSuffix(line, "\n") {
			t.Fatalf("bad SSE line %q", line)
		}
		blank, err := br.ReadString('\n')
		if err != nil || blank != "\n" {
			t.Fatalf("event not followed by a blank line: %q, %v", blank, err)
		}
		payload := strings.TrimSuffix(strings.TrimPrefix(line, "data: "), "\n")
		ev := sseEvent{raw: payload}
		if payload == "[DONE]" {
			ev.done = true
		} else if err := json.Unmarshal([]byte(payload), &ev.obj); err != nil {
			t.Fatalf("event is not JSON: %q: %v", payload, err)
		}
		evs = append(evs, ev)
	}
}

// streamResult summarises a vLLM-style stream.
type streamResult struct {
	events       []sseEvent
	content      string
	finish       string
	usage        map[string]any
	done         bool
	errorEvent   map[string]any
	contentEvent int
}

func summarise(t testing.TB, evs []sseEvent) streamResult {
	t.Helper()
	var r streamResult
	r.events = evs
	for _, ev := range evs {
		if ev.done {
			r.done = true
			continue
		}
		if e, ok := ev.obj["error"].(map[string]any); ok {
			r.errorEvent = e
			continue
		}
		if u, ok := ev.obj["usage"].(map[string]any); ok {
			r.usage = u
		}
		choices, _ := ev.obj["choices"].([]any)
		for _, c := range choices {
			ch := c.(map[string]any)
			delta := ch["delta"].(map[string]any)
			if _, isRole := delta["role"]; !isRole {
				r.contentEvent++
			}
			if s, ok := delta["content"].(string); ok {
				r.content += s
			}
			if f, ok := ch["finish_reason"].(string); ok {
				r.finish = f
			}
		}
	}
	return r
}

func num(t testing.TB, m map[string]any, k string) int {
	t.Helper()
	f, ok := m[k].(float64)
	if !ok {
		t.Fatalf("%s missing or not a number in %v", k, m)
	}
	return int(f)
}

// scrape fetches /metrics and parses it with the same parser as a real scraper.
func scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != metricsContentType {
		t.Fatalf("/metrics content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// sample returns the value of the series of family name whose labels include want
// (counter, gauge, or a histogram's count), and whether it exists.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
outer:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func mustSample(t testing.TB, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := sample(mfs, name, want)
	if !ok {
		t.Fatalf("no series %s%v", name, want)
	}
	return v
}

func histSum(t testing.TB, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	for _, m := range mf.GetMetric() {
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				match = false
			}
		}
		if match {
			return m.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

func readGroundTruth(t testing.TB, path string) []GroundTruth {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []GroundTruth
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var g GroundTruth
		if err := json.Unmarshal(line, &g); err != nil {
			t.Fatalf("ground truth line %d: %v", i+1, err)
		}
		out = append(out, g)
	}
	return out
}

func gtByID(t testing.TB, recs []GroundTruth) map[string]GroundTruth {
	m := map[string]GroundTruth{}
	for _, r := range recs {
		if _, dup := m[r.RequestID]; dup {
			t.Fatalf("duplicate ground truth for %s", r.RequestID)
		}
		m[r.RequestID] = r
	}
	return m
}

func words(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

var engine0 = map[string]string{"engine": "0", "model_name": "inferprobe-sim"}

func decodeJSON(resp *http.Response, v any) error {
	return json.NewDecoder(resp.Body).Decode(v)
}
