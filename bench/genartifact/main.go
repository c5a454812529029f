// Command genartifact writes a realistic synthetic profile artifact for the analyze
// benchmark (bench/analyze-1m.sh): the lines a Poisson open-loop `inferprobe profile` run
// writes — the running infer.session (with its config), the infer.artifact header, the
// infer.workload record (built by loadgen.Config, so its digest and seed are real), per case
// an infer.cache_state and the measured infer.phase_window, then one infer.request per
// scheduled arrival, and the final infer.session.
//
// Arrivals follow the case's real seeded schedule (schedule.Build with the stream
// caseID+"/measured"), so the phase windows, intended times and the analyser's recomputed
// schedule agree and every cohort is valid. Each request streams ~16 chunk gaps; the status
// mix is 97.5% ok, 1% timeout, 0.5% error (HTTP 500) and 1% dropped at the in-flight cap.
// Latencies, token counts and chunk gaps are drawn from a seeded PCG, so the file is the same
// for the same flags.
//
// Usage: go run ./bench/genartifact -out FILE [-requests 1000000] [-cases 2] [-seed 1]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

func main() {
	out := flag.String("out", "", "artifact path to write (required)")
	total := flag.Int("requests", 1_000_000, "measured requests in all, split evenly over the cases")
	ncases := flag.Int("cases", 2, "Poisson cases (rates 250, 500, 750, ... req/s)")
	seed := flag.Int64("seed", 1, "seed of the schedule, prompts and drawn latencies")
	flag.Parse()
	if *out == "" || *ncases < 1 || *total < *ncases {
		flag.Usage()
		os.Exit(2)
	}
	if err := generate(*out, *total, *ncases, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genartifact:", err)
		os.Exit(1)
	}
}

func generate(path string, total, ncases int, seed int64) error {
	perCase := total / ncases
	rates := make([]float64, ncases)
	for i := range rates {
		rates[i] = 250 * float64(i+1)
	}
	cfg := &loadgen.Config{
		Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "Qwen/Qwen2.5-0.5B-Instruct", RunID: "bench-run",
		Timeout: 60 * time.Second, Stream: true, StreamUsage: true, Seed: seed,
		InputTokens: []int{512}, OutputTokens: []int{128}, Requests: perCase,
		Arrival: schedule.Poisson, Rates: rates, MaxInFlight: 256, Overflow: loadgen.OverflowDrop,
		PromptMode: prompt.Unique,
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cases, err := cfg.Cases()
	if err != nil {
		return err
	}
	w, err := artifact.NewWriter(path)
	if err != nil {
		return err
	}
	if err := write(w, cfg, cases, perCase, seed); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// write writes the whole artifact to w.
func write(w *artifact.Writer, cfg *loadgen.Config, cases []loadgen.Case, perCase int, seed int64) error {
	sessionID := "bench-session-0001"
	host := artifact.Host{Name: "bench-host"}
	t0 := int64(1_760_000_000_000_000_000) // a fixed wall-clock start, Unix ns
	workload, err := cfg.WorkloadRecord(sessionID, nil)
	if err != nil {
		return err
	}
	header := artifact.NewArtifactHeader(cfg.RunID, sessionID, "bench", t0, host, 4242)
	if err := writeAll(w,
		&artifact.Session{SessionID: sessionID, TimestampNS: t0, Status: artifact.StatusRunning, Config: cfg.SessionConfig("tiktoken")},
		header, workload); err != nil {
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
			r := request(rng, cfg, cs, sessionID, i, phaseStart+int64(off))
			drained = max(drained, *r.EndedAtNS)
			if err := w.Write(r); err != nil {
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

func writeAll(w *artifact.Writer, recs ...artifact.Record) error {
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
func request(rng *rand.Rand, cfg *loadgen.Config, cs loadgen.Case, sessionID string, i int, intended int64) *artifact.Request {
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
	ttft := 40 * math.Exp(0.5*rng.NormFloat64())
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
