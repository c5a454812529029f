// Command ssestub is a minimal OpenAI-compatible streaming endpoint for measuring the load
// generator's own cost: every POST to /v1/chat/completions gets the same vLLM-shaped SSE
// answer — a role chunk, -tokens one-token content chunks, a finish chunk, the usage chunk
// and [DONE] (16 events for the default 14 tokens) — each event written and flushed on its
// own, without any delay (unless -delay), so the server's cost per request is as small as net/http allows.
//
//	go run ./bench/ssestub -listen 127.0.0.1:18556 -tokens 14
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/inferprobe/inferprobe/internal/ssefixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18556", "address to serve on")
	tokens := flag.Int("tokens", 14, "one-token content chunks per answer")
	delay := flag.Duration("delay", 0, "pause before each event after the first (0: none), to hold many streams open")
	flag.Parse()
	events := render(*tokens)
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f, _ := w.(http.Flusher)
		for i, e := range events {
			if i > 0 && *delay > 0 {
				time.Sleep(*delay)
			}
			if _, err := w.Write(e); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
	})
	log.Printf("ssestub: http://%s/v1 (%d events per answer)", *listen, len(events))
	log.Fatal(http.ListenAndServe(*listen, nil))
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
