// Command sseblast is the minimal streaming load client that bench/vs-vegeta.sh compares the
// load generator with: fixed-rate arrivals (arrival i intended at start + i/rate), each sent
// from its own goroutine with net/http, every SSE data event JSON-parsed until [DONE]. Its
// pacer is a plain Go timer (time.Sleep until the target). At the end it prints one line:
//
//	requests=N ok=N scheduled_rate=R achieved_rate=R ratio=X lag_p50_ms=F lag_p99_ms=F lag_max_ms=F ttft_p50_ms=F ttft_p99_ms=F
//
// where a request's dispatch lag is sent − intended (sent: just before http.Client.Do), its
// TTFT first content event read − sent (over the requests that had one), the
// scheduled rate is N−1 over the first→last intended time and the achieved rate N−1 over the
// first→last send. Measure its CPU and RSS from outside (/usr/bin/time).
//
//	go run ./bench/sseblast -url http://127.0.0.1:18556/v1/chat/completions -rate 500 -duration 10s
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18556/v1/chat/completions", "chat completions URL")
	rate := flag.Float64("rate", 500, "arrivals per second (> 0)")
	duration := flag.Duration("duration", 10*time.Second, "schedule length")
	flag.Parse()
	if *rate <= 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "sseblast: -rate and -duration must be > 0")
		os.Exit(2)
	}
	n := int(*rate * duration.Seconds())
	tr := &http.Transport{MaxIdleConnsPerHost: 100000, MaxIdleConns: 100000, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	body := []byte(`{"model":"m","stream":true,"max_tokens":14,"messages":[{"role":"user","content":"hello there"}]}`)
	sent := make([]int64, n)  // ns since start
	ttfts := make([]int64, n) // ns from sent to the first content event; 0: none
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		target := start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
		time.Sleep(time.Until(target))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			sent[i] = int64(time.Since(start))
			resp, err := hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if readStream(resp.Body, func() { ttfts[i] = int64(time.Since(start)) - sent[i] }) == nil && resp.StatusCode == http.StatusOK {
				ok.Add(1)
			}
		}(i)
	}
	wg.Wait()
	lags := make([]float64, n)
	for i := range n {
		intended := float64(i) / *rate * 1e9
		lags[i] = (float64(sent[i]) - intended) / 1e6
	}
	slices.Sort(lags)
	q := func(p float64) float64 { return lags[int(p*float64(n-1))] }
	var ttft []float64
	for _, t := range ttfts {
		if t > 0 {
			ttft = append(ttft, float64(t)/1e6)
		}
	}
	slices.Sort(ttft)
	tq := func(p float64) float64 {
		if len(ttft) == 0 {
			return 0
		}
		return ttft[int(p*float64(len(ttft)-1))]
	}
	first, last := slices.Min(sent), slices.Max(sent)
	sched := float64(n-1) / (float64(n-1) / *rate)
	ach := float64(n-1) / (float64(last-first) / 1e9)
	fmt.Printf("requests=%d ok=%d scheduled_rate=%.3f achieved_rate=%.3f ratio=%.5f lag_p50_ms=%.3f lag_p99_ms=%.3f lag_max_ms=%.3f ttft_p50_ms=%.3f ttft_p99_ms=%.3f\n",
		n, ok.Load(), sched, ach, ach/sched, q(0.5), q(0.99), lags[n-1], tq(0.5), tq(0.99))
}

// readStream reads SSE lines until [DONE], JSON-decoding every data event and calling
// firstContent once, after the first event with non-empty content; a malformed event or a
// stream without [DONE] is an error.
func readStream(r io.Reader, firstContent func()) error {
	sc := bufio.NewScanner(r)
	var ev struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	for sc.Scan() {
		line := sc.Bytes()
		data, found := bytes.CutPrefix(line, []byte("data: "))
		if !found {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return nil
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		if firstContent != nil && len(ev.Choices) > 0 && ev.Choices[0].Delta.Content != "" {
			firstContent()
			firstContent = nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
