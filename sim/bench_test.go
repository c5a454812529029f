package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"

	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchStreams is the number of concurrent client connections of BenchmarkSimStreams.
const benchStreams = 2000

// BenchmarkSimStreams measures the simulator on ONE core: GOMAXPROCS=1 for the server and
// its benchStreams clients together (the clients are lean raw-TCP readers). Each client
// keeps one keep-alive connection and streams one request after another; one op is one
// streamed request. Reported: chunks/s (SSE data events written and read: role, content,
// usage, [DONE]), tokens/s, peak_streams (most streams open at once, response headers to
// [DONE]) and, for the paced case, step_ms (the engine's mean step interval, against the
// configured 30 ms: larger means the simulator fell behind). Run with -benchtime of at
// least 2×benchStreams x (bench/sim.sh) so that every connection is busy.
//
//   - zero-latency: no simulated time at all, so each stream is as short as the server can
//     write it: the throughput ceiling with 2,000 concurrent clients.
//   - open-2000: 30 ms decode steps and 40-token requests, so all 2,000 streams are open
//     at once and each gets a token per step (66,667 tokens/s offered).
func BenchmarkSimStreams(b *testing.B) {
	b.Run("zero-latency", func(b *testing.B) {
		cfg := benchConfig()
		runStreams(b, cfg, 64)
	})
	b.Run("open-2000", func(b *testing.B) {
		cfg := benchConfig()
		cfg.DecodeStepBase = 30 * time.Millisecond
		runStreams(b, cfg, 40)
	})
}

func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.PrefillTokensPerSec, cfg.DecodeStepBase, cfg.DecodeStepPerSeq = 0, 0, 0
	cfg.MaxNumSeqs = 4096
	cfg.NumGPUBlocks = 1 << 16
	cfg.MaxModelLen = 1024
	return cfg
}

func runStreams(b *testing.B, cfg Config, tokens int) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	s, err := Start(context.Background(), cfg, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := chatBody("benchmark prompt of a few words", tokens, true, map[string]any{"ignore_eos": true})
	reqBytes := []byte(fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	addr := strings.TrimPrefix(s.URL(), "http://")
	conns := make([]net.Conn, min(benchStreams, b.N))
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	e := s.engines[0]
	e.mu.Lock()
	steps0 := e.steps
	e.mu.Unlock()
	var next, events, open, peak atomic.Int64
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReaderSize(c, 16<<10)
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Write(reqBytes); err != nil {
					fail(err)
					return
				}
				n, err := readStream(br, func() {
					if o := open.Add(1); o > peak.Load() {
						peak.Store(o) // racy max; fine for a peak gauge
					}
				})
				open.Add(-1)
				if err != nil {
					fail(err)
					return
				}
				if n != tokens+3 {
					fail(fmt.Errorf("%d events, want %d", n, tokens+3))
					return
				}
				events.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	e.mu.Lock()
	steps := e.steps - steps0
	e.mu.Unlock()
	b.ReportMetric(float64(events.Load())/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(int64(b.N)*int64(tokens))/elapsed.Seconds(), "tokens/s")
	b.ReportMetric(float64(peak.Load()), "peak_streams")
	if cfg.DecodeStepBase > 0 && steps > 0 {
		b.ReportMetric(elapsed.Seconds()*1000/float64(steps), "step_ms")
	}
}

// readStream reads one chunked SSE response and returns the number of data events; it
// calls opened once the headers are in.
func readStream(br *bufio.Reader, opened func()) (int, error) {
	status, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200")) {
		return 0, fmt.Errorf("status %q", status)
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) == 2 {
			break
		}
	}
	opened()
	n := 0
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return n, err
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil {
			return n, fmt.Errorf("chunk size %q", line)
		}
		if size == 0 {
			if _, err := br.Discard(2); err != nil {
				return n, err
			}
			if !done {
				return n, fmt.Errorf("stream ended without [DONE]")
			}
			return n, nil
		}
		chunk, err := br.Peek(int(size))
		if err != nil {
			return n, err
		}
		n += bytes.Count(chunk, []byte("data: "))
		done = done || bytes.Contains(chunk, []byte("data: [DONE]"))
		if _, err := br.Discard(int(size) + 2); err != nil {
			return n, err
		}
	}
}
