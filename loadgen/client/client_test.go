package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtureWant is what each captured Ollama stream must give.
var fixtureWant = []struct {
	file         string
	chunks       int // data events except [DONE]
	tokenChunks  int // events with non-empty content
	finish, text string
	usage        *Usage
}{
	{"ollama-stream.body.sse", 17, 16, "length", " that yes i g f that yes uv av a g u yes g", nil},
	{"ollama-stream-usage.body.sse", 18, 16, "length", " that yes i g f that yes uv av a g u yes g", &Usage{31, 16, 47}},
	{"ollama-stream-stop.body.sse", 5, 4, "stop", " that yes i ", nil},
}

func checkFixture(t *testing.T, r Result, i int) {
	t.Helper()
	w := fixtureWant[i]
	if r.Outcome != OK || r.ErrorType != "" || !r.SawDone {
		t.Fatalf("%s: outcome %q %q %q done=%v", w.file, r.Outcome, r.ErrorType, r.ErrorMessage, r.SawDone)
	}
	if r.ChunkCount != w.chunks || len(r.TokenChunks) != w.tokenChunks {
		t.Fatalf("%s: chunks %d token chunks %d, want %d %d", w.file, r.ChunkCount, len(r.TokenChunks), w.chunks, w.tokenChunks)
	}
	if r.FinishReason != w.finish || r.Text != w.text {
		t.Fatalf("%s: finish %q text %q", w.file, r.FinishReason, r.Text)
	}
	if (r.Usage == nil) != (w.usage == nil) || (r.Usage != nil && *r.Usage != *w.usage) {
		t.Fatalf("%s: usage %+v, want %+v", w.file, r.Usage, w.usage)
	}
	if r.FirstChunk.IsZero() || r.FirstToken.IsZero() || r.FirstAnswer.IsZero() || !r.FirstAnswer.Equal(r.FirstToken) {
		t.Fatalf("%s: first chunk/token/answer %v %v %v", w.file, r.FirstChunk, r.FirstToken, r.FirstAnswer)
	}
}

func TestOllamaFixturesOverHTTP(t *testing.T) {
	c := New(Options{})
	for i, w := range fixtureWant {
		body := fixture(t, w.file)
		// The whole body in one write, and one byte per flushed write (every byte boundary
		// becomes a possible read boundary).
		for _, perByte := range []bool{false, true} {
			srv := newServer(t, func(rw http.ResponseWriter, r *http.Request) {
				rw.Header().Set("Content-Type", "text/event-stream")
				if !perByte {
					_, _ = rw.Write(body)
					return
				}
				for j := range body {
					_, _ = rw.Write(body[j : j+1])
					rw.(http.Flusher).Flush()
				}
			})
			r := c.Do(context.Background(), call(srv.URL, true))
			checkFixture(t, r, i)
			checkOrder(t, r)
			if r.HTTPStatus != 200 || !r.Connected || !r.WroteRequest {
				t.Fatalf("status %d connected %v wrote %v", r.HTTPStatus, r.Connected, r.WroteRequest)
			}
		}
	}
}

func TestOllamaFixturesEveryByteSplit(t *testing.T) {
	// Every split point of the usage stream (it has every chunk kind of the others) and of
	// the stop stream (also with CRLF line ends); every stream byte by byte. The sse package
	// tests every split of every fixture with LF, CRLF and CR at the parser level.
	c := New(Options{})
	for i, w := range fixtureWant {
		for _, crlf := range []bool{false, true} {
			if crlf && i != 2 {
				continue
			}
			body := fixture(t, w.file)
			if crlf {
				body = bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
			}
			want := readMem(c, &chunkReader{chunks: [][]byte{body}})
			checkFixture(t, want, i)
			if i != 0 {
				for cut := 0; cut <= len(body); cut++ {
					got := readMem(c, &chunkReader{chunks: splitAt(body, cut)})
					if shapeOf(got) != shapeOf(want) {
						t.Fatalf("%s crlf=%v split at %d:\n%+v\nwant %+v", w.file, crlf, cut, shapeOf(got), shapeOf(want))
					}
				}
			}
			var bytewise [][]byte
			for j := range body {
				bytewise = append(bytewise, body[j:j+1])
			}
			if got := readMem(c, &chunkReader{chunks: bytewise}); shapeOf(got) != shapeOf(want) {
				t.Fatalf("%s byte by byte: %+v", w.file, shapeOf(got))
			}
		}
	}
}

