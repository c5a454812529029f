// Command ssestub is a minimal OpenAI-compatible streaming endpoint for measuring the load
// generator's own cost: every POST to /v1/chat/completions gets the same vLLM-shaped SSE
// answer — a role chunk, -tokens one-token content chunks, a finish chunk, the usage chunk
// and [DONE] (18 events for the default 14 tokens) — each event written and flushed on its
// own, without any delay (unless -delay), so the server's cost per request is as small as net/http allows.
// With -truth FILE it also writes, per request, the X-Request-Id and the wall-clock instants
// (Unix ns) just before the first content event's write and just after its flush returned, tab
// separated, one line each, through a 64 KiB buffer flushed at SIGINT/SIGTERM (stop the stub
// with kill or Ctrl-C before reading it): the truth against which `ratecheck -truth FILE`
// measures the client's TTFT. The file is created only once the address is bound.
//
//	go run ./bench/ssestub -listen 127.0.0.1:18556 -tokens 14
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/inferprobe/inferprobe/internal/ssefixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18556", "address to serve on")
	tokens := flag.Int("tokens", 14, "one-token content chunks per answer")
	delay := flag.Duration("delay", 0, "pause before each event after the first (0: none), to hold many streams open")
	truthPath := flag.String("truth", "", "write each request's X-Request-Id and first-content write instants (Unix ns) to this file")
	flag.Parse()
	switch {
	case *tokens < 1 || *tokens > 1<<20:
		log.Fatalf("ssestub: -tokens %d: want 1 to %d", *tokens, 1<<20)
	case *delay < 0:
		log.Fatalf("ssestub: -delay %v: want 0 or more", *delay)
	}
	events := render(*tokens)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	truth := openTruth(*truthPath)
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f, _ := w.(http.Flusher)
		for i, e := range events {
			if i > 0 && *delay > 0 {
				time.Sleep(*delay)
			}
			t0 := time.Now()
			if _, err := w.Write(e); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
			if i == 1 && truth != nil {
				truth.add(r.Header.Get("X-Request-Id"), t0, time.Now())
			}
		}
	})
	log.Printf("ssestub: http://%s/v1 (%d events per answer)", ln.Addr(), len(events))
	log.Fatal(http.Serve(ln, nil))
}

// render returns the answer's events, one []byte per SSE event.
func render(n int) [][]byte {
	ev := ssefixture.VLLMStream("chatcmpl-stub", "stub", 64, n)
	b := make([][]byte, len(ev))
	for i, e := range ev {
		b[i] = []byte(e)
	}
	return b
}

// truthLog is the -truth file: one line per request, written under a mutex through a buffer.
type truthLog struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// openTruth opens the truth file (nil when path is empty) and flushes it, then exits, at
// SIGINT or SIGTERM.
func openTruth(path string) *truthLog {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	t := &truthLog{w: bufio.NewWriterSize(f, 1<<16)}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		t.mu.Lock()
		err := t.w.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			log.Print(err)
			os.Exit(1)
		}
		os.Exit(0)
	}()
	return t
}

func (t *truthLog) add(id string, before, after time.Time) {
	t.mu.Lock()
	fmt.Fprintf(t.w, "%s\t%d\t%d\n", id, before.UnixNano(), after.UnixNano())
	t.mu.Unlock()
}
