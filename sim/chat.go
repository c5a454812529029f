package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/propagation"
)

func jsonString(s string) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var rec *GroundTruth
	status := 0
	var q *seq
	if s.gt != nil {
		rec = &GroundTruth{}
	}
	defer func() {
		if status != 0 {
			s.countHTTP("/v1/chat/completions", http.MethodPost, status)
		}
		if rec != nil {
			if status != 0 {
				rec.HTTPStatus = ptr(status)
			}
			if q != nil {
				fillFromSeq(rec, q)
			}
			s.gt.write(rec)
		}
	}()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var req *chatRequest
	var aerr *apiError
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			aerr = &apiError{status: http.StatusRequestEntityTooLarge, typ: "BadRequestError",
				msg: "request body larger than " + strconv.FormatInt(s.cfg.MaxBodyBytes, 10) + " bytes"}
		} else {
			aerr = badRequest("could not read the request body: %v", err)
		}
	} else {
		req, aerr = decodeChatRequest(body, &s.cfg)
	}
	id := r.Header.Get("X-Request-Id")
	if id == "" && req != nil {
		id = req.bodyID
	}
	if id == "" {
		id = s.newID()
	}
	if rec != nil {
		rec.RequestID, rec.ResponseID = id, "chatcmpl-"+id
	}
	if aerr != nil {
		status = aerr.status
		if rec != nil {
			rec.Status = "invalid"
		}
		writeJSON(w, status, aerr.body())
		return
	}
	if rec != nil {
		rec.Stream = req.stream
		rec.PromptTokens, rec.MaxTokens = ptr(req.promptTokens), ptr(req.maxTokens)
	}
	if s.down() {
		status = http.StatusServiceUnavailable
		if rec != nil {
			rec.Status = "rejected"
		}
		writeJSON(w, status, (&apiError{status: status, typ: "ServiceUnavailableError", msg: "The engine is restarting; try again later."}).body())
		return
	}

	plan := planRequest(&s.cfg, id, req.maxTokens, req.ignoreEOS)
	if rec != nil {
		rec.Faults = plan.faultNames()
	}
	if plan.reset {
		if rec != nil {
			rec.Status = "reset"
		}
		resetConn(w)
		return
	}
	if plan.reject != 0 {
		status = plan.reject
		if rec != nil {
			rec.Status = "rejected"
		}
		typ, msg := "RateLimitError", "Too many requests: rejected by fault injection."
		if status == http.StatusServiceUnavailable {
			typ, msg = "ServiceUnavailableError", "Service unavailable: rejected by fault injection."
		}
		writeJSON(w, status, (&apiError{status: status, typ: typ, msg: msg}).body())
		return
	}

	e := s.engines[(s.rr.Add(1)-1)%uint64(len(s.engines))]
	q = &seq{
		id:         id,
		engine:     e,
		promptLen:  req.promptTokens,
		maxTokens:  req.maxTokens,
		target:     plan.target,
		targetFin:  plan.targetFin,
		errorAt:    plan.errorAt,
		truncateAt: plan.truncateAt,
		hashes:     req.hashes,
		wordSeed:   plan.wordSeed,
		temp:       req.temperature,
		topP:       req.topP,
		notify:     make(chan struct{}, 1),
	}
	if s.tracer != nil {
		q.parent = s.prop.Extract(context.Background(), propagation.HeaderCarrier(r.Header))
	}
	q.arrivalNs = nowNs()
	e.submit(q)

	ctx := r.Context()
	if plan.slowHeaders > 0 && !s.sleep(ctx, plan.slowHeaders) {
		e.abort(q, finCancelled)
		if rec != nil {
			rec.Status = statusOf(q)
		}
		return
	}
	if req.stream {
		status = http.StatusOK
		s.stream(w, r, q, req, &plan, rec)
	} else {
		status = s.unary(w, r, q, req, &plan, rec)
	}
}

// statusOf maps a finished sequence to its GroundTruth status.
func statusOf(q *seq) string {
	_, fin := q.load()
	switch fin {
	case finLength, finStop:
		return "ok"
	case finError:
		return "error"
	case finTruncated:
		return "truncated"
	case finCancelled:
		return "cancelled"
	case finRestart:
		return "restart"
	case finShutdown:
		return "shutdown"
	}
	return "cancelled"
}

