// Package synth writes realistic, deterministic synthetic runs: the records a Poisson
// open-loop `inferprobe profile` run produces — the running infer.session (with its config),
// the infer.artifact header, the infer.workload record (built by loadgen.Config, so its digest
// and seed are real), per case an infer.cache_state, one infer.request per scheduled arrival
// and the measured infer.phase_window, optionally the server's llm_request span of every
// sent request, and the final infer.session. The analyze benchmark (bench/genartifact) and
// the golden tests of the run pipeline use it.
//
// Arrivals follow the case's real seeded schedule (schedule.Build with the stream
// caseID+"/measured"), so the phase windows, intended times and the analyser's recomputed
// schedule agree and every cohort is valid. Each request streams ~16 chunk gaps; the status
// mix is 97.5% ok, 1% timeout, 0.5% error (HTTP 500) and 1% dropped at the in-flight cap.
// Latencies, token counts, chunk gaps and span times are drawn from a seeded PCG, so the
// records are the same for the same Run.
package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// Run describes a synthetic run.
type Run struct {
	// Requests is the number of measured requests in all, split evenly over Cases Poisson
	// cases at 250, 500, 750, … requests per second.
	Requests, Cases int
	// Seed seeds the schedule, the prompts and every drawn value.
	Seed int64
	// Spans adds the llm_request span of every request that was sent (times on the client's
	// clock, attributes as vLLM writes them), and a second, distinct span for every request
	// whose index is 3 mod 10, which the join quarantines as multiple_spans.
	Spans bool
	// Sent adds an artifact.RequestSent before each sent request (live sinks count requests
	// in flight with them).
	Sent bool
	// TTFTScale multiplies every drawn TTFT (0 means 1): the same workload (one digest) with
	// a slower or faster first token, for compare's tests and benchmark.
	TTFTScale float64
}

// SessionID and RunID are the synthetic run's ids.
const (
	SessionID = "bench-session-0001"
	RunID     = "bench-run"
)

// ttftScale is TTFTScale, 1 when unset.
func (r Run) ttftScale() float64 {
	if r.TTFTScale == 0 {
		return 1
	}
	return r.TTFTScale
}

