package receiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/sim"
)

// The simulated engine exports its real llm_request spans over gRPC and
// over http/protobuf into the receiver: one span per request, joined by
// X-Request-Id and traceparent, with the engine's token counts.
func TestSimEndToEnd(t *testing.T) {
	for _, proto := range []string{sim.ProtocolGRPC, sim.ProtocolHTTPProtobuf} {
		t.Run(proto, func(t *testing.T) {
			col := newCollector()
			r := startReceiver(t, Options{SessionID: "sess-1", RunID: "run-1", Sink: col})
			cfg := sim.DefaultConfig()
			cfg.DecodeStepBase = time.Millisecond
			cfg.DecodeStepPerSeq = 20 * time.Microsecond
			cfg.PrefillTokensPerSec = 200000
			cfg.OTLPProtocol = proto
			cfg.OTLPBatchDelay = 50 * time.Millisecond
			if proto == sim.ProtocolGRPC {
				cfg.OTLPTracesEndpoint = r.GRPCAddr()
			} else {
				cfg.OTLPTracesEndpoint = "http://" + r.HTTPAddr() + TracesPath
			}
			s, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			const n = 16
			type sent struct {
				xrid, traceID, parentID string
				prompt, completion      int64
			}
			results := make([]sent, n)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					res := sent{
						xrid:     fmt.Sprintf("inferprobe-run-1-c4_measured_%d_%d", i%4, i/4),
						traceID:  fmt.Sprintf("%032x", 0xabc000+i),
						parentID: fmt.Sprintf("%016x", 0xdef000+i),
					}
					body, _ := json.Marshal(map[string]any{
						"model":      "inferprobe-sim",
						"messages":   []map[string]string{{"role": "user", "content": strings.Repeat("word ", 20+i)}},
						"max_tokens": 8 + i,
					})
					req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Request-Id", res.xrid)
					req.Header.Set("Traceparent", "00-"+res.traceID+"-"+res.parentID+"-01")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						errs <- err
						return
					}
					defer resp.Body.Close()
					var out struct {
						Usage struct {
							PromptTokens     int64 `json:"prompt_tokens"`
							CompletionTokens int64 `json:"completion_tokens"`
						} `json:"usage"`
					}
					if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
						errs <- fmt.Errorf("request %d: status %d, %v", i, resp.StatusCode, err)
						return
					}
					res.prompt, res.completion = out.Usage.PromptTokens, out.Usage.CompletionTokens
					results[i] = res
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			spans := col.wait(t, n, 15*time.Second)
			byReq := map[string]artifact.Span{}
			for _, sp := range spans {
				if sp.RequestID == nil {
					t.Fatalf("span without request id: %+v", sp)
				}
				if _, dup := byReq[*sp.RequestID]; dup {
					t.Fatalf("two spans for %s", *sp.RequestID)
				}
				byReq[*sp.RequestID] = sp
			}
			wantSource := artifact.SpanSourceGRPC
			if proto == sim.ProtocolHTTPProtobuf {
				wantSource = artifact.SpanSourceHTTP
			}
			for _, res := range results {
				sp, ok := byReq[res.xrid]
				if !ok {
					t.Fatalf("no span for %s", res.xrid)
				}
				if id, _ := sp.String(artifact.AttrRequestID); id != "chatcmpl-"+res.xrid {
					t.Fatalf("gen_ai.request.id %q", id)
				}
				if *sp.TraceID != res.traceID || sp.ParentSpanID == nil || *sp.ParentSpanID != res.parentID {
					t.Fatalf("%s: trace %s parent %v, want %s %s", res.xrid, *sp.TraceID, sp.ParentSpanID, res.traceID, res.parentID)
				}
				p, _ := sp.Int(artifact.AttrPromptTokens)
				c, _ := sp.Int(artifact.AttrCompletionTokens)
				if p != res.prompt || c != res.completion || p == 0 || c == 0 {
					t.Fatalf("%s: tokens %d/%d, usage said %d/%d", res.xrid, p, c, res.prompt, res.completion)
				}
				e2e, ok1 := sp.Float(artifact.AttrE2E)
				ttft, ok2 := sp.Float(artifact.AttrTimeToFirstToken)
				dur, _ := sp.DurationNS()
				if !ok1 || !ok2 || ttft <= 0 || ttft > e2e || dur <= 0 {
					t.Fatalf("%s: ttft %v e2e %v duration %d", res.xrid, ttft, e2e, dur)
				}
				if sp.Source != wantSource || *sp.Kind != "SERVER" || sp.ClockDomain != "127.0.0.1/unix_epoch_ns" || sp.Scope["name"] != "vllm.llm_engine" {
					t.Fatalf("%s: source %s kind %s domain %s scope %v", res.xrid, sp.Source, *sp.Kind, sp.ClockDomain, sp.Scope)
				}
			}
		})
	}
}