func TestEventTimeIsTheReadTime(t *testing.T) {
	// Each event is stamped with the time its completing read returned: after that Read was
	// called and before the next Read was called, whatever the parse costs.
	c := New(Options{})
	half := func(f string) [][]byte { return [][]byte{[]byte(f[:len(f)/2]), []byte(f[len(f)/2:])} }
	var chunks [][]byte
	chunks = append(chunks, half(chunk(roleChunk, ""))...)                           // reads 0, 1
	chunks = append(chunks, half(chunk(content("a"), ""))...)                        // reads 2, 3
	chunks = append(chunks, []byte(chunk(content("b"), "")+chunk(content("c"), ""))) // read 4: two events
	chunks = append(chunks, half(chunk(`{}`, "stop"))...)                            // reads 5, 6
	chunks = append(chunks, half(doneFrame)...)                                      // reads 7, 8
	rd := &chunkReader{chunks: chunks}
	r := readMem(c, rd)
	if r.Outcome != OK || len(r.TokenChunks) != 3 {
		t.Fatalf("%+v", shapeOf(r))
	}
	within := func(name string, at time.Time, read int) {
		if at.Before(rd.calls[read]) || !at.Before(rd.calls[read+1]) {
			t.Fatalf("%s = %v, not within read %d [%v, %v)", name, at, read, rd.calls[read], rd.calls[read+1])
		}
	}
	within("FirstChunk", r.FirstChunk, 1)
	within("TokenChunks[0]", r.TokenChunks[0], 3)
	within("TokenChunks[1]", r.TokenChunks[1], 4)
	if !r.TokenChunks[2].Equal(r.TokenChunks[1]) {
		t.Fatal("two events of one read got different times")
	}
	within("End", r.End, 8)
}

func TestNonStreamingFixture(t *testing.T) {
	body := fixture(t, "ollama-nonstream.body.json")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	c := New(Options{})
	for _, stream := range []bool{false, true} { // a JSON answer to a streaming call is read as JSON
		r := c.Do(context.Background(), call(srv.URL, stream))
		if r.Outcome != OK || r.ErrorType != "" || r.HTTPStatus != 200 || r.FinishReason != "length" {
			t.Fatalf("%+v", shapeOf(r))
		}
		if r.Text != " that yes i g f that yes uv av a g u yes g" {
			t.Fatalf("text %q", r.Text)
		}
		if r.Usage == nil || *r.Usage != (Usage{31, 16, 47}) {
			t.Fatalf("usage %+v", r.Usage)
		}
		if !r.FirstChunk.IsZero() || !r.FirstToken.IsZero() || !r.FirstAnswer.IsZero() || r.TokenChunks != nil || r.ChunkCount != 0 {
			t.Fatal("non-streaming answer has stream timings")
		}
		if r.FirstByte.IsZero() || r.End.Before(r.FirstByte) || r.FirstByte.Before(r.Start) {
			t.Fatalf("times: start %v first byte %v end %v", r.Start, r.FirstByte, r.End)
		}
	}
}

func TestRoleChunkIsNotTTFT(t *testing.T) {
	// The role chunk is flushed at once, the first content 30 ms later: TTFT is the content.
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunk(roleChunk, ""))
		w.(http.Flusher).Flush()
		time.Sleep(30 * time.Millisecond)
		_, _ = io.WriteString(w, chunk(`{"reasoning_content":"r"}`, ""))
		w.(http.Flusher).Flush()
		time.Sleep(30 * time.Millisecond)
		_, _ = io.WriteString(w, chunk(content("a"), "stop")+doneFrame)
	})
	r := New(Options{}).Do(context.Background(), call(srv.URL, true))
	if r.Outcome != OK {
		t.Fatal(r.Outcome, r.ErrorMessage)
	}
	if d := r.FirstToken.Sub(r.FirstChunk); d < 30*time.Millisecond {
		t.Fatalf("FirstToken only %v after the role chunk", d)
	}
	if d := r.FirstAnswer.Sub(r.FirstToken); d < 30*time.Millisecond {
		t.Fatalf("FirstAnswer only %v after the first reasoning token", d)
	}
	checkOrder(t, r)
}