// fillFromSeq copies the engine's account of a finished sequence into rec.
func fillFromSeq(rec *GroundTruth, q *seq) {
	_, fin := q.load()
	if fin == finNone {
		return // cannot happen: every path ends the sequence before returning
	}
	rec.Status = statusOf(q)
	e := q.engine
	e.mu.Lock() // orders these reads after an abort made by another goroutine
	defer e.mu.Unlock()
	rec.Engine = ptr(e.label)
	rec.ArrivalNs = ptr(q.arrivalNs)
	rec.FinishedNs = ptr(q.finishNs)
	rec.CompletionTokens = ptr(q.generated)
	rec.Preemptions = ptr(q.preemptions)
	if r := finishReason(fin); r != "" && r != "error" {
		rec.FinishReason = ptr(r)
	} else if fin == finError {
		rec.FinishReason = ptr("error")
	}
	if q.admitted {
		rec.ScheduledNs = ptr(q.scheduledNs)
		rec.CachedTokens = ptr(q.cachedTokens)
	}
	if q.generated > 0 {
		rec.FirstTokenNs = ptr(q.firstTokenNs)
		rec.LastTokenNs = ptr(q.lastTokenNs)
	}
}

// faultNames lists the faults of a plan, for the ground truth.
func (p *requestPlan) faultNames() []string {
	var out []string
	switch {
	case p.reset:
		out = append(out, "reset")
	case p.reject == 429:
		out = append(out, "reject_429")
	case p.reject == 503:
		out = append(out, "reject_503")
	}
	if p.slowHeaders > 0 {
		out = append(out, "slow_headers")
	}
	if p.errorAt > 0 {
		out = append(out, "stream_error")
	}
	if p.truncateAt > 0 {
		out = append(out, "truncate")
	}
	if p.stallAt >= 0 {
		out = append(out, "stall")
	}
	return out
}

// chunkPrefix is the constant head of every chunk of one stream, up to "choices":[.
func chunkPrefix(id string, created int64, model string) []byte {
	ids, _ := jsonString("chatcmpl-" + id)
	ms, _ := jsonString(model)
	b := make([]byte, 0, 128+len(ids)+len(ms))
	b = append(b, `data: {"id":`...)
	b = append(b, ids...)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = append(b, ms...)
	b = append(b, `,"choices":[`...)
	return b
}

const (
	roleChoice  = `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	doneEvent   = "data: [DONE]\n\n"
	contentHead = `{"index":0,"delta":{"content":"`
	contentTail = `"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
)

// appendContentChunk appends one content event with tokens [from, to); a non-empty finish
// closes the choice with finish_reason, carrying the last tokens as vLLM does.
func appendContentChunk(b, prefix []byte, wordSeed uint64, from, to int, finish string) []byte {
	b = append(b, prefix...)
	b = append(b, contentHead...)
	b = appendTokens(b, wordSeed, from, to)
	if finish == "" {
		return append(b, contentTail...)
	}
	b = append(b, `"},"logprobs":null,"finish_reason":"`...)
	b = append(b, finish...)
	return append(b, `","stop_reason":null}]}`+"\n\n"...)
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return append(b, '}')
}

var errEngineError = &apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
	msg: "The engine failed while generating (injected stream-error fault)."}

// stream writes an SSE response in vLLM's format: role event at the first token, content
// events of TokensPerChunk tokens (the last one with finish_reason), the usage event when
// stream_options.include_usage, then data: [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, q *seq, req *chatRequest, plan *requestPlan, rec *GroundTruth) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		q.engine.abort(q, finCancelled)
		return
	}
	if rec != nil {
		rec.HeadersNs = ptr(nowNs())
	}
	prefix := chunkPrefix(q.id, q.arrivalNs/1e9, s.cfg.Model)
	buf := make([]byte, 0, len(prefix)+256)
	write := func(b []byte) bool {
		t0 := nowNs()
		if _, err := w.Write(b); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		if rec != nil {
			rec.ChunkStartNs = append(rec.ChunkStartNs, t0)
			rec.ChunkNs = append(rec.ChunkNs, nowNs())
		}
		return true
	}
	gone := func() {
		q.engine.abort(q, finCancelled)
	}
	ctx := r.Context()
	n := s.cfg.TokensPerChunk
	stallAt := plan.stallAt
	sent, events, roleSent := 0, 0, false
	for {
		avail, fin := q.load()
		if avail > 0 && !roleSent {
			if !write(append(append(buf[:0], prefix...), roleChoice...)) {
				gone()
				return
			}
			roleSent = true
		}
		final := fin == finLength || fin == finStop
		stalled := false
		for sent < avail {
			k := min(n, avail-sent)
			if k < n && fin == finNone {
				break
			}
			if events == stallAt {
				stallAt = -1
				if !s.sleep(ctx, plan.stall) && ctx.Err() != nil {
					gone()
					return
				}
				stalled = true // reload: more tokens (or the finish) may have come meanwhile
				break
			}
			finish := ""
			if final && sent+k == avail {
				finish = finishReason(fin)
			}
			buf = appendContentChunk(buf[:0], prefix, q.wordSeed, sent, sent+k, finish)
			if !write(buf) {
				gone()
				return
			}
			sent += k
			events++
		}
		if stalled {
			continue
		}
		if fin != finNone {
			switch fin {
			case finLength, finStop:
				if req.includeUsage {
					buf = append(append(buf[:0], prefix...), "],"...)
					buf = appendUsage(buf, q.promptLen, avail)
					buf = append(buf, "}\n\n"...)
					if !write(buf) {
						return
					}
				}
				write([]byte(doneEvent))
			case finError:
				buf = append(append(buf[:0], "data: "...), errEngineError.body()...)
				buf = append(buf, "\n\n"...)
				if write(buf) {
					write([]byte(doneEvent))
				}
			case finTruncated, finRestart, finShutdown:
				panic(http.ErrAbortHandler) // close the connection mid-stream
			}
			return
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			gone()
			return
		}
	}
}

