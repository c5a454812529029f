package loadgen

import (
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// BenchmarkRequestBuild measures what send does per request before the HTTP call: the
// request id and X-Request-Id, the trace id, the JSON body (a 64-token prompt, one extra
// body field) and the headers.
func BenchmarkRequestBuild(b *testing.B) {
	extra, err := ParseExtraBody(`{"ignore_eos": true}`)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{Model: "inferprobe-sim", Stream: true, StreamUsage: true, MaxTokensField: "max_tokens", ExtraBody: extra, RunID: "run-1"}
	p := &phase{cs: Case{ID: "fixed500_in64_out14", OutputTokens: 14}, name: PhaseMeasured}
	text := strings.Repeat("lorem ipsum ", 32)
	a := &attempt{idx: 12345}
	b.ReportAllocs()
	for b.Loop() {
		a.xReqID = artifact.XRequestIDPrefix(cfg.RunID) + p.requestID(a)
		a.traceID = newTraceID()
		body, err := buildBody(cfg, text, p.cs.OutputTokens)
		if err != nil || len(body) == 0 {
			b.Fatal(err)
		}
		if h := buildHeader(cfg, a.xReqID, a.traceID); len(h) != 4 {
			b.Fatal(h)
		}
	}
}
