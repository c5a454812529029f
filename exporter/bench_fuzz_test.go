package exporter

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// BenchmarkRunWrite measures one measured request record and its span through Run.Write.
func BenchmarkRunWrite(b *testing.B) {
	for _, pending := range []int{0, MaxPendingSpans} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			e := New(Options{})
			r := e.StartRun(probeA)
			// Spans of requests the run never records (the pending list is full of them).
			for i := range pending {
				_ = r.Write(span("chatcmpl-other-"+fmt.Sprint(i), "", 1))
			}
			recs := make([]*artifact.Request, 1024)
			spans := make([]any, len(recs))
			for i := range recs {
				recs[i] = okRequest("caseA", artifact.PhaseMeasured, i)
				s := span("chatcmpl-"+*recs[i].XRequestID, "", 1)
				spans[i] = &s
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % len(recs)
				_ = r.Write(recs[k])
				_ = r.Write(spans[k])
			}
		})
	}
}

// FuzzRunWrite feeds arbitrary ids, labels and values through a run: nothing may panic
// (the exporter must never stop a run), and the scrape must still gather.
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
		_ = r.Write(s)
		_ = r.Write(rec)
		_ = r.Write(&s)
		r.Sent()
		r.Finish(RunCompleted, time.Unix(0, 0), &analyze.Report{Cases: map[string]*analyze.CaseReport{
			caseID: {Population: analyze.Population{ServerEvidenceCoverage: &ms}, SLO: &analyze.Evaluation{
				SLOName: status, Met: int(out), Missed: -int(out), AttainmentLower: &lag}},
		}})
		r.Ended()
		if _, err := e.Registry().Gather(); err != nil {
			t.Fatalf("gather: %v", err)
		}
	})
}
