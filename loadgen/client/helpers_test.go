package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixture reads a capture of a real OpenAI-compatible server (Ollama v0.17.4, CPU only,
// a tiny random-weight model, taken with curl -N), copied into testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// server is an httptest server on 127.0.0.1 that counts the connections it accepted and
// the requests per path.
type server struct {
	*httptest.Server
	conns    atomic.Int64
	mu       sync.Mutex
	requests map[string]int
	headers  []http.Header
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{requests: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests[r.Method+" "+r.URL.Path]++
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[key]
}

func (s *server) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[len(s.headers)-1]
}

// sse writes each frame and flushes it, as a streaming server does.
func sseFrames(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
			w.(http.Flusher).Flush()
		}
	}
}

// chunk renders one chat.completion.chunk data event with the given delta JSON.
func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + "}]}\n\n"
}

const (
	roleChunk  = `{"role":"assistant","content":""}`
	doneFrame  = "data: [DONE]\n\n"
	usageFrame = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\n\n"
)

func content(s string) string { return `{"content":"` + s + `"}` }

func call(url string, stream bool) Call {
	h := http.Header{}
	h.Set("X-Request-Id", "inferprobe-run-1-c1_measured_0_0")
	return Call{URL: url, Header: h, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`), Stream: stream, Timeout: time.Minute}
}

// rawListener accepts connections on 127.0.0.1 and hands each to fn.
func rawListener(t *testing.T, fn func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { fn(c) })
		}
	})
	return "http://" + ln.Addr().String() + "/v1/chat/completions"
}

// closedPort returns a 127.0.0.1 URL on which nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1/chat/completions"
}

// readRequestHead reads an HTTP request's head (up to the blank line) from c.
func readRequestHead(c net.Conn) {
	buf := make([]byte, 0, 4096)
	one := make([]byte, 1024)
	for !strings.Contains(string(buf), "\r\n\r\n") {
		n, err := c.Read(one)
		buf = append(buf, one[:n]...)
		if err != nil {
			return
		}
	}
}

// chunkReader returns the given chunks one per Read, recording when each Read was called.
type chunkReader struct {
	chunks [][]byte
	i      int
	calls  []time.Time
	err    error // returned after the chunks (io.EOF when nil)
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.calls = append(r.calls, time.Now())
	if r.i >= len(r.chunks) {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	c := r.chunks[r.i]
	n := copy(p, c)
	if n < len(c) {
		r.chunks[r.i] = c[n:]
	} else {
		r.i++
	}
	return n, nil
}

// readMem runs the client's stream reader over in-memory reads.
func readMem(c *Client, rd io.Reader) Result {
	var r Result
	s := c.getStream()
	defer c.putStream(s)
	s.readStream(context.Background(), rd, &r, func() {}, func(err error) {
		r.fail(Error, ErrTypeTruncated, "the connection failed during the answer: "+err.Error())
	})
	return r
}

// splitAt cuts b at the given offsets.
func splitAt(b []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}

// shape is a Result without its times, for comparing results of differently split input.
type shape struct {
	Outcome                       Outcome
	ErrorType, ErrorMessage       string
	HasFirstChunk, HasFirstToken  bool
	HasFirstAnswer                bool
	TokenChunks, Chunks, Comments int
	SawDone, TextTrunc            bool
	FinishReason, Text            string
	Usage                         Usage
	HasUsage                      bool
}

func shapeOf(r Result) shape {
	s := shape{
		Outcome: r.Outcome, ErrorType: r.ErrorType, ErrorMessage: r.ErrorMessage,
		HasFirstChunk: !r.FirstChunk.IsZero(), HasFirstToken: !r.FirstToken.IsZero(), HasFirstAnswer: !r.FirstAnswer.IsZero(),
		TokenChunks: len(r.TokenChunks), Chunks: r.ChunkCount, Comments: r.CommentCount,
		SawDone: r.SawDone, TextTrunc: r.TextTruncated,
		FinishReason: r.FinishReason, Text: r.Text, HasUsage: r.Usage != nil,
	}
	if r.Usage != nil {
		s.Usage = *r.Usage
	}
	return s
}

// checkOrder asserts the timing invariants of a streamed result.
func checkOrder(t *testing.T, r Result) {
	t.Helper()
	seq := []struct {
		name string
		at   time.Time
	}{{"Start", r.Start}, {"GotConn", r.GotConn}, {"WroteAt", r.WroteAt}, {"FirstByte", r.FirstByte}, {"FirstChunk", r.FirstChunk}, {"FirstToken", r.FirstToken}, {"End", r.End}}
	var prev time.Time
	prevName := ""
	for _, s := range seq {
		if s.at.IsZero() {
			continue
		}
		if !prev.IsZero() && s.at.Before(prev) {
			t.Fatalf("%s (%v) before %s (%v)", s.name, s.at, prevName, prev)
		}
		prev, prevName = s.at, s.name
	}
	if !r.FirstAnswer.IsZero() && r.FirstAnswer.Before(r.FirstToken) {
		t.Fatal("FirstAnswer before FirstToken")
	}
	for i := 1; i < len(r.TokenChunks); i++ {
		if r.TokenChunks[i].Before(r.TokenChunks[i-1]) {
			t.Fatalf("TokenChunks not ordered at %d", i)
		}
	}
	if len(r.TokenChunks) > 0 && !r.TokenChunks[0].Equal(r.FirstToken) {
		t.Fatal("TokenChunks[0] != FirstToken")
	}
}
