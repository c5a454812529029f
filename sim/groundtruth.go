package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// GroundTruth is one line of the Config.GroundTruthPath JSONL file: the simulator's own
// account of one POST /v1/chat/completions request, written when the handler returns.
// Times are wall-clock unix nanoseconds (JSON integers); a time that never happened, or a
// value that does not apply, is null.
type GroundTruth struct {
	// RequestID is the request id: the X-Request-Id header, else the body's request_id,
	// else a generated 16-hex id. ResponseID is "chatcmpl-" + RequestID (the response id
	// and the span's gen_ai.request.id).
	RequestID  string `json:"request_id"`
	ResponseID string `json:"response_id"`
	// Engine is the engine label value the request went to.
	Engine *string `json:"engine"`
	// Status is one of: "ok" (finish_reason stop or length), "error" (the stream-error
	// fault), "truncated", "cancelled" (the client went away), "reset", "rejected" (429 or
	// 503 fault, or restart downtime), "restart", "shutdown", "invalid" (4xx before the
	// engine).
	Status string `json:"status"`
	// HTTPStatus is the status line sent (null when none was: reset).
	HTTPStatus   *int    `json:"http_status"`
	Stream       bool    `json:"stream"`
	FinishReason *string `json:"finish_reason"`
	// Token counts: prompt and completion tokens (as in usage), max_tokens in effect,
	// prefix-cache hit tokens at first admission, and preemptions suffered.
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
	MaxTokens        *int `json:"max_tokens"`
	CachedTokens     *int `json:"cached_tokens"`
	Preemptions      *int `json:"num_preemptions"`
	// ArrivalNs: the request entered the engine (the span's start; vLLM's arrival_time).
	// ScheduledNs: first scheduled. FirstTokenNs / LastTokenNs: the engine step that
	// emitted the first / last token ended. FinishedNs: the engine finished or dropped it
	// (the span's end).
	ArrivalNs    *int64 `json:"arrival_ns"`
	ScheduledNs  *int64 `json:"scheduled_ns"`
	FirstTokenNs *int64 `json:"first_token_ns"`
	LastTokenNs  *int64 `json:"last_token_ns"`
	FinishedNs   *int64 `json:"finished_ns"`
	// HeadersNs: the status line and headers were flushed to the socket.
	HeadersNs *int64 `json:"headers_ns"`
	// ChunkNs: each write to the socket after the headers, in order. For a stream, one per
	// SSE event: the role event, content events, the error or usage event, and
	// data: [DONE]. For a non-streamed response, one for the body.
	ChunkNs []int64 `json:"chunk_ns"`
	// ChunkStartNs: for each ChunkNs, the time just before that write began. The bytes
	// reached the kernel within [ChunkStartNs[i], ChunkNs[i]]: the width of that interval is
	// the ground truth's own uncertainty (the engine's goroutine can be descheduled inside it).
	ChunkStartNs []int64 `json:"chunk_start_ns"`
	// Faults lists the injected faults that applied ("reset", "reject_429",
	// "reject_503", "slow_headers", "stream_error", "truncate", "stall").
	Faults []string `json:"faults"`
}

// addChunk records one socket write that began at start (unix ns) and has just ended.
func (g *GroundTruth) addChunk(start int64) {
	g.ChunkStartNs = append(g.ChunkStartNs, start)
	g.ChunkNs = append(g.ChunkNs, nowNs())
}

// gtWriter appends GroundTruth lines to a file, one flushed line per request. Lines are
// encoded and written by one goroutine of its own, so that recording a request never delays
// the end of its response (net/http writes the chunked body's terminator only when the
// handler returns: a file write in the handler would sit between [DONE] and that end).
type gtWriter struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	closed bool
	err    error
	recs   chan *GroundTruth
	done   chan struct{}
}

func openGroundTruth(path string) (*gtWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ground truth: %w", err)
	}
	g := &gtWriter{f: f, w: bufio.NewWriter(f), recs: make(chan *GroundTruth, 4096), done: make(chan struct{})}
	go g.run()
	return g, nil
}

// write queues rec (blocking only when 4,096 lines are waiting); rec must not change after.
func (g *gtWriter) write(rec *GroundTruth) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.recs <- rec
}

func (g *gtWriter) run() {
	defer close(g.done)
	for rec := range g.recs {
		b, err := json.Marshal(rec)
		if g.err != nil {
			continue
		}
		if err != nil {
			g.err = err
			continue
		}
		b = append(b, '\n')
		if _, err := g.w.Write(b); err != nil {
			g.err = err
			continue
		}
		if len(g.recs) == 0 {
			g.err = g.w.Flush()
		}
	}
}

func (g *gtWriter) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	close(g.recs)
	<-g.done
	ferr := g.w.Flush()
	cerr := g.f.Close()
	switch {
	case g.err != nil:
		return fmt.Errorf("ground truth: %w", g.err)
	case ferr != nil:
		return fmt.Errorf("ground truth: %w", ferr)
	case cerr != nil:
		return fmt.Errorf("ground truth: %w", cerr)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