func TestRedirectNotFollowed(t *testing.T) {
	var srv *server
	srv = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redir" {
			http.Redirect(w, r, "http://user:pw@"+r.Host+"/other?token=secret#frag", http.StatusFound)
			return
		}
		sseFrames(chunk(content("a"), "stop"), doneFrame)(w, r)
	})
	r := New(Options{}).Do(context.Background(), call(srv.URL+"/redir", true))
	if r.Outcome != Error || r.ErrorType != ErrTypeRedirect || r.HTTPStatus != 302 {
		t.Fatalf("got %q %q %d", r.Outcome, r.ErrorType, r.HTTPStatus)
	}
	if !strings.Contains(r.ErrorMessage, "/other") || strings.Contains(r.ErrorMessage, "secret") || strings.Contains(r.ErrorMessage, "pw") {
		t.Fatalf("message %q", r.ErrorMessage)
	}
	if srv.count("POST /redir") != 1 {
		t.Fatal("the redirecting URL was not called exactly once")
	}
	if n := srv.count("POST /other") + srv.count("GET /other"); n != 0 {
		t.Fatalf("redirect target called %d times", n)
	}
}

func TestRedirectStatuses(t *testing.T) {
	for _, code := range []int{301, 303, 307, 308} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/redir" {
				http.Redirect(w, r, "/other", code)
			}
		})
		r := New(Options{}).Do(context.Background(), call(srv.URL+"/redir", true))
		if r.Outcome != Error || r.HTTPStatus != code || srv.count("POST /other")+srv.count("GET /other") != 0 {
			t.Fatalf("%d: %q %d", code, r.Outcome, r.HTTPStatus)
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	t.Run("before status", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client going away
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		cl := call(srv.URL, true)
		cl.Timeout = 100 * time.Millisecond
		r := New(Options{}).Do(context.Background(), cl)
		if r.Outcome != Timeout || r.ErrorType != ErrTypeTimeout || r.HTTPStatus != 0 || !r.Connected || !r.WroteRequest {
			t.Fatalf("%q %q %d connected %v wrote %v", r.Outcome, r.ErrorMessage, r.HTTPStatus, r.Connected, r.WroteRequest)
		}
		if d := r.End.Sub(r.Start); d < 100*time.Millisecond {
			t.Fatalf("ended after %v", d)
		}
	})
	t.Run("mid stream", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			sseFrames(chunk(roleChunk, ""), chunk(content("a"), ""))(w, r)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		r := New(Options{Timeout: 100 * time.Millisecond}).Do(context.Background(), Call{URL: srv.URL, Stream: true})
		if r.Outcome != Timeout || r.HTTPStatus != 200 || r.FirstToken.IsZero() || len(r.TokenChunks) != 1 || r.Text != "a" {
			t.Fatalf("%q %q %d %+v", r.Outcome, r.ErrorMessage, r.HTTPStatus, shapeOf(r))
		}
	})
	t.Run("non-streaming body", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":[`)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		r := New(Options{}).Do(context.Background(), Call{URL: srv.URL, Timeout: 100 * time.Millisecond})
		if r.Outcome != Timeout || r.HTTPStatus != 200 {
			t.Fatalf("%q %q %d", r.Outcome, r.ErrorMessage, r.HTTPStatus)
		}
	})
}

