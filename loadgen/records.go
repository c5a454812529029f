package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// Token count sources recorded on infer.request (the contract's "Token accounting").
const (
	SourceServerUsage = artifact.TokenSourceServerUsage
	SourceTiktoken    = "tiktoken"
	SourceEstimated   = "estimated"
	SourceUnknown     = "unknown"
)

func ns(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	return artifact.Ptr(t.UnixNano())
}

func msPtr(from, to time.Time) *float64 {
	if from.IsZero() || to.IsZero() {
		return nil
	}
	return artifact.Ptr(ms(to.Sub(from)))
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// tokenSource names a tokenizer as a token-count source.
func tokenSource(tok prompt.Tokenizer) string {
	if tok == nil {
		return SourceUnknown
	}
	if tok.Exact() {
		return SourceTiktoken
	}
	return SourceEstimated
}

// baseRecord fills the fields every infer.request of the phase shares, and the attempt's
// arrival fields.
func (p *phase) baseRecord(a *attempt) *artifact.Request {
	cfg := p.r.cfg
	rec := &artifact.Request{
		SessionID:          p.r.sessionID,
		RequestID:          p.requestID(a),
		CaseID:             p.cs.ID,
		Phase:              p.name,
		Endpoint:           p.r.endpoint,
		Model:              cfg.Model,
		TargetInputTokens:  int64(p.cs.InputTokens),
		TargetOutputTokens: int64(p.cs.OutputTokens),
		Stream:             cfg.Stream,
		ArrivalMode:        string(cfg.Arrival),
		RequestIndex:       artifact.Ptr(int64(a.idx)),
		IntendedAtNS:       ns(a.intended),
		PromptMode:         string(cfg.PromptMode),
		PromptID:           strPtr(a.prompt.ID),
		PromptDigest:       strPtr(a.prompt.Digest),
		PromptTokenSource:  tokenSource(p.r.tok),
		OutputTokenSource:  SourceUnknown,
		Shard:              cfg.shardPtr(),
	}
	if cfg.OpenLoop() {
		rec.MaxInFlight = artifact.Ptr(int64(cfg.MaxInFlight))
		rec.HeldForSlot = artifact.Ptr(a.held)
	} else {
		rec.Concurrency = artifact.Ptr(int64(p.cs.Concurrency))
		rec.HeldForSlot = artifact.Ptr(false)
	}
	if a.prompt.PrefixGroup != nil {
		rec.PrefixGroup = artifact.Ptr(int64(*a.prompt.PrefixGroup))
	}
	if a.prompt.SharedPrefixTokens != nil {
		rec.SharedPrefixTokens = artifact.Ptr(int64(*a.prompt.SharedPrefixTokens))
	}
	if a.prompt.Digest != "" {
		rec.PromptTokens = artifact.Ptr(int64(a.prompt.Tokens)) // planned; replaced by usage
		rec.PromptTokenExact = false
	}
	return rec
}

// droppedRecord is an arrival never sent: no x_request_id, no latencies, the planned
// prompt length marked not exact.
func (p *phase) droppedRecord(a *attempt, why string, at time.Time) *artifact.Request {
	rec := p.baseRecord(a)
	rec.Status = artifact.RequestDropped
	rec.TimestampNS, rec.StartedAtNS, rec.EndedAtNS = ns(at), ns(at), ns(at)
	rec.DispatchLagMS = nil
	rec.ErrorType = artifact.Ptr("dropped")
	rec.ErrorMessage = artifact.Ptr(why)
	return rec
}

// cancelledRecord is a request still running at the drain deadline: sent, so it carries its
// x_request_id and send time, but no latencies (inferprobe stopped waiting; the call itself
// runs on until it finishes or times out).
func (p *phase) cancelledRecord(a *attempt, at time.Time) *artifact.Request {
	rec := p.baseRecord(a)
	rec.Status = artifact.RequestCancelled
	sent := a.sentAt()
	rec.TimestampNS, rec.StartedAtNS, rec.EndedAtNS = ns(sent), ns(sent), ns(at)
	rec.DispatchLagMS = msPtr(a.intended, sent)
	rec.InFlightAtDispatch = artifact.Ptr(int64(a.inFlight))
	rec.XRequestID = strPtr(a.xReqID)
	rec.TraceID = strPtr(a.traceID)
	rec.ErrorType = artifact.Ptr("cancelled")
	rec.ErrorMessage = artifact.Ptr("still running at the drain deadline")
	return rec
}

// resultRecord turns a finished call into its infer.request record.
func (p *phase) resultRecord(a *attempt, res *client.Result) *artifact.Request {
	rec := p.baseRecord(a)
	rec.Status = string(res.Outcome)
	rec.TimestampNS, rec.StartedAtNS, rec.EndedAtNS = ns(res.Start), ns(res.Start), ns(res.End)
	rec.DispatchLagMS = msPtr(a.intended, res.Start)
	rec.InFlightAtDispatch = artifact.Ptr(int64(a.inFlight))
	rec.XRequestID = strPtr(a.xReqID)
	rec.TraceID = strPtr(a.traceID)
	if res.HTTPStatus != 0 {
		rec.HTTPStatus = artifact.Ptr(int64(res.HTTPStatus))
	}
	rec.ErrorType = strPtr(res.ErrorType)
	rec.ErrorMessage = strPtr(res.ErrorMessage)
	rec.ServerErrorType = strPtr(res.ServerErrorType)
	rec.ServerErrorCode = strPtr(res.ServerErrorCode)
	rec.FinishReason = strPtr(res.FinishReason)
	switch res.Outcome {
	case client.OK:
		rec.E2ELatencyMS = msPtr(res.Start, res.End)
	case client.Cancelled:
		// cancelled: no latency (Ctrl+C stopped the wait)
	default:
		// a failure's e2e is how long it ran before it failed
		rec.E2ELatencyMS = msPtr(res.Start, res.End)
	}
	rec.TTFTMS = msPtr(res.Start, res.FirstToken)
	rec.FirstChunkLatencyMS = msPtr(res.Start, res.FirstChunk)
	if !res.FirstAnswer.IsZero() && !res.FirstAnswer.Equal(res.FirstToken) {
		rec.FirstAnswerMS = msPtr(res.Start, res.FirstAnswer)
	}
	if n := len(res.TokenChunks); n > 1 {
		gaps := make([]float64, n-1)
		for i := 1; i < n; i++ {
			gaps[i-1] = ms(res.TokenChunks[i].Sub(res.TokenChunks[i-1]))
		}
		rec.ChunkInterarrivalMS = gaps
	}
	p.countTokens(rec, res)
	return rec
}

// countTokens fills prompt/output/total tokens: server usage first, else the tokenizer's
// count of what was sent and received, with the source and exactness of each.
func (p *phase) countTokens(rec *artifact.Request, res *client.Result) {
	if u := res.Usage; u != nil {
		rec.PromptTokens = artifact.Ptr(u.PromptTokens)
		rec.PromptTokenSource, rec.PromptTokenExact = SourceServerUsage, true
		rec.OutputTokens = artifact.Ptr(u.CompletionTokens)
		rec.OutputTokenSource, rec.OutputTokenExact = SourceServerUsage, true
		total := u.TotalTokens
		if total == 0 {
			total = u.PromptTokens + u.CompletionTokens
		}
		rec.TotalTokens = artifact.Ptr(total)
		return
	}
	// The prompt was sized by the tokenizer when it was built: its count stands.
	rec.PromptTokenSource = tokenSource(p.r.tok)
	rec.PromptTokenExact = false // the server's chat template adds tokens we cannot count
	if res.Outcome != client.OK || p.r.tok == nil {
		return
	}
	if res.TextTruncated {
		rec.OutputTokenSource = SourceUnknown
		return
	}
	n := int64(p.r.tok.Count(res.Text))
	rec.OutputTokens = artifact.Ptr(n)
	rec.OutputTokenSource, rec.OutputTokenExact = tokenSource(p.r.tok), false
	if rec.PromptTokens != nil {
		rec.TotalTokens = artifact.Ptr(*rec.PromptTokens + n)
	}
}

// sentAt is when the attempt was sent, as recorded by send (the intended time until then).
func (a *attempt) sentAt() time.Time {
	if ns := a.sentNS.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return a.intended
}

// windowRecord is the phase's infer.phase_window.
func (p *phase) windowRecord(s *schedule.Schedule, windowEnd, drained time.Time, ab abandonedWait) *artifact.PhaseWindow {
	cfg := p.r.cfg
	w := &artifact.PhaseWindow{
		SessionID:           p.r.sessionID,
		CaseID:              p.cs.ID,
		Phase:               p.name,
		ArrivalMode:         string(cfg.Arrival),
		StartedAtNS:         ns(p.start),
		WindowEndedAtNS:     ns(windowEnd),
		DrainedAtNS:         ns(drained),
		DrainTimeoutSeconds: artifact.Ptr(cfg.DrainTimeout.Seconds()),
		AbandonedRequests: &artifact.AbandonedRequests{
			RunningAtStart: ab.runningAtStart,
			WaitedSeconds:  ab.waited.Seconds(),
			StillRunning:   ab.stillRunning,
		},
	}
	if s != nil {
		w.ScheduledArrivals = artifact.Ptr(int64(cfg.ownedCount(0, len(s.Offsets))))
		if s.EndpointOffset != nil {
			w.ScheduledEndpointOffsetNS = artifact.Ptr(int64(*s.EndpointOffset))
		}
	}
	// prompts_digest: every scheduled arrival's prompt in schedule order (dropped included);
	// a closed loop covers the prompts actually sent, in request-index order.
	// A shard covers the indexes it owns, in increasing order.
	p.mu.Lock()
	digests := p.phaseDigests(s)
	p.mu.Unlock()
	w.PromptsDigest = artifact.Ptr(prompt.PhaseDigest(digests))
	return w
}

// phaseDigests lists the prompt digests prompts_digest covers, in request-index order: an
// open loop's every owned scheduled arrival, a closed loop's every request sent. p.mu is held.
func (p *phase) phaseDigests(s *schedule.Schedule) []string {
	cfg := p.r.cfg
	if s == nil {
		idx := make([]int, 0, len(p.digests))
		for i := range p.digests {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		digests := make([]string, 0, len(idx))
		for _, i := range idx {
			digests = append(digests, p.digests[i])
		}
		return digests
	}
	digests := make([]string, 0, cfg.ownedCount(0, len(s.Offsets)))
	for i := range s.Offsets {
		if !cfg.Owns(0, i) {
			continue
		}
		d, ok := p.digests[i]
		if !ok {
			d = p.gen.Prompt(i).Digest // scheduled but never reached (cannot happen once drained)
		}
		digests = append(digests, d)
	}
	return digests
}

// cacheState POSTs the reset URL (when configured) and writes the case's infer.cache_state.
func (r *Runner) cacheState(ctx context.Context, cs Case) error {
	cfg := r.cfg
	rec := &artifact.CacheState{
		SessionID: r.sessionID,
		CaseID:    cs.ID,
		Requested: cfg.CacheState,
		Verified:  "unverified",
		Reason:    "nothing reset the cache",
	}
	failed := false
	if cfg.CacheResetURL != "" {
		hc := &http.Client{
			Transport:     &http.Transport{Proxy: nil},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		res := resetCache(ctx, r.clock, hc, cfg.CacheResetURL, cfg.APIKey, cfg.CacheResetTimeout, cfg.Timeout)
		hc.CloseIdleConnections()
		rec.Attempted = true
		rec.Acknowledged = res.Answer == ResetAcknowledged
		rec.Reason = res.describe()
		reset := &artifact.CacheReset{
			URL:      artifact.RedactURL(cfg.CacheResetURL),
			AtNS:     ns(res.At),
			Answer:   res.Answer,
			Attempts: int64(res.Attempts),
			Error:    strPtr(res.Err),
		}
		if res.Status != 0 {
			reset.Status = artifact.Ptr(int64(res.Status))
			reset.AnsweredAtNS = ns(res.AnsweredAt)
		}
		if res.Success != nil {
			reset.Success, _ = json.Marshal(*res.Success)
		}
		rec.Reset = reset
		failed = res.failed()
		if failed && r.hooks.Warn != nil {
			r.hooks.Warn("cache reset failed before " + cs.ID + " (" + res.describe() + "); the case is not a cold start")
		}
	}
	switch {
	case cfg.WarmupRequests > 0:
		rec.RunKind = RunSteadyState
	case cfg.CacheState == CacheCold && !failed:
		rec.RunKind = RunColdStart
	default:
		rec.RunKind = RunUnspecified
	}
	return r.sink.Write(rec)
}