// Config is the run's workload (validated).
func (r Run) Config() (*loadgen.Config, error) {
	perCase := r.Requests / r.Cases
	rates := make([]float64, r.Cases)
	for i := range rates {
		rates[i] = 250 * float64(i+1)
	}
	cfg := &loadgen.Config{
		Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "Qwen/Qwen2.5-0.5B-Instruct", RunID: RunID,
		Timeout: 60 * time.Second, Stream: true, StreamUsage: true, Seed: r.Seed,
		InputTokens: []int{512}, OutputTokens: []int{128}, Requests: perCase,
		Arrival: schedule.Poisson, Rates: rates, MaxInFlight: 256, Overflow: loadgen.OverflowDrop,
		PromptMode: prompt.Unique,
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Write writes the run's records to sink, in the order a real run writes them. Errors: the
// workload does not validate (Requests < Cases), or a Write error.
func (r Run) Write(sink artifact.Sink) error {
	if r.Cases < 1 || r.Requests < r.Cases {
		return fmt.Errorf("synth: %d requests over %d cases", r.Requests, r.Cases)
	}
	cfg, err := r.Config()
	if err != nil {
		return err
	}
	cases, err := cfg.Cases()
	if err != nil {
		return err
	}
	return r.write(sink, cfg, cases, r.Requests/r.Cases)
}

// write writes the whole run to w.
func (r Run) write(w artifact.Sink, cfg *loadgen.Config, cases []loadgen.Case, perCase int) error {
	sessionID, seed := SessionID, r.Seed
	host := artifact.Host{Name: "bench-host"}
	t0 := int64(1_760_000_000_000_000_000) // a fixed wall-clock start, Unix ns
	workload, err := cfg.WorkloadRecord(sessionID, nil)
	if err != nil {
		return err
	}
	header := artifact.NewArtifactHeader(cfg.RunID, sessionID, "bench", t0, host, 4242)
	if err := writeAll(w,
		&artifact.Session{SessionID: sessionID, TimestampNS: t0, Status: artifact.StatusRunning, Config: cfg.SessionConfig("tiktoken")},
		&header, workload); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	phaseStart := t0 + int64(time.Second)
	recorded := int64(0)
	for _, cs := range cases {
		s, err := schedule.Build(schedule.Spec{Mode: schedule.Poisson, Rate: cs.Rate}, perCase, 0, seed, cs.ID+"/"+loadgen.PhaseMeasured)
		if err != nil {
			return err
		}
		last := int64(0)
		if n := len(s.Offsets); n > 0 {
			last = int64(s.Offsets[n-1])
		}
		windowEnd := phaseStart + last
		if err := w.Write(&artifact.CacheState{SessionID: sessionID, CaseID: cs.ID, Requested: loadgen.CacheUnspecified,
			Verified: "unverified", Reason: "no cache reset was configured", RunKind: "unspecified"}); err != nil {
			return err
		}
		// As in a real run, the requests come first and the phase window after the drain.
		var drained int64
		for i, off := range s.Offsets {
			req := request(rng, cfg, cs, sessionID, i, phaseStart+int64(off), r.ttftScale())
			drained = max(drained, *req.EndedAtNS)
			if err := r.writeRequest(w, rng, req); err != nil {
				return err
			}
		}
		drained = max(drained, windowEnd) + int64(time.Millisecond)
		if err := w.Write(&artifact.PhaseWindow{
			SessionID: sessionID, CaseID: cs.ID, Phase: loadgen.PhaseMeasured, ArrivalMode: string(cfg.Arrival),
			StartedAtNS: artifact.Ptr(phaseStart), WindowEndedAtNS: &windowEnd, DrainedAtNS: &drained,
			DrainTimeoutSeconds:       artifact.Ptr(cfg.DrainTimeout.Seconds()),
			AbandonedRequests:         &artifact.AbandonedRequests{},
			ScheduledArrivals:         artifact.Ptr(int64(len(s.Offsets))),
			ScheduledEndpointOffsetNS: artifact.Ptr(int64(*s.EndpointOffset)),
			PromptsDigest:             artifact.Ptr(hexDigest(cs.ID + "/prompts")),
			ClientHealth: &artifact.ClientHealth{CPUUserSeconds: artifact.Ptr(0.8), CPUSystemSeconds: artifact.Ptr(0.2), CPUs: 2,
				GCCycles: 4, GCPauseSeconds: 0.003, ReceiveReads: 1200, ReceiveStampedReads: 1194},
		}); err != nil {
			return err
		}
		recorded += int64(len(s.Offsets))
		phaseStart = drained + int64(time.Second)
	}
	end := phaseStart
	return writeAll(w, &artifact.Session{
		SessionID: sessionID, TimestampNS: end, Status: artifact.StatusCompleted,
		Summary: &artifact.SessionSummary{
			SessionID: sessionID, Source: artifact.ProducerProfile, Host: host.Name, PID: 4242,
			StartedAtNS: t0, EndedAtNS: end, DurationSeconds: float64(end-t0) / 1e9,
			Status: artifact.StatusCompleted, RequestsRecorded: recorded,
		},
	})
}

func writeAll(w artifact.Sink, recs ...artifact.Record) error {
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

func hexDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// request draws one measured request intended at intended (Unix ns).
func request(rng *rand.Rand, cfg *loadgen.Config, cs loadgen.Case, sessionID string, i int, intended int64, scale float64) *artifact.Request {
	id := fmt.Sprintf("%s_%s_0_%d", cs.ID, loadgen.PhaseMeasured, i)
	digest := hexDigest(id)
	r := &artifact.Request{
		SessionID: sessionID, RequestID: id, CaseID: cs.ID, Phase: loadgen.PhaseMeasured,
		Endpoint: cfg.Endpoint, Model: cfg.Model,
		MaxInFlight:       artifact.Ptr(int64(cfg.MaxInFlight)),
		TargetInputTokens: int64(cs.InputTokens), TargetOutputTokens: int64(cs.OutputTokens),
		Stream: true, ArrivalMode: string(cfg.Arrival), RequestIndex: artifact.Ptr(int64(i)),
		IntendedAtNS: artifact.Ptr(intended), PromptMode: string(cfg.PromptMode),
		PromptID: artifact.Ptr("p" + digest[:16]), PromptDigest: artifact.Ptr(digest),
		PromptTokens: artifact.Ptr(int64(cs.InputTokens)), PromptTokenSource: loadgen.SourceTiktoken,
		OutputTokenSource: loadgen.SourceUnknown, HeldForSlot: artifact.Ptr(false),
	}
	u := rng.Float64()
	if u < 0.01 { // dropped at the in-flight cap: never sent
		r.Status = artifact.RequestDropped
		r.TimestampNS, r.StartedAtNS, r.EndedAtNS = artifact.Ptr(intended), artifact.Ptr(intended), artifact.Ptr(intended)
		r.ErrorType, r.ErrorMessage = artifact.Ptr("dropped"), artifact.Ptr("every in-flight slot was busy (--overflow drop)")
		return r
	}
	lag := 0.05 + rng.ExpFloat64()*0.2 // ms
	sent := intended + int64(lag*1e6)
	inflight := int64(rng.IntN(cfg.MaxInFlight))
	r.TimestampNS, r.StartedAtNS = artifact.Ptr(sent), artifact.Ptr(sent)
	r.DispatchLagMS = artifact.Ptr(lag)
	r.InFlightAtDispatch = artifact.Ptr(inflight)
	r.XRequestID = artifact.Ptr(artifact.XRequestIDPrefix(cfg.RunID) + id)
	r.TraceID = artifact.Ptr(digest[16:48])
	switch {
	case u < 0.02: // timeout after the client timeout, mid-stream
		e2e := cfg.Timeout.Seconds() * 1000
		r.Status, r.E2ELatencyMS = artifact.RequestTimeout, artifact.Ptr(e2e)
		r.EndedAtNS = artifact.Ptr(sent + int64(e2e*1e6))
		r.ErrorType, r.ErrorMessage = artifact.Ptr("timeout"), artifact.Ptr("no response within 60s")
		return r
	case u < 0.025: // HTTP 500
		e2e := 2 + rng.Float64()*5
		r.Status, r.E2ELatencyMS, r.HTTPStatus = artifact.RequestError, artifact.Ptr(e2e), artifact.Ptr(int64(500))
		r.EndedAtNS = artifact.Ptr(sent + int64(e2e*1e6))
		r.ErrorType, r.ErrorMessage = artifact.Ptr("http_error"), artifact.Ptr(`HTTP 500: {"error":{"message":"EngineCore encountered an issue"}}`)
		return r
	}
	// ok: TTFT log-normal around 40 ms, 16 chunk gaps around 12 ms, 8 tokens per chunk
	ttft := 40 * math.Exp(0.5*rng.NormFloat64()) * scale
	gaps := make([]float64, 16)
	sum := 0.0
	for k := range gaps {
		gaps[k] = math.Round(12*math.Exp(0.3*rng.NormFloat64())*1e6) / 1e6
		sum += gaps[k]
	}
	e2e := ttft + sum + 0.2
	first := ttft - 0.3*rng.Float64()
	r.Status = artifact.RequestOK
	r.TTFTMS, r.FirstChunkLatencyMS = artifact.Ptr(math.Round(ttft*1e6)/1e6), artifact.Ptr(math.Round(first*1e6)/1e6)
	r.E2ELatencyMS = artifact.Ptr(math.Round(e2e*1e6) / 1e6)
	r.EndedAtNS = artifact.Ptr(sent + int64(e2e*1e6))
	r.ChunkInterarrivalMS = gaps
	out := int64(cs.OutputTokens) - int64(rng.IntN(8))
	prompt := int64(cs.InputTokens) + 9
	r.PromptTokens, r.PromptTokenSource, r.PromptTokenExact = artifact.Ptr(prompt), loadgen.SourceServerUsage, true
	r.OutputTokens, r.OutputTokenSource, r.OutputTokenExact = artifact.Ptr(out), loadgen.SourceServerUsage, true
	r.TotalTokens = artifact.Ptr(prompt + out)
	r.FinishReason = artifact.Ptr("length")
	return r
}

// writeRequest writes req, with its RequestSent before it and its spans after it when the run
// asks for them.
func (r Run) writeRequest(w artifact.Sink, rng *rand.Rand, req *artifact.Request) error {
	sent := req.XRequestID != nil
	if r.Sent && sent {
		if err := w.Write(&artifact.RequestSent{SessionID: req.SessionID, CaseID: req.CaseID, Phase: req.Phase,
			XRequestID: *req.XRequestID, TraceID: *req.TraceID, SentAtNS: *req.StartedAtNS}); err != nil {
			return err
		}
	}
	if err := w.Write(req); err != nil {
		return err
	}
	if !r.Spans || !sent {
		return nil
	}
	n := 1
	if *req.RequestIndex%10 == 3 {
		n = 2
	}
	for k := 0; k < n; k++ {
		if err := w.Write(span(rng, req, k)); err != nil {
			return err
		}
	}
	return nil
}

// span is the k-th llm_request span of a sent request: queue, prefill and decode times that
// add up to the server's e2e, a little under the client's.
func span(rng *rand.Rand, req *artifact.Request, k int) *artifact.Span {
	e2eMs := *req.E2ELatencyMS - 0.5
	queue := 0.2 + rng.Float64()
	prefill := 5 + 5*rng.Float64()
	decode := max(e2eMs-queue-prefill, 0)
	ttft := queue + prefill
	start := *req.StartedAtNS + int64(250*time.Microsecond)
	end := start + int64(e2eMs*1e6)
	trace := *req.TraceID
	id := hexDigest(fmt.Sprintf("%s/%d", *req.XRequestID, k))[:16]
	return &artifact.Span{
		SessionID: req.SessionID, RunID: RunID, Source: artifact.SpanSourceGRPC, Name: artifact.RequestSpanName,
		ClockDomain: "vllm-host/unix_epoch_ns", ReceivedAtNS: artifact.Ptr(end + int64(5*time.Second)), TimestampNS: &start,
		TraceID: &trace, SpanID: &id, Kind: artifact.Ptr("SERVER"), StartUnixNS: &start, EndUnixNS: &end,
		Attributes: map[string]any{
			artifact.AttrRequestID:          "chatcmpl-" + *req.XRequestID,
			artifact.AttrTimeInQueue:        round(queue / 1000),
			artifact.AttrTimeInModelPrefill: round(prefill / 1000),
			artifact.AttrTimeInModelDecode:  round(decode / 1000),
			artifact.AttrTimeToFirstToken:   round(ttft / 1000),
			artifact.AttrE2E:                round(e2eMs / 1000),
			artifact.AttrPromptTokens:       int64(req.TargetInputTokens) + 9,
		},
		Resource: map[string]any{"service.name": "vllm", "host.name": "vllm-host"},
		Scope:    map[string]any{"name": "vllm.llm_engine"},
		Status:   &artifact.SpanStatus{Code: "UNSET"},
	}
}

// round keeps 9 significant decimals, so that the values read back exactly.
func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }
