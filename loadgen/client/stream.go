package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/loadgen/sse"
)

// readAnswer reads a 2xx answer as an SSE stream or a JSON body.
//
// arrived maps a read's time.Now() to the data's arrival time (tracer.arrived).
func (c *Client) readAnswer(parent, callCtx context.Context, cancel context.CancelFunc, timeout time.Duration, stream bool, resp *http.Response, r *Result, arrived func(time.Time) (time.Time, bool)) {
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		r.fail(Error, ErrTypeEncoding, "the server sent a "+boundMessage(ce)+"-encoded body although none was asked for")
		return
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		stream = true
	case "application/json":
		stream = false
	}
	s := c.getStream()
	defer c.putStream(s)
	s.arrived = arrived
	s.contentType = resp.Header.Get("Content-Type")
	onReadErr := func(err error) { classifyReadErr(parent, callCtx, timeout, err, r) }
	if stream {
		s.readStream(callCtx, resp.Body, r, cancel, onReadErr)
	} else {
		s.readJSON(resp.Body, r, onReadErr)
	}
}

// mediaType returns the lower-cased media type of a Content-Type value, without parameters
// (no allocation for the usual lower-case values).
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "text/event-stream"):
		return "text/event-stream"
	case strings.EqualFold(ct, "application/json"):
		return "application/json"
	}
	return strings.ToLower(ct)
}

// stream holds the per-call reading state; pooled.
type stream struct {
	c       *Client
	parser  *sse.Parser
	buf     []byte
	body    []byte
	w       wireChunk
	text    []byte
	res     *Result
	arrived func(time.Time) (time.Time, bool) // nil: time.Now() as read; false: no kernel stamp
	// reads and stamped count this stream's reads and those dated by a kernel receive
	// timestamp (added to the client's totals when the stream is put back).
	reads, stamped int64
	// contentType is the answer's Content-Type (named when a "stream" held no event at all).
	contentType string
	stopped     bool // [DONE] or a failure: later events are ignored
	failed      bool
	// comments is the parser's comment count when the stream stopped (used once stopped):
	// comments after [DONE] or a failure are not counted, however the reads were cut.
	comments int
	// now is the arrival time of the read being parsed; emit (s.emitAt, bound once) hands
	// each of its events to event with it, so that a read allocates no closure.
	now  time.Time
	emit func(sse.Event)
	// drain bounds the read past [DONE]: its timer cancels the call drainGrace after
	// armDrain. It is reused by the next call only when Stop caught it before it fired.
	drain      *drainTimer
	drainArmed bool
}

func (c *Client) getStream() *stream {
	if s, ok := c.states.Get().(*stream); ok {
		return s
	}
	s := &stream{c: c, parser: sse.NewParser(c.maxLine), buf: make([]byte, readBufferSize)}
	s.emit = s.emitAt
	return s
}

func (s *stream) emitAt(e sse.Event) { s.event(e, s.now) }

// drainTimer is one timer and the cancel it runs when it fires (nil: nothing to cancel).
// A timer that fired, even late, only ever sees the cancel of the call it was armed for.
type drainTimer struct {
	t      *time.Timer
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (d *drainTimer) fire() {
	d.mu.Lock()
	cancel := d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// armDrain makes cancel run after drainGrace unless disarmDrain comes first.
func (s *stream) armDrain(cancel context.CancelFunc) {
	s.drainArmed = true
	if s.drain == nil {
		d := &drainTimer{cancel: cancel}
		d.t = time.AfterFunc(drainGrace, d.fire)
		s.drain = d
		return
	}
	s.drain.mu.Lock()
	s.drain.cancel = cancel
	s.drain.mu.Unlock()
	s.drain.t.Reset(drainGrace)
}

// disarmDrain (a no-op when not armed) stops the timer. One that Stop caught never runs
// and is kept for the next call; one that has fired or is firing is dropped with its
// cancel (this call's, so at worst a finished call is cancelled: a no-op), so that a late
// fire can never cancel a later call of this pooled stream.
func (s *stream) disarmDrain() {
	if !s.drainArmed {
		return
	}
	s.drainArmed = false
	if !s.drain.t.Stop() {
		s.drain = nil
		return
	}
	s.drain.mu.Lock()
	s.drain.cancel = nil
	s.drain.mu.Unlock()
}

func (c *Client) putStream(s *stream) {
	if s.reads > 0 {
		c.reads.Add(s.reads)
		c.stamped.Add(s.stamped)
		s.reads, s.stamped = 0, 0
	}
	s.parser.Reset()
	s.w.reset()
	if cap(s.text) > 64<<10 {
		s.text = nil
	}
	if cap(s.body) > 64<<10 {
		s.body = nil
	}
	s.text, s.body = s.text[:0], s.body[:0]
	s.res, s.stopped, s.failed, s.arrived, s.contentType = nil, false, false, nil, ""
	c.states.Put(s)
}

// readStream reads an SSE body to its end, timing each read before parsing it.
func (s *stream) readStream(callCtx context.Context, body io.Reader, r *Result, cancel context.CancelFunc, onReadErr func(error)) {
	s.res = r
	r.TokenChunks = make([]time.Time, 0, 32)
	drained := 0
	defer s.disarmDrain()
	for {
		n, err := body.Read(s.buf)
		if n > 0 {
			now := time.Now()
			s.reads++
			if s.arrived != nil {
				var ok bool
				if now, ok = s.arrived(now); ok {
					s.stamped++
				}
			}
			if !s.stopped {
				s.now = now
				perr := s.parser.Feed(s.buf[:n], s.emit)
				if perr != nil && !s.stopped {
					s.failAt(now, ErrTypeLineTooLong, fmt.Sprintf("an SSE line or event exceeds %d bytes", s.c.maxLine))
					s.finish()
					return // the rest is not read: the connection is not reused
				}
			} else {
				drained += n
			}
			if s.stopped {
				if !s.drainArmed {
					s.armDrain(cancel)
				}
				if drained > drainLimit {
					s.finish()
					return
				}
			}
		}
		if err == nil {
			continue
		}
		if !s.stopped { // else [DONE] or failure already decided; EOF or a drain error changes nothing
			s.ended(callCtx, err, onReadErr)
		}
		s.finish()
		return
	}
}

// ended decides the outcome of a stream whose body ended — err is io.EOF or the read's
// error — before [DONE] or a failure: OK when finish_reason was seen (only [DONE] was lost),
// a truncated Error after a clean end without it, else as onReadErr decides.
func (s *stream) ended(callCtx context.Context, err error, onReadErr func(error)) {
	r := s.res
	r.End = time.Now()
	if err != io.EOF {
		if r.FinishReason == "" || callCtx.Err() != nil {
			onReadErr(err)
			return
		}
		// The connection failed after the answer was complete (finish_reason seen) and
		// only [DONE] was lost: OK, ending at the failure.
	} else if r.FinishReason == "" {
		msg := "the stream ended without finish_reason and without [DONE]"
		if s.parser.Pending() {
			msg += " (an unterminated event at the end was discarded)"
		}
		if r.ChunkCount == 0 && r.CommentCount == 0 && mediaType(s.contentType) != "text/event-stream" {
			// Not an event stream at all: likely a wrong URL answered by a web page or proxy.
			msg += fmt.Sprintf("; the body held no SSE event (Content-Type %q)", boundMessage(s.contentType))
		}
		r.fail(Error, ErrTypeTruncated, msg)
		return
	}
	r.Outcome = OK
}

// finish copies the accumulated state into the result.
func (s *stream) finish() {
	r := s.res
	r.CommentCount = s.parser.Comments()
	if s.stopped {
		r.CommentCount = s.comments
	}
	r.Text = string(s.text)
	if r.Outcome == "" && s.failed {
		r.Outcome = Error
	}
	if r.Outcome == OK && r.FirstToken.IsZero() {
		r.failNoContent()
	}
	if len(r.TokenChunks) == 0 {
		r.TokenChunks = nil
	}
}

// failAt fails the stream at now (Error of type typ).
func (s *stream) failAt(now time.Time, typ, msg string) {
	s.res.fail(Error, typ, msg)
	s.halt(now)
}

// failServerAt fails the stream at now with an error the server sent in it (stream_error):
// its message after prefix, its type and code.
func (s *stream) failServerAt(now time.Time, prefix string, se serverError) {
	s.res.failServer(Error, ErrTypeStreamError, prefix, se)
	s.halt(now)
}

// halt ends a failed stream at now.
func (s *stream) halt(now time.Time) {
	s.res.End = now
	s.stop()
	s.failed = true
}

// stop ends event handling: the answer is decided.
func (s *stream) stop() {
	s.stopped = true
	s.comments = s.parser.Comments()
}

var doneData = []byte("[DONE]")

// event handles one SSE event that arrived with the read that returned at now.
func (s *stream) event(e sse.Event, now time.Time) {
	if s.stopped {
		return
	}
	r := s.res
	if e.Type == "error" {
		se, _ := parseServerError(e.Data, true)
		if se.Message == "" {
			se.Message = "(no message)"
		}
		s.failServerAt(now, "error event in the stream: ", se)
		return
	}
	if bytes.Equal(e.Data, doneData) {
		r.SawDone = true
		r.End = now
		r.Outcome = OK
		s.stop()
		return
	}
	if len(bytes.TrimSpace(e.Data)) == 0 {
		return // an empty data event carries nothing; not a chunk
	}
	r.ChunkCount++
	if r.FirstChunk.IsZero() {
		r.FirstChunk = now
	}
	s.w.reset()
	if err := decodeChunk(e.Data, &s.w); err != nil {
		s.failAt(now, ErrTypeInvalidJSON, "a data event is not valid JSON: "+err.Error())
		return
	}
	if s.w.isError() {
		se, _ := parseServerError(e.Data, false)
		s.failServerAt(now, "error object in the stream: ", se)
		return
	}
	answer, token := s.choices(true)
	if token {
		r.TokenChunks = append(r.TokenChunks, now)
		if r.FirstToken.IsZero() {
			r.FirstToken = now
		}
		if answer && r.FirstAnswer.IsZero() {
			r.FirstAnswer = now
		}
	}
	if s.w.Usage.set {
		if r.Usage == nil {
			r.Usage = new(Usage)
		}
		*r.Usage = s.w.Usage.u
	}
}

// choices reads the decoded choices (delta when streaming, message otherwise): it appends
// their text, notes finish_reason, and says whether the answer (content, legacy text or a
// tool call) and any output at all (answer or reasoning: token) were non-empty. A tool call
// is a non-empty tool_calls array; its arguments are not text (not in Result.Text).
func (s *stream) choices(delta bool) (answer, token bool) {
	for i := range s.w.Choices {
		ch := &s.w.Choices[i]
		m := &ch.Message
		if delta {
			m = &ch.Delta
		}
		if m.Content.isText() {
			answer = true
			s.appendText(m.Content)
		}
		if ch.Text.isText() {
			answer = true
			s.appendText(ch.Text)
		}
		if m.ToolCalls.hasElements() {
			answer = true
		}
		// vLLM has sent both fields with the same text; count the text once.
		if m.ReasoningContent.isText() {
			token = true
			s.appendText(m.ReasoningContent)
		} else if m.Reasoning.isText() {
			token = true
			s.appendText(m.Reasoning)
		}
		if ch.FinishReason.isText() {
			s.res.FinishReason = finishReason(ch.FinishReason)
		}
	}
	return answer, token || answer
}

func (s *stream) appendText(v raw) {
	if s.res.TextTruncated {
		return
	}
	before := len(s.text)
	s.text = appendJSONString(s.text, v)
	if len(s.text) > s.c.maxText {
		cut := s.c.maxText
		for cut > before && !utf8.RuneStart(s.text[cut]) {
			cut--
		}
		s.text = s.text[:cut]
		s.res.TextTruncated = true
	}
}
