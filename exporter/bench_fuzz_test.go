package exporter

import (
	"math"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// BenchmarkRunWrite measures one measured request record and its span through Run.Write.
func BenchmarkRunWrite(b *testing.B) {
	e := New(Options{})
	r := e.StartRun(probeA)
	recs := make([]*artifact.Request, 1024)
	spans := make([]*artifact.Span, len(recs))
	for i := range recs {
		recs[i] = okRequest("caseA", artifact.PhaseMeasured, i)
		spans[i] = span("chatcmpl-"+*recs[i].XRequestID, "", 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(recs)
		_ = r.Write(recs[k])
		_ = r.Write(spans[k])
	}
}

// FuzzRunWrite feeds arbitrary ids, labels and values through a run and its judgement:
// nothing may panic (the exporter must never stop a run), and the scrape must still gather.
func FuzzRunWrite(f *testing.F) {
	f.Add("caseA", "ok", "inferprobe-r1-x", "0123456789abcdef0123456789abcdef", "chatcmpl-inferprobe-r1-x", 12.5, 0.2, int64(10), "measured")
	f.Add("c\xff", "weird", "\xfe", "", "cmpl-\xfe-0", math.NaN(), math.Inf(1), int64(-3), "warmup")
	f.Add("", "", "", "t", "", -1.0, -5.0, int64(1), "")
	f.Fuzz(func(t *testing.T, caseID, status, xr, trace, spanID string, ms, lag float64, out int64, phase string) {
		e := New(Options{Thresholds: map[string][]float64{KeyTTFT: {ms / 1000, lag}}})
		r := e.StartRun(probeA)
		rec := okRequest("c", artifact.PhaseMeasured, 1)
		rec.CaseID, rec.Status, rec.Phase = caseID, status, phase
		rec.XRequestID, rec.TraceID = &xr, &trace
		rec.TTFTMS, rec.E2ELatencyMS, rec.DispatchLagMS = &ms, &lag, &lag
		rec.OutputTokens, rec.PromptTokens = &out, &out
		s := span(spanID, trace, ms)
		s.SpanID = &xr
		conflicting := redelivered(s)
		conflicting.Attributes = map[string]any{artifact.AttrRequestID: spanID, artifact.AttrE2E: lag}
		_ = r.Write(&artifact.RequestSent{CaseID: caseID, Phase: phase, XRequestID: xr, TraceID: trace})
		_ = r.Write(s)
		_ = r.Write(rec)
		_ = r.Write(redelivered(s))
		if out%2 == 0 {
			_ = r.Write(conflicting)
		}
		met := out%3 == 0
		outcomes := []string{RunCompleted, RunInterrupted, RunIncomplete, RunFailed}
		_ = r.Write(&artifact.RunJudgement{Outcome: outcomes[(out%4+4)%4], EndedAtNS: out, Analysed: out%5 != 0, ScheduleMet: &met,
			Cases: []artifact.CaseJudgement{{CaseID: caseID, SpanJoinCoverage: &ms, SLO: &artifact.SLOJudgement{
				Name: status, Met: int(out), Missed: -int(out), Unknown: int(out % 7), AttainmentLower: &lag, GoodputUpperRPS: &ms}}},
		})
		_ = r.Write(&artifact.RequestSent{XRequestID: xr})
		_ = r.Write(rec)
		_ = r.Close()
		if _, err := e.Registry().Gather(); err != nil {
			t.Fatalf("gather: %v", err)
		}
	})
}
