package exporter

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferprobe/inferprobe/artifact"
)

var (
	probeA = Labels{Target: "vllm", Model: "facebook/opt-125m", Probe: "steady"}
	probeB = Labels{Target: "vllm", Model: "facebook/opt-125m", Probe: "burst"}
)

func p[T any](v T) *T { return &v }

// gather returns the registry's families by name.
func gather(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// labelMap returns a metric's labels as a map.
func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// labelSet renders a metric's labels as "k=v,k=v" sorted by name.
func labelSet(m *dto.Metric) string {
	lm := labelMap(m)
	keys := make([]string, 0, len(lm))
	for k := range lm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + lm[k]
	}
	return strings.Join(parts, ",")
}

// metric returns the one metric of family name whose labels include want (nil when none).
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	var found *dto.Metric
	for _, m := range fams[name].GetMetric() {
		lm := labelMap(m)
		ok := true
		for k, v := range want {
			if lm[k] != v {
				ok = false
				break
			}
		}
		if ok {
			if found != nil {
				t.Fatalf("%s: more than one series matches %v", name, want)
			}
			found = m
		}
	}
	return found
}

// value returns the counter or gauge value of a series; it fails the test when absent.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	m := metric(t, fams, name, want)
	if m == nil {
		t.Fatalf("%s%v: no such series", name, want)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v: neither counter nor gauge", name, want)
	return 0
}

// series returns the label sets of a family's series, sorted.
func series(fams map[string]*dto.MetricFamily, name string) []string {
	var out []string
	for _, m := range fams[name].GetMetric() {
		out = append(out, labelSet(m))
	}
	sort.Strings(out)
	return out
}

