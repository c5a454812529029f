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

// handleChat serves POST /v1/chat/completions: it reads, validates and names the request,
// refuses it while the engines restart or when a fault says so, submits it to an engine,
// holds the headers back for the slow-headers fault, then answers it streamed or whole.
// Whatever the path, settle accounts for it when the handler returns.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	o := &chatOutcome{}
	if s.gt != nil {
		o.rec = &GroundTruth{}
	}
	defer s.settle(o)

	req, aerr := s.readChatRequest(w, r)
	id := s.chatRequestID(r, req)
	if o.rec != nil {
		o.rec.RequestID, o.rec.ResponseID = id, "chatcmpl-"+id
	}
	if aerr != nil {
		o.fail(w, aerr, "invalid")
		return
	}
	if o.rec != nil {
		o.rec.Stream = req.stream
		o.rec.PromptTokens, o.rec.MaxTokens = ptr(req.promptTokens), ptr(req.maxTokens)
	}
	if s.down() {
		o.fail(w, errEngineRestarting, "rejected")
		return
	}
	plan := planRequest(&s.cfg, id, req.maxTokens, req.ignoreEOS)
	if o.rec != nil {
		o.rec.Faults = plan.faultNames()
	}
	if refuseByFault(w, o, &plan) {
		return
	}
	q := s.submitChat(r, id, req, &plan)
	o.q = q
	if plan.slowHeaders > 0 && !s.sleep(r.Context(), plan.slowHeaders) {
		q.engine.abort(q, finCancelled)
		if o.rec != nil {
			o.rec.Status = statusOf(q)
		}
		return
	}
	if req.stream {
		o.status = http.StatusOK
		s.stream(w, r, q, req, &plan, o.rec)
	} else {
		o.status = s.unary(w, r, q, req, &plan, o.rec)
	}
}

// chatOutcome is what handleChat leaves for settle: the HTTP status sent (0 while none was,
// and for a reset or a dropped connection), the sequence once submitted, and the
// ground-truth record (nil when ground truth is off).
type chatOutcome struct {
	status int
	q      *seq
	rec    *GroundTruth
}

// fail answers with e as a JSON error, recording its status and the ground-truth status.
func (o *chatOutcome) fail(w http.ResponseWriter, e *apiError, gtStatus string) {
	o.status = e.status
	if o.rec != nil {
		o.rec.Status = gtStatus
	}
	writeJSON(w, e.status, e.body())
}

// settle runs when handleChat returns, a panic that drops the connection included: a request
// that got a status line counts in http_requests_total and, with ground truth on, the record
// takes the status and the engine's account of the sequence, and is written.
func (s *Server) settle(o *chatOutcome) {
	if o.status != 0 {
		s.countHTTP("/v1/chat/completions", http.MethodPost, o.status)
	}
	if o.rec != nil {
		if o.status != 0 {
			o.rec.HTTPStatus = ptr(o.status)
		}
		if o.q != nil {
			fillFromSeq(o.rec, o.q)
		}
		s.gt.write(o.rec)
	}
}

// errEngineRestarting answers chat requests during the restart fault's downtime.
var errEngineRestarting = &apiError{status: http.StatusServiceUnavailable, typ: "ServiceUnavailableError",
	msg: "The engine is restarting; try again later."}

// readChatRequest reads the body, at most MaxBodyBytes (a larger one is a 413), and
// decodes and validates it.
func (s *Server) readChatRequest(w http.ResponseWriter, r *http.Request) (*chatRequest, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: "BadRequestError",
				msg: "request body larger than " + strconv.FormatInt(s.cfg.MaxBodyBytes, 10) + " bytes"}
		}
		return nil, badRequest("could not read the request body: %v", err)
	}
	return decodeChatRequest(body, &s.cfg)
}

// chatRequestID names a request: its X-Request-Id header, else the body's request_id (when
// the body was valid), else a generated id.
func (s *Server) chatRequestID(r *http.Request, req *chatRequest) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" && req != nil {
		id = req.bodyID
	}
	if id == "" {
		id = s.newID()
	}
	return id
}

// refuseByFault carries out a plan's refusal, reporting whether there was one: the reset
// fault closes the connection before any status line; the reject faults answer 429
// RateLimitError or 503 ServiceUnavailableError.
func refuseByFault(w http.ResponseWriter, o *chatOutcome, plan *requestPlan) bool {
	switch {
	case plan.reset:
		if o.rec != nil {
			o.rec.Status = "reset"
		}
		resetConn(w)
		return true
	case plan.reject != 0:
		typ, msg := "RateLimitError", "Too many requests: rejected by fault injection."
		if plan.reject == http.StatusServiceUnavailable {
			typ, msg = "ServiceUnavailableError", "Service unavailable: rejected by fault injection."
		}
		o.fail(w, &apiError{status: plan.reject, typ: typ, msg: msg}, "rejected")
		return true
	}
	return false
}