func TestCancelled(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	block := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	t.Run("mid stream", func(t *testing.T) {
		started := make(chan struct{})
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			sseFrames(chunk(content("a"), ""))(w, r)
			close(started)
			block(w, r)
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; time.Sleep(20 * time.Millisecond); cancel() }()
		r := New(Options{}).Do(ctx, call(srv.URL, true))
		if r.Outcome != Cancelled || r.ErrorType != ErrTypeCancelled || r.HTTPStatus != 200 || r.FirstToken.IsZero() {
			t.Fatalf("%q %q %d", r.Outcome, r.ErrorMessage, r.HTTPStatus)
		}
	})
	t.Run("caller deadline is not a timeout", func(t *testing.T) {
		srv := newServer(t, block)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		r := New(Options{}).Do(ctx, call(srv.URL, true)) // call timeout 1 min
		if r.Outcome != Cancelled || r.HTTPStatus != 0 || !strings.Contains(r.ErrorMessage, "deadline") {
			t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		srv := newServer(t, block)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := New(Options{}).Do(ctx, call(srv.URL, true))
		if r.Outcome != Cancelled {
			t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
		}
	})
}

func TestUnreachable(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		r := New(Options{}).Do(context.Background(), call(closedPort(t), true))
		if r.Outcome != Unreachable || r.ErrorType != ErrTypeConnect || r.Connected || r.WroteRequest || r.HTTPStatus != 0 {
			t.Fatalf("%q %q connected %v", r.Outcome, r.ErrorMessage, r.Connected)
		}
	})
	t.Run("TLS handshake fails", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("request reached the server") }))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error is expected
		srv.StartTLS()
		defer srv.Close()
		r := New(Options{}).Do(context.Background(), call(srv.URL, true)) // certificate not trusted
		if r.Outcome != Unreachable || r.ErrorType != ErrTypeConnect || r.Connected {
			t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
		}
	})
	t.Run("TLS to a plain HTTP server", func(t *testing.T) {
		srv := newServer(t, func(http.ResponseWriter, *http.Request) {})
		r := New(Options{}).Do(context.Background(), call(strings.Replace(srv.URL, "http:", "https:", 1), true))
		if r.Outcome != Unreachable || r.Connected {
			t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
		}
	})
	t.Run("connect timeout", func(t *testing.T) {
		hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		cl := call("http://192.0.2.1/v1/chat/completions", true)
		cl.Timeout = 50 * time.Millisecond
		r := New(Options{DialContext: hang}).Do(context.Background(), cl)
		if r.Outcome != Unreachable || r.ErrorType != ErrTypeConnectTimeout {
			t.Fatalf("%q %q %q", r.Outcome, r.ErrorType, r.ErrorMessage)
		}
	})
	t.Run("TLS works with a trusted certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(sseFrames(chunk(content("a"), "stop"), doneFrame))
		defer srv.Close()
		tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
		r := New(Options{TLSClientConfig: tlsCfg}).Do(context.Background(), call(srv.URL, true))
		if r.Outcome != OK || r.Text != "a" {
			t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
		}
	})
}

func TestDeliveryUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		conn func(net.Conn)
	}{
		{"accept then close", func(c net.Conn) { c.Close() }},
		{"close after reading the request", func(c net.Conn) { readRequestHead(c); c.Close() }},
		{"reset after reading the request", func(c net.Conn) {
			readRequestHead(c)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}},
		{"reset while the body is sent", func(c net.Conn) {
			buf := make([]byte, 1024)
			_, _ = c.Read(buf)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawListener(t, tc.conn)
			cl := call(url, true)
			if strings.HasPrefix(tc.name, "reset while") {
				cl.Body = bytes.Repeat([]byte("x"), 32<<20)
			}
			r := New(Options{}).Do(context.Background(), cl)
			if r.Outcome != DeliveryUnknown || !r.Connected || r.HTTPStatus != 0 {
				t.Fatalf("%q %q %q connected %v", r.Outcome, r.ErrorType, r.ErrorMessage, r.Connected)
			}
			if r.ErrorType != ErrTypeSendFailed && r.ErrorType != ErrTypeNoResponse {
				t.Fatalf("error type %q", r.ErrorType)
			}
			if strings.HasPrefix(tc.name, "reset while") && (r.WroteRequest || r.ErrorType != ErrTypeSendFailed) {
				t.Fatalf("a 32 MiB body cut by a reset was reported written (%q)", r.ErrorType)
			}
			if strings.Contains(tc.name, "after reading") && !r.WroteRequest {
				t.Fatalf("request not reported written: %q", r.ErrorMessage)
			}
		})
	}
	t.Run("hijacked and closed by an http server", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		})
		r := New(Options{}).Do(context.Background(), call(srv.URL, true))
		if r.Outcome != DeliveryUnknown || r.ErrorType != ErrTypeNoResponse || !r.WroteRequest {
			t.Fatalf("%q %q %q", r.Outcome, r.ErrorType, r.ErrorMessage)
		}
	})
}

