package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/sim"
)

// workload is a small closed loop against srv: 3 workers, 12 measured requests, 2 warmup.
func workload(t *testing.T, srv *sim.Server) *loadgen.Config {
	t.Helper()
	cfg := &loadgen.Config{
		Endpoint: srv.URL() + "/v1/chat/completions", Model: sim.DefaultConfig().Model, RunID: "run-test-1",
		Timeout: 10 * time.Second, Stream: true, StreamUsage: true,
		Concurrency: []int{3}, InputTokens: []int{32}, OutputTokens: []int{8}, Requests: 12, WarmupRequests: 2,
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func tokenizer(t *testing.T) prompt.Tokenizer {
	t.Helper()
	tok, err := prompt.TiktokenCounter("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestPipelineRecordsAndJudgement: the sinks get the head records first, every request's
// RequestSent before its infer.request, the closing session, and the judgement last; the
// artifact holds every record but the transient ones; the result carries the report.
func TestPipelineRecordsAndJudgement(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	mem := &artifact.Memory{}
	out := filepath.Join(t.TempDir(), "a.jsonl")
	var warnings []string
	res := New(Spec{Workload: workload(t, srv), Tokenizer: tokenizer(t), TokenizerName: "auto", Output: out, Version: "test",
		Sinks: []artifact.Sink{mem}, Warn: func(m string) { warnings = append(warnings, m) }}).Execute(context.Background())
	if res.Err != nil || res.Status != artifact.StatusCompleted || res.Interrupted || res.Report == nil || !res.Succeeded() {
		t.Fatalf("result %+v", res)
	}
	recs := mem.Records()
	if s, ok := recs[0].(*artifact.Session); !ok || s.Status != artifact.StatusRunning {
		t.Fatalf("first record %T %+v", recs[0], recs[0])
	}
	if _, ok := recs[1].(*artifact.ArtifactHeader); !ok {
		t.Fatalf("second record %T", recs[1])
	}
	j, ok := recs[len(recs)-1].(*artifact.RunJudgement)
	if !ok || j.Outcome != artifact.RunCompleted || !j.Analysed || len(j.Cases) != 1 || j.Cases[0].CaseID != "c3_in32_out8" || j != res.Judgement {
		t.Fatalf("last record %T %+v", recs[len(recs)-1], recs[len(recs)-1])
	}
	if s, ok := recs[len(recs)-2].(*artifact.Session); !ok || s.Status != artifact.StatusCompleted || s.Summary.RequestsRecorded != 14 {
		t.Fatalf("closing session %+v", recs[len(recs)-2])
	}
	sent := map[string]bool{}
	requests, transient := 0, 0
	for _, r := range recs {
		switch v := r.(type) {
		case *artifact.RequestSent:
			sent[v.XRequestID] = true
			transient++
		case *artifact.Request:
			requests++
			if !sent[*v.XRequestID] {
				t.Fatalf("request %s recorded before its RequestSent", v.RequestID)
			}
		case *artifact.RunJudgement:
			transient++
		}
	}
	if requests != 14 || len(sent) != 14 || transient != 15 {
		t.Fatalf("%d requests, %d sent, %d transient records", requests, len(sent), transient)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(data, []byte("\n")); lines != len(recs)-transient {
		t.Fatalf("the artifact has %d lines, the sinks %d durable records", lines, len(recs)-transient)
	}
	if bytes.Contains(data, []byte("inferprobe.live.")) {
		t.Fatal("a transient record reached the artifact")
	}
	if rc := res.Report.Cases["c3_in32_out8"].SuccessfulRequests; rc != 12 {
		t.Fatalf("report request count %d", rc)
	}
	if len(warnings) != 0 {
		t.Fatalf("warnings %q", warnings)
	}
}

// TestPipelineOpenFailure: an artifact that cannot be opened sends nothing; the sinks get a
// failed judgement and are closed.
func TestPipelineOpenFailure(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	cfg := &loadgen.Config{Endpoint: srv.URL + "/v1/chat/completions", Model: "m", RunID: "r", Timeout: time.Second,
		InputTokens: []int{32}, OutputTokens: []int{8}}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := &artifact.Memory{}
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), Output: filepath.Join(blocker, "a.jsonl"),
		Sinks: []artifact.Sink{mem}}).Execute(context.Background())
	if !errors.Is(res.Err, ErrOpen) || res.Status != artifact.RunFailed || res.Path != "" {
		t.Fatalf("result %+v", res)
	}
	recs := mem.Records()
	if len(recs) != 1 || recs[0].(*artifact.RunJudgement).Outcome != artifact.RunFailed {
		t.Fatalf("records %+v", recs)
	}
	if err := mem.Write(recs[0]); !errors.Is(err, artifact.ErrClosed) {
		t.Fatalf("the sink was not closed: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

// TestPipelineStop: Stop before Execute interrupts the run at once; the artifact closes as
// interrupted and the judgement says so.
func TestPipelineStop(t *testing.T) {
	srv := testkit.StartSim(t, nil)
	p := New(Spec{Workload: workload(t, srv), Tokenizer: tokenizer(t), Output: filepath.Join(t.TempDir(), "a.jsonl")})
	p.Stop()
	res := p.Execute(context.Background())
	if res.Status != artifact.StatusInterrupted || !res.Interrupted || res.Err != nil || res.Judgement.Outcome != artifact.RunInterrupted {
		t.Fatalf("result %+v", res)
	}
}

// fakeFeed is a SpanFeed standing in for a server and a receiver: for every request the run
// sends it delivers spans — one, two distinct ones (multiple_spans), or one re-delivered
// with changed content (conflicting_spans), by request index — from its own goroutine.
type fakeFeed struct {
	mu      sync.Mutex
	spans   artifact.Sink
	queue   chan *artifact.Span
	done    chan struct{}
	n       int
	want    map[string]string // x_request_id → "one", "multiple", "conflicting"
	byIndex func(i int) string
}

func (f *fakeFeed) Addrs() (string, string) { return "fake:4318", "fake:4317" }

func (f *fakeFeed) Attach(runID string, spans artifact.Sink) (artifact.Sink, func()) {
	f.spans, f.queue, f.done, f.want = spans, make(chan *artifact.Span, 1024), make(chan struct{}), map[string]string{}
	go func() {
		defer close(f.done)
		for s := range f.queue {
			_ = f.spans.Write(s)
		}
	}()
	return artifact.SinkFunc(f.learn), func() { close(f.queue); <-f.done }
}

func (f *fakeFeed) Capabilities(ctx artifact.Context) artifact.Capabilities {
	return artifact.Capabilities{Context: ctx, EventID: "capabilities:" + artifact.ComponentSpans, Component: artifact.ComponentSpans, Available: true}
}

// learn answers each finished request with its spans.
func (f *fakeFeed) learn(rec artifact.Record) error {
	r, ok := rec.(*artifact.Request)
	if !ok || r.XRequestID == nil {
		return nil
	}
	f.mu.Lock()
	kind := f.byIndex(f.n)
	f.n++
	n := f.n
	f.want[*r.XRequestID] = kind
	f.mu.Unlock()
	span := func(spanID string, e2e float64) *artifact.Span {
		trace, id := *r.TraceID, spanID
		return &artifact.Span{Source: artifact.SpanSourceGRPC, Name: artifact.RequestSpanName, ClockDomain: "server/unix_epoch_ns",
			TraceID: &trace, SpanID: &id, Attributes: map[string]any{
				artifact.AttrRequestID: "chatcmpl-" + *r.XRequestID, artifact.AttrE2E: e2e, artifact.AttrTimeInQueue: 0.001,
				artifact.AttrTimeToFirstToken: 0.01, artifact.AttrTimeInModelPrefill: 0.002, artifact.AttrTimeInModelDecode: 0.02,
			}}
	}
	id := fmt.Sprintf("%016x", n)
	f.queue <- span(id, 0.05)
	switch kind {
	case "multiple":
		f.queue <- span(fmt.Sprintf("%016x", n+1<<32), 0.06)
	case "conflicting":
		f.queue <- span(id, 0.07) // the same ids, other content
	case "one":
		f.queue <- span(id, 0.05) // an identical re-delivery weighs once
	}
	return nil
}

// TestLiveSeriesAgreeWithReport: a run whose spans include requests with two distinct spans
// (multiple_spans) and re-delivered spans with changed content (conflicting_spans): the live
// exporter's server histograms count exactly the requests the report joined, and the
// quarantined ones add no sample — the same join decides both.
func TestLiveSeriesAgreeWithReport(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 5 })
	feed := &fakeFeed{byIndex: func(i int) string { return []string{"one", "multiple", "one", "conflicting"}[i%4] }}
	exp := exporter.New(exporter.Options{})
	labels := exporter.Labels{Target: "sim", Model: "m", Probe: "p"}
	res := New(Spec{Workload: workload(t, srv), Tokenizer: tokenizer(t), Output: filepath.Join(t.TempDir(), "a.jsonl"),
		Spans: feed, SpansDrain: 10 * time.Millisecond, Sinks: []artifact.Sink{exp.StartRun(labels)}}).Execute(context.Background())
	if res.Err != nil || res.Report == nil {
		t.Fatalf("result %+v", res)
	}
	counts := map[string]int{}
	for x, k := range feed.want {
		if !strings.Contains(x, "_warmup_") {
			counts[k]++
		}
	}
	if counts["multiple"] == 0 || counts["conflicting"] == 0 || counts["one"] == 0 {
		t.Fatalf("the run did not cover every case: %v", counts)
	}
	// The routed spans reached the artifact stamped with the run's ids.
	a, err := artifact.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	nspans := 0
	for _, raw := range a.Others {
		if raw.Kind.EventType != artifact.EventSpan {
			continue
		}
		s, err := artifact.DecodeSpanRaw(raw)
		if err != nil || s.RunID != "run-test-1" || s.SessionID != res.SessionID {
			t.Fatalf("span %+v: %v", s, err)
		}
		nspans++
	}
	if nspans != 2*14 {
		t.Fatalf("%d spans in the artifact, want 28", nspans)
	}
	spans := reportSpans(t, res.Report)
	q := spans["quarantined_requests"].(map[string]any)
	if spans["joined"] != float64(counts["one"]) || q[join.MultipleSpans] != float64(counts["multiple"]) || q[join.ConflictingSpans] != float64(counts["conflicting"]) {
		t.Fatalf("report spans %v, feed %v", spans, counts)
	}
	fams, err := exp.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "inferprobe_server_") {
			continue
		}
		var n uint64
		for _, m := range f.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
		if n != uint64(counts["one"]) {
			t.Errorf("%s has %d samples; the report joined %d requests", f.GetName(), n, counts["one"])
		}
	}
}

// reportSpans is the report's telemetry.vllm.spans block, as its JSON gives it.
func reportSpans(t *testing.T, rep *analyze.Report) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if err := analyze.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	spans, _ := m["telemetry"].(map[string]any)["vllm"].(map[string]any)["spans"].(map[string]any)
	if spans == nil {
		t.Fatalf("no spans block in %s", buf.String())
	}
	return spans
}