// caseLabels are probe l's labels plus case c.
func caseLabels(l Labels, c string, extra ...string) map[string]string {
	m := map[string]string{LabelTarget: l.Target, LabelModel: l.Model, LabelProbe: l.Probe, LabelCase: c}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func probeLabels(l Labels, extra ...string) map[string]string {
	m := map[string]string{LabelTarget: l.Target, LabelModel: l.Model, LabelProbe: l.Probe}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func approx(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

const baseNS = int64(1_700_000_000_000_000_000)

// xrid is the X-Request-Id of request i of case c in phase ph.
func xrid(c, ph string, i int) string {
	return fmt.Sprintf("inferprobe-r1-%s_%s_0_%d", c, ph, i)
}

// traceOf is a request's trace id (32 lowercase hex digits).
func traceOf(c, ph string, i int) string {
	h := uint32(0)
	for _, b := range []byte(c + ph) {
		h = h*31 + uint32(b)
	}
	return fmt.Sprintf("%016x%016x", h, i+1)
}

// okRequest builds a successful, open-loop, streamed request i of case c with values that
// vary with i: dispatch lag 0.05+0.01·i ms, TTFT 40+3·i ms, e2e 300+7·i ms, output tokens
// 1 when i%4 == 0 else 10+i, reported by the server unless i%5 == 0.
func okRequest(c, ph string, i int) *artifact.Request {
	intended := baseNS + int64(i)*100_000_000
	lag := 0.05 + 0.01*float64(i)
	started := intended + int64(math.Round(lag*1e6))
	e2e := 300 + 7*float64(i)
	out := int64(10 + i)
	if i%4 == 0 {
		out = 1
	}
	src := "server_usage"
	if i%5 == 0 {
		src = "tiktoken"
	}
	return &artifact.Request{
		SessionID:         "s1",
		RequestID:         fmt.Sprintf("%s_%s_0_%d", c, ph, i),
		CaseID:            c,
		Phase:             ph,
		TimestampNS:       p(started),
		StartedAtNS:       p(started),
		EndedAtNS:         p(started + int64(math.Round(e2e*1e6))),
		MaxInFlight:       p(int64(128)),
		Stream:            true,
		Status:            artifact.RequestOK,
		E2ELatencyMS:      p(e2e),
		TTFTMS:            p(40 + 3*float64(i)),
		PromptTokens:      p(int64(100 + i)),
		PromptTokenSource: "server_usage",
		OutputTokens:      p(out),
		OutputTokenSource: src,
		ArrivalMode:       "poisson",
		RequestIndex:      p(int64(i)),
		IntendedAtNS:      p(intended),
		DispatchLagMS:     p(lag),
		HeldForSlot:       p(false),
		XRequestID:        p(xrid(c, ph, i)),
		TraceID:           p(traceOf(c, ph, i)),
	}
}

// failedRequest is request i with another status: sent (lag, ids, e2e and a TTFT when
// status is timeout) unless dropped.
func failedRequest(c, ph string, i int, status string) *artifact.Request {
	r := okRequest(c, ph, i)
	r.Status = status
	r.OutputTokenSource = "unknown"
	switch status {
	case artifact.RequestTimeout:
		// A timeout that had started streaming: it has a TTFT and tokens, neither of which
		// may be counted.
	case artifact.RequestDropped:
		r.TTFTMS, r.E2ELatencyMS, r.DispatchLagMS, r.XRequestID, r.TraceID = nil, nil, nil, nil, nil
		r.OutputTokens = nil
		r.EndedAtNS = r.StartedAtNS
	default:
		r.TTFTMS, r.E2ELatencyMS = nil, nil
		r.OutputTokens = nil
	}
	return r
}

// span builds a vLLM llm_request span with gen_ai.request.id id ("" for none), trace id
// traceID ("" for none) and latencies derived from k: queue k ms, prefill 2k ms, decode 10k
// ms, server TTFT 3k ms, server e2e 13k ms (float64 seconds, as OTLP doubles decode). It has
// no span id, so the join never takes it for a re-delivery of another (see withIDs).
func span(id, traceID string, k float64) *artifact.Span {
	attrs := map[string]any{
		artifact.AttrTimeInQueue:        k / 1000,
		artifact.AttrTimeInModelPrefill: 2 * k / 1000,
		artifact.AttrTimeInModelDecode:  10 * k / 1000,
		artifact.AttrTimeToFirstToken:   3 * k / 1000,
		artifact.AttrE2E:                13 * k / 1000,
		artifact.AttrPromptTokens:       int64(100),
	}
	if id != "" {
		attrs[artifact.AttrRequestID] = id
	}
	s := &artifact.Span{Name: artifact.RequestSpanName, Source: artifact.SpanSourceHTTP, Attributes: attrs}
	if traceID != "" {
		s.TraceID = p(traceID)
	}
	return s
}

// withIDs sets s's trace id and span id, so that a delivery of the same ids is a re-delivery
// of s (identical when its content is, conflicting otherwise), and returns s.
func withIDs(s *artifact.Span, traceID, spanID string) *artifact.Span {
	s.TraceID, s.SpanID = p(traceID), p(spanID)
	return s
}

// redelivered is a copy of s as a second delivery brings it: the same ids and content.
func redelivered(s *artifact.Span) *artifact.Span {
	c := *s
	return &c
}

// sent is the artifact.RequestSent that precedes request rec (its dispatch).
func sent(rec *artifact.Request) *artifact.RequestSent {
	s := &artifact.RequestSent{SessionID: rec.SessionID, CaseID: rec.CaseID, Phase: rec.Phase}
	if rec.XRequestID != nil {
		s.XRequestID = *rec.XRequestID
	}
	if rec.TraceID != nil {
		s.TraceID = *rec.TraceID
	}
	if rec.StartedAtNS != nil {
		s.SentAtNS = *rec.StartedAtNS
	}
	return s
}

// ended is the judgement of a run that ended with outcome at end and whose artifact could
// not be analysed (no cases, no schedule verdict).
func ended(outcome string, end time.Time) *artifact.RunJudgement {
	return &artifact.RunJudgement{Outcome: outcome, EndedAtNS: end.UnixNano()}
}

// histogram returns the histogram of family name for probe l and case c, nil when absent.
func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, l Labels, c string) *dto.Histogram {
	t.Helper()
	m := metric(t, fams, name, caseLabels(l, c))
	if m == nil {
		return nil
	}
	return m.GetHistogram()
}