func TestAfterStatusLine(t *testing.T) {
	t.Run("reset mid-stream is an error with the status", func(t *testing.T) {
		url := rawListener(t, func(c net.Conn) {
			readRequestHead(c)
			body := chunk(content("a"), "")
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
			time.Sleep(20 * time.Millisecond)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		})
		r := New(Options{}).Do(context.Background(), call(url, true))
		if r.Outcome != Error || r.ErrorType != ErrTypeTruncated || r.HTTPStatus != 200 || r.Text != "a" {
			t.Fatalf("%q %q %q %d", r.Outcome, r.ErrorType, r.ErrorMessage, r.HTTPStatus)
		}
	})
	t.Run("429 then close is rejected", func(t *testing.T) {
		url := rawListener(t, func(c net.Conn) {
			readRequestHead(c)
			_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 100\r\n\r\n{\"message\":")
			c.Close()
		})
		r := New(Options{}).Do(context.Background(), call(url, true))
		if r.Outcome != Rejected || r.HTTPStatus != 429 {
			t.Fatalf("%q %q %d", r.Outcome, r.ErrorMessage, r.HTTPStatus)
		}
	})
	t.Run("not HTTP is a bad response", func(t *testing.T) {
		url := rawListener(t, func(c net.Conn) {
			readRequestHead(c)
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
			c.Close()
		})
		r := New(Options{}).Do(context.Background(), call(url, true))
		if r.Outcome != Error || r.ErrorType != ErrTypeBadResponse || r.FirstByte.IsZero() {
			t.Fatalf("%q %q %q", r.Outcome, r.ErrorType, r.ErrorMessage)
		}
	})
}

func TestLineTooLong(t *testing.T) {
	t.Run("16 MiB default", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, chunk(content("a"), ""))
			_, _ = io.WriteString(w, "data: ")
			_, _ = w.Write(bytes.Repeat([]byte("x"), DefaultMaxLineBytes))
			_, _ = io.WriteString(w, "\n\n"+doneFrame)
		})
		r := New(Options{}).Do(context.Background(), call(srv.URL, true))
		if r.Outcome != Error || r.ErrorType != ErrTypeLineTooLong || r.HTTPStatus != 200 || r.Text != "a" {
			t.Fatalf("%q %q %q", r.Outcome, r.ErrorType, r.ErrorMessage)
		}
	})
	t.Run("configured bound, JSON body too", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/json" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"`+strings.Repeat("y", 5000)+`"}}]}`)
				return
			}
			sseFrames(chunk(content(strings.Repeat("y", 5000)), "stop"), doneFrame)(w, r)
		})
		c := New(Options{MaxLineBytes: 4096})
		if r := c.Do(context.Background(), call(srv.URL, true)); r.Outcome != Error || r.ErrorType != ErrTypeLineTooLong {
			t.Fatalf("%q %q", r.Outcome, r.ErrorType)
		}
		if r := c.Do(context.Background(), call(srv.URL+"/json", false)); r.Outcome != Error || r.ErrorType != ErrTypeBodyTooLarge {
			t.Fatalf("%q %q", r.Outcome, r.ErrorType)
		}
	})
}