// unary waits for the whole completion and writes one chat.completion body (or the error),
// returning the HTTP status sent (0 when the connection was closed instead).
func (s *Server) unary(w http.ResponseWriter, r *http.Request, q *seq, req *chatRequest, plan *requestPlan, rec *GroundTruth) int {
	ctx := r.Context()
	for {
		if _, fin := q.load(); fin != finNone {
			break
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			q.engine.abort(q, finCancelled)
			panic(http.ErrAbortHandler)
		}
	}
	if plan.stallAt >= 0 && !s.sleep(ctx, plan.stall) {
		panic(http.ErrAbortHandler)
	}
	avail, fin := q.load()
	var body []byte
	status := http.StatusOK
	switch fin {
	case finLength, finStop, finTruncated:
		body = s.completionBody(q, avail, fin)
	case finError:
		status = http.StatusInternalServerError
		body = errEngineError.body()
	default: // cancelled, restart, shutdown: drop the connection
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	if fin == finTruncated {
		t0 := nowNs()
		_, _ = w.Write(body[:len(body)/2])
		_ = rc.Flush()
		if rec != nil {
			rec.HeadersNs = ptr(nowNs())
			rec.ChunkStartNs = append(rec.ChunkStartNs, t0)
			rec.ChunkNs = append(rec.ChunkNs, nowNs())
		}
		panic(http.ErrAbortHandler)
	}
	if err := rc.Flush(); err == nil && rec != nil {
		rec.HeadersNs = ptr(nowNs())
	}
	t0 := nowNs()
	if _, err := w.Write(body); err == nil {
		if err := rc.Flush(); err == nil && rec != nil {
			rec.ChunkStartNs = append(rec.ChunkStartNs, t0)
			rec.ChunkNs = append(rec.ChunkNs, nowNs())
		}
	}
	return status
}

// completionBody renders a non-streamed chat.completion as vLLM does.
func (s *Server) completionBody(q *seq, tokens int, fin uint32) []byte {
	ids, _ := jsonString("chatcmpl-" + q.id)
	ms, _ := jsonString(s.cfg.Model)
	reason := finishReason(fin)
	b := make([]byte, 0, 512+8*tokens)
	b = append(b, `{"id":`...)
	b = append(b, ids...)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, q.arrivalNs/1e9, 10)
	b = append(b, `,"model":`...)
	b = append(b, ms...)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	b = appendTokens(b, q.wordSeed, 0, tokens)
	b = append(b, `","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":`...)
	if reason == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, reason...)
		b = append(b, '"')
	}
	b = append(b, `,"stop_reason":null}],"service_tier":null,"system_fingerprint":null,`...)
	b = appendUsage(b, q.promptLen, tokens)
	return append(b, `,"prompt_logprobs":null,"kv_transfer_params":null}`...)
}