// submitChat makes the request's sequence from req and its plan, with the remote span
// context of its traceparent when spans are on, stamps its arrival and submits it to the
// next engine, round-robin.
func (s *Server) submitChat(r *http.Request, id string, req *chatRequest, plan *requestPlan) *seq {
	e := s.engines[(s.rr.Add(1)-1)%uint64(len(s.engines))]
	q := &seq{
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
	return q
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

var errEngineError = &apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
	msg: "The engine failed while generating (injected stream-error fault)."}

// stream writes an SSE response in vLLM's format: role event at the first token, content
// events of TokensPerChunk tokens (the last one with finish_reason), the usage event when
// stream_options.include_usage, then data: [DONE]. With continuous_usage_stats too, the
// role and content events carry usage as well: prompt_tokens, completion_tokens sent so far
// (0 in the role event, cumulative after) and their total. A client gone before the end was sent
// cancels the sequence.
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
	st := &sseStream{
		s: s, w: w, rc: rc, ctx: r.Context(), q: q, req: req, plan: plan, rec: rec,
		prefix: prefix, buf: make([]byte, 0, len(prefix)+256), stallAt: plan.stallAt,
	}
	if !st.run() {
		q.engine.abort(q, finCancelled)
	}
}

// sseStream is one streamed answer in progress, from its flushed headers on.
type sseStream struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	ctx  context.Context // the request's
	q    *seq
	req  *chatRequest
	plan *requestPlan
	rec  *GroundTruth // nil when ground truth is off

	prefix   []byte // chunkPrefix of this stream
	buf      []byte // the event being built
	sent     int    // tokens sent in content events
	events   int    // content events sent
	roleSent bool
	stallAt  int // the content event the stall fault pauses before; -1 when none (or done)
}

// sendResult is how far sendTokens got.
type sendResult uint8

const (
	sendOK      sendResult = iota // every complete event of the tokens so far was sent
	sendStalled                   // it paused for the stall fault: load the sequence again
	sendGone                      // the client went away
)

// run sends the tokens as the engine publishes them, then the end of the stream once the
// sequence finished; it reports false when the client went away before the end.
func (st *sseStream) run() bool {
	for {
		avail, fin := st.q.load()
		switch st.sendTokens(avail, fin) {
		case sendGone:
			return false
		case sendStalled:
			continue // more tokens (or the finish) may have come meanwhile
		}
		if fin != finNone {
			st.finish(avail, fin)
			return true
		}
		select {
		case <-st.q.notify:
		case <-st.ctx.Done():
			return false
		}
	}
}

// sendTokens sends the role event once the first token is there, then content events of
// TokensPerChunk tokens for the avail tokens generated so far: a shorter event only once the
// sequence finished, the last one of a stop or length finish with finish_reason. Before the
// content event the stall fault picked, it pauses for StallDuration instead.
func (st *sseStream) sendTokens(avail int, fin uint32) sendResult {
	if avail > 0 && !st.roleSent {
		st.buf = append(append(st.buf[:0], st.prefix...), roleChoice...)
		if st.req.continuousUsage {
			st.buf = withUsage(st.buf, st.q.promptLen, 0)
		}
		if !st.write(st.buf) {
			return sendGone
		}
		st.roleSent = true
	}
	n := st.s.cfg.TokensPerChunk
	final := fin == finLength || fin == finStop
	for st.sent < avail {
		k := min(n, avail-st.sent)
		if k < n && fin == finNone {
			break
		}
		if st.events == st.stallAt {
			st.stallAt = -1
			if !st.s.sleep(st.ctx, st.plan.stall) && st.ctx.Err() != nil {
				return sendGone
			}
			return sendStalled
		}
		finish := ""
		if final && st.sent+k == avail {
			finish = finishReason(fin)
		}
		st.buf = appendContentChunk(st.buf[:0], st.prefix, st.q.wordSeed, st.sent, st.sent+k, finish)
		if st.req.continuousUsage {
			st.buf = withUsage(st.buf, st.q.promptLen, st.sent+k)
		}
		if !st.write(st.buf) {
			return sendGone
		}
		st.sent += k
		st.events++
	}
	return sendOK
}

// finish sends the end of a finished stream: after stop or length, the usage event (with
// stream_options.include_usage) and data: [DONE]; after the stream-error fault, the error
// event and data: [DONE]; after truncate, restart or shutdown it drops the connection
// mid-stream instead. A failed write ends it.
func (st *sseStream) finish(avail int, fin uint32) {
	switch fin {
	case finLength, finStop:
		if st.req.includeUsage {
			st.buf = append(append(st.buf[:0], st.prefix...), "],"...)
			st.buf = appendUsage(st.buf, st.q.promptLen, avail)
			st.buf = append(st.buf, "}\n\n"...)
			if !st.write(st.buf) {
				return
			}
		}
		st.write([]byte(doneEvent))
	case finError:
		st.buf = append(append(st.buf[:0], "data: "...), errEngineError.body()...)
		st.buf = append(st.buf, "\n\n"...)
		if st.write(st.buf) {
			st.write([]byte(doneEvent))
		}
	case finTruncated, finRestart, finShutdown:
		panic(http.ErrAbortHandler) // close the connection mid-stream
	}
}

// write writes one event and flushes it, recording the write in the ground truth; false
// means the client went away.
func (st *sseStream) write(b []byte) bool {
	t0 := nowNs()
	if _, err := st.w.Write(b); err != nil {
		return false
	}
	if err := st.rc.Flush(); err != nil {
		return false
	}
	if st.rec != nil {
		st.rec.addChunk(t0)
	}
	return true
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
			rec.addChunk(t0)
		}
		panic(http.ErrAbortHandler)
	}
	if err := rc.Flush(); err == nil && rec != nil {
		rec.HeadersNs = ptr(nowNs())
	}
	t0 := nowNs()
	if _, err := w.Write(body); err == nil {
		if err := rc.Flush(); err == nil && rec != nil {
			rec.addChunk(t0)
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