// TestLinesLongerThanBuffers: a line longer than the connection's and the stream's read
// buffers (readBufferSize) spans reads and is parsed whole, up to exactly MaxLineBytes (the
// line without its line end); one byte more fails the request.
func TestLinesLongerThanBuffers(t *testing.T) {
	const maxLine = 8*readBufferSize + 123
	frame := len(chunk(content(""), "stop")) - 2 // a chunk line's bytes besides its text
	for _, tc := range []struct {
		name string
		n    int // the line's length
		ok   bool
	}{
		{"3 buffers long", 3*readBufferSize + 7, true},
		{"exactly MaxLineBytes", maxLine, true},
		{"one byte over MaxLineBytes", maxLine + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Repeat("y", tc.n-frame)
			l := strings.TrimSuffix(chunk(content(text), "stop"), "\n\n")
			if len(l) != tc.n {
				t.Fatalf("test line is %d bytes, want %d", len(l), tc.n)
			}
			srv := newServer(t, sseFrames(chunk(roleChunk, ""), l+"\n\n", doneFrame))
			r := New(Options{MaxLineBytes: maxLine, MaxTextBytes: 2 * maxLine}).Do(context.Background(), call(srv.URL, true))
			if !tc.ok {
				if r.Outcome != Error || r.ErrorType != ErrTypeLineTooLong || r.Text != "" {
					t.Fatalf("%q %q %q", r.Outcome, r.ErrorType, r.ErrorMessage)
				}
				return
			}
			if r.Outcome != OK || !r.SawDone || r.ChunkCount != 2 || len(r.TokenChunks) != 1 || r.FinishReason != "stop" ||
				r.Text != text {
				t.Fatalf("%q %q %q done=%v chunks=%d tokens=%d text=%d bytes", r.Outcome, r.ErrorType, r.ErrorMessage, r.SawDone, r.ChunkCount, len(r.TokenChunks), len(r.Text))
			}
		})
	}
}

// TestDoInto: DoInto overwrites the whole Result it is given, with what Do returns.
func TestDoInto(t *testing.T) {
	srv := newServer(t, sseFrames(chunk(roleChunk, ""), chunk(content("hi"), "stop"), doneFrame))
	c := New(Options{})
	r := Result{Outcome: Timeout, ErrorMessage: "stale", TokenChunks: make([]time.Time, 9), Usage: &Usage{TotalTokens: 3}, TextTruncated: true}
	c.DoInto(context.Background(), call(srv.URL, true), &r)
	want := c.Do(context.Background(), call(srv.URL, true))
	if r.Outcome != OK || r.ErrorMessage != "" || r.Usage != nil || r.TextTruncated || r.Text != "hi" || len(r.TokenChunks) != 1 ||
		shapeOf(r) != shapeOf(want) {
		t.Fatalf("%+v, want the shape of %+v", r, want)
	}
}

func TestTextCap(t *testing.T) {
	srv := newServer(t, sseFrames(chunk(content("aaaa"), ""), chunk(content("ééé"), ""), chunk(content("z"), "stop"), doneFrame))
	r := New(Options{MaxTextBytes: 7}).Do(context.Background(), call(srv.URL, true))
	// "aaaa" + "ééé" is 10 bytes; the cap cuts at a character boundary: "aaaaé" (6 bytes).
	if r.Outcome != OK || r.Text != "aaaaé" || !r.TextTruncated || len(r.TokenChunks) != 3 {
		t.Fatalf("%q %v %d", r.Text, r.TextTruncated, len(r.TokenChunks))
	}
}

func TestNoCompression(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gzip" {
			w.Header().Set("Content-Encoding", "gzip")
		}
		sseFrames(chunk(content("a"), "stop"), doneFrame)(w, r)
	})
	c := New(Options{})
	r := c.Do(context.Background(), call(srv.URL, true))
	if r.Outcome != OK {
		t.Fatal(r.Outcome, r.ErrorMessage)
	}
	if ae := srv.lastHeader().Get("Accept-Encoding"); ae != "" {
		t.Fatalf("Accept-Encoding %q was sent", ae)
	}
	r = c.Do(context.Background(), call(srv.URL+"/gzip", true))
	if r.Outcome != Error || r.ErrorType != ErrTypeEncoding {
		t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
	}
}

func TestRequestHeadersAndCredentials(t *testing.T) {
	srv := newServer(t, sseFrames(chunk(content("a"), "stop"), doneFrame))
	c := New(Options{})
	cl := call(strings.Replace(srv.URL, "http://", "http://user:pass@", 1), true)
	r := c.Do(context.Background(), cl)
	if r.Outcome != OK {
		t.Fatal(r.Outcome, r.ErrorMessage)
	}
	h := srv.lastHeader()
	if h.Get("Authorization") != "" {
		t.Fatalf("URL credentials were sent: %q", h.Get("Authorization"))
	}
	if h.Get("X-Request-Id") != "inferprobe-run-1-c1_measured_0_0" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
	if cl.Header.Get("Content-Type") != "" {
		t.Fatal("the caller's header map was modified")
	}
	if srv.count("POST /") != 1 {
		t.Fatalf("requests %v", srv.requests)
	}
	if r := c.Do(context.Background(), Call{URL: "http://[::1"}); r.Outcome != Error || r.ErrorType != ErrTypeInvalidRequest {
		t.Fatalf("bad URL: %q %q", r.Outcome, r.ErrorMessage)
	}
}

func TestKeepAliveReuse(t *testing.T) {
	var status int
	var mu sync.Mutex
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := status
		mu.Unlock()
		if s != 0 {
			w.WriteHeader(s)
			_, _ = io.WriteString(w, `{"message":"busy"}`)
			return
		}
		if r.URL.Path == "/json" {
			_, _ = w.Write(fixture(t, "ollama-nonstream.body.json"))
			return
		}
		sseFrames(chunk(roleChunk, ""), chunk(content("a"), ""), chunk(`{}`, "stop"), usageFrame, doneFrame)(w, r)
	})
	c := New(Options{MaxConnsPerHost: 8})
	for i := range 10 {
		r := c.Do(context.Background(), call(srv.URL, true))
		if r.Outcome != OK || r.ConnReused != (i > 0) {
			t.Fatalf("call %d: %q reused %v", i, r.Outcome, r.ConnReused)
		}
	}
	for range 5 {
		if r := c.Do(context.Background(), call(srv.URL+"/json", false)); r.Outcome != OK || !r.ConnReused {
			t.Fatalf("JSON call: %q reused %v", r.Outcome, r.ConnReused)
		}
	}
	mu.Lock()
	status = 429
	mu.Unlock()
	for range 3 {
		if r := c.Do(context.Background(), call(srv.URL, true)); r.Outcome != Rejected || !r.ConnReused {
			t.Fatalf("429: %q reused %v", r.Outcome, r.ConnReused)
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("18 sequential calls opened %d connections, want 1", n)
	}
	c.CloseIdle()
}

func TestConcurrentReuse(t *testing.T) {
	// 8 callers, 5 rounds; the server answers a round only once all 8 requests are in flight,
	// so each round is truly concurrent. A pool sized to the load opens 8 connections in all;
	// an idle pool of 2 (Go's default size) must open 6 new ones every round.
	const workers, rounds = 8, 5
	var mu sync.Mutex
	arrived := 0
	gate := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		g := gate
		arrived++
		if arrived == workers {
			close(gate)
		}
		mu.Unlock()
		<-g
		sseFrames(chunk(content("a"), "stop"), doneFrame)(w, r)
	})
	run := func(c *Client) int64 {
		before := srv.conns.Load()
		for range rounds {
			mu.Lock()
			arrived, gate = 0, make(chan struct{})
			mu.Unlock()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					if r := c.Do(context.Background(), call(srv.URL, true)); r.Outcome != OK {
						t.Errorf("%q %q", r.Outcome, r.ErrorMessage)
					}
				})
			}
			wg.Wait()
		}
		c.CloseIdle()
		return srv.conns.Load() - before
	}
	if n := run(New(Options{MaxConnsPerHost: workers})); n != workers {
		t.Fatalf("pool sized to the load: %d connections for %d calls, want %d", n, workers*rounds, workers)
	}
	if n := run(New(Options{MaxConnsPerHost: 2})); n != workers+(rounds-1)*(workers-2) {
		t.Fatalf("pool of 2: %d connections, want %d", n, workers+(rounds-1)*(workers-2))
	}
}

func TestDefaultIdlePoolBeatsGoDefault(t *testing.T) {
	c := New(Options{})
	if c.tr.MaxIdleConnsPerHost != DefaultMaxConnsPerHost || c.tr.Proxy != nil || !c.tr.DisableCompression || c.tr.MaxConnsPerHost != 0 {
		t.Fatalf("transport %+v", c.tr)
	}
	if c.tr.Protocols == nil || c.tr.Protocols.HTTP2() || !c.tr.Protocols.HTTP1() {
		t.Fatal("not HTTP/1.1 only")
	}
}

func TestProxyEnvIgnored(t *testing.T) {
	// A dead proxy in the environment: a transport that honoured it would fail. The target
	// host is not a loopback literal (Go never proxies those), so the environment applies;
	// the dialer maps the name to the test server.
	dead := closedPort(t)
	deadAddr := strings.TrimSuffix(strings.TrimPrefix(dead, "http://"), "/v1/chat/completions")
	t.Setenv("HTTP_PROXY", "http://"+deadAddr)
	t.Setenv("http_proxy", "http://"+deadAddr)
	t.Setenv("HTTPS_PROXY", "http://"+deadAddr)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	srv := newServer(t, sseFrames(chunk(content("a"), "stop"), doneFrame))
	target := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(target)
	var dialed []string
	var mu sync.Mutex
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		if addr == "model-server.test:"+port {
			addr = target
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	url := "http://model-server.test:" + port + "/v1/chat/completions"

	// Control: the environment is in effect for a transport that reads it.
	req, _ := http.NewRequest("POST", url, nil)
	if p, err := http.ProxyFromEnvironment(req); err != nil || p == nil || p.Host != deadAddr {
		t.Fatalf("control: environment proxy %v %v", p, err)
	}

	r := New(Options{DialContext: dial}).Do(context.Background(), call(url, true))
	if r.Outcome != OK || r.Text != "a" {
		t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
	}
	if srv.count("POST /v1/chat/completions") != 1 || len(dialed) != 1 || dialed[0] != "model-server.test:"+port {
		t.Fatalf("dialed %v", dialed)
	}
	if got := IgnoredProxyEnv(); strings.Join(got, ",") != "HTTP_PROXY,http_proxy,HTTPS_PROXY" {
		t.Fatalf("IgnoredProxyEnv = %v", got)
	}
}

func TestIgnoredProxyEnvEmpty(t *testing.T) {
	for _, n := range proxyEnvNames {
		t.Setenv(n, "")
	}
	if got := IgnoredProxyEnv(); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	t.Setenv("all_proxy", "socks5://u:p@h:1")
	if got := IgnoredProxyEnv(); len(got) != 1 || got[0] != "all_proxy" {
		t.Fatalf("%v", got)
	}
}

func TestServerHangsAfterDone(t *testing.T) {
	// [DONE] arrived but the body never ends: the answer is OK and ends at [DONE]; Do stops
	// draining after a short grace instead of waiting for the call's timeout.
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseFrames(chunk(content("a"), "stop"), doneFrame)(w, r)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	start := time.Now()
	r := New(Options{}).Do(context.Background(), call(srv.URL, true)) // timeout 1 min
	returned := time.Since(start)
	if r.Outcome != OK || !r.SawDone || r.Text != "a" {
		t.Fatalf("%q %q", r.Outcome, r.ErrorMessage)
	}
	if returned > 30*time.Second {
		t.Fatalf("Do returned after %v", returned)
	}
	if got := r.End.Sub(r.Start); got >= returned {
		t.Fatalf("End (%v) not at [DONE] (returned after %v)", got, returned)
	}
}

// A 200 web page where a stream was asked for is named as such, not only as truncated.
func TestHTMLAnswerToAStreamSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><body>Welcome to nginx</body></html>\n"))
	}))
	defer srv.Close()
	r := New(Options{}).Do(context.Background(), call(srv.URL+"/v1/chat/completions", true))
	if r.Outcome != Error || r.ErrorType != ErrTypeTruncated || !strings.Contains(r.ErrorMessage, `no SSE event (Content-Type "text/html; charset=utf-8")`) {
		t.Fatalf("%s %s %q", r.Outcome, r.ErrorType, r.ErrorMessage)
	}
}
