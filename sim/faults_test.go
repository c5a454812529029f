package sim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func faultConfig(f Faults) Config {
	c := fastConfig()
	c.Faults = f
	return c
}

func TestFaultReset(t *testing.T) {
	cfg := faultConfig(Faults{Reset: 1})
	gt := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	// A raw client sees the connection reset with no status line.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := chatBody("hi there", 5, true, nil)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: rst\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if len(got) != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q, err %v; want nothing and ECONNRESET", got, err)
	}
	mfs := scrape(t, s.URL())
	if v := mustSample(t, mfs, "vllm:prompt_tokens_total", engine0); v != 0 {
		t.Errorf("reset request reached the engine: prompt_tokens_total %v", v)
	}
	_ = s.Close()
	recs := readGroundTruth(t, gt)
	if len(recs) != 1 || recs[0].Status != "reset" || recs[0].HTTPStatus != nil || recs[0].Faults[0] != "reset" {
		t.Errorf("ground truth %+v", recs)
	}
}

func TestFaultRejects(t *testing.T) {
	for _, c := range []struct {
		f      Faults
		status int
		typ    string
	}{
		{Faults{Reject429: 1}, 429, "RateLimitError"},
		{Faults{Reject503: 1}, 503, "ServiceUnavailableError"},
	} {
		s := startSim(t, faultConfig(c.f))
		resp := post(t, s.URL(), chatBody("hi", 3, true, nil), nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" ||
			!bytes.Contains(b, []byte(`"type":"`+c.typ+`"`)) || !bytes.Contains(b, []byte(fmt.Sprintf(`"code":%d`, c.status))) {
			t.Errorf("%d: got %d %s", c.status, resp.StatusCode, b)
		}
	}
}

func TestFaultFractionIsSeededAndPartial(t *testing.T) {
	count := func(seed uint64) (n429 int) {
		cfg := faultConfig(Faults{Reject429: 0.5})
		cfg.Seed = seed
		s := startSim(t, cfg)
		for i := 0; i < 40; i++ {
			resp := post(t, s.URL(), chatBody("hi", 1, false, nil), map[string]string{"X-Request-Id": fmt.Sprintf("f-%d", i)})
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 429 {
				n429++
			}
		}
		_ = s.Close()
		return n429
	}
	a, b := count(7), count(7)
	if a != b {
		t.Fatalf("same seed, same ids: %d vs %d rejections", a, b)
	}
	if a < 8 || a > 32 {
		t.Fatalf("%d of 40 rejected at fraction 0.5", a)
	}
}

func TestFaultStreamError(t *testing.T) {
	s := startSim(t, faultConfig(Faults{StreamError: 1}))
	resp := post(t, s.URL(), chatBody("hi there", 30, true, nil), nil)
	evs, err := readSSE(t, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d err %v", resp.StatusCode, err)
	}
	r := summarise(t, evs)
	if r.errorEvent == nil || r.errorEvent["type"] != "InternalServerError" || r.errorEvent["code"] != 500.0 {
		t.Fatalf("error event %v", r.errorEvent)
	}
	if r.finish != "" || r.usage != nil || !r.done || !evs[len(evs)-1].done || evs[len(evs)-2].obj["error"] == nil {
		t.Fatalf("want content, then the error event, then [DONE]; got finish %q usage %v events %d", r.finish, r.usage, len(evs))
	}
	// Non-streaming: a 500 JSON error.
	resp = post(t, s.URL(), chatBody("hi there", 30, false, nil), nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !bytes.Contains(b, []byte(`"InternalServerError"`)) {
		t.Fatalf("non-stream: %d %s", resp.StatusCode, b)
	}
	mfs := scrape(t, s.URL())
	if v := mustSample(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "error"}); v != 2 {
		t.Errorf("request_success_total{error} = %v, want 2", v)
	}
}

func TestFaultTruncate(t *testing.T) {
	s := startSim(t, faultConfig(Faults{Truncate: 1}))
	resp := post(t, s.URL(), chatBody("hi there", 30, true, nil), nil)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want an unexpected EOF, got %v", err)
	}
	if bytes.Contains(data, []byte("[DONE]")) || bytes.Contains(data, []byte(`"finish_reason":"`)) || !bytes.Contains(data, []byte(`"role":"assistant"`)) {
		t.Fatalf("stream %q", data)
	}
	mfs := scrape(t, s.URL())
	for _, r := range successReasons {
		if v := mustSample(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": r}); v != 0 {
			t.Errorf("truncated request counted as %s", r)
		}
	}
	if v := mustSample(t, mfs, "vllm:generation_tokens_total", engine0); v < 1 || v > 30 {
		t.Errorf("generation_tokens_total %v", v)
	}
}

func TestFaultStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	cfg := faultConfig(Faults{Stall: 1, StallDuration: stall})
	gt := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	resp := post(t, s.URL(), chatBody("hi there", 4, true, nil), nil)
	br := bufio.NewReader(resp.Body)
	var arrivals []time.Time
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data: ") {
			arrivals = append(arrivals, time.Now())
		}
	}
	resp.Body.Close()
	maxGap := time.Duration(0)
	for i := 1; i < len(arrivals); i++ {
		maxGap = max(maxGap, arrivals[i].Sub(arrivals[i-1]))
	}
	if len(arrivals) != 7 || maxGap < stall-30*time.Millisecond { // client clocks see the gap less exactly
		t.Fatalf("%d events, largest gap %v", len(arrivals), maxGap)
	}
	_ = s.Close()
	rec := readGroundTruth(t, gt)[0]
	var gtGap int64
	for i := 1; i < len(rec.ChunkNs); i++ {
		gtGap = max(gtGap, rec.ChunkNs[i]-rec.ChunkNs[i-1])
	}
	if rec.Status != "ok" || gtGap < int64(stall) || rec.Faults[0] != "stall" {
		t.Fatalf("ground truth status %s gap %v faults %v", rec.Status, time.Duration(gtGap), rec.Faults)
	}
	// Only the writer stalled: the engine's own e2e (4 steps of 1 ms) is shorter than the gap.
	if e2e := *rec.FinishedNs - *rec.ArrivalNs; e2e >= gtGap {
		t.Fatalf("engine e2e %v not shorter than the stall gap %v", time.Duration(e2e), time.Duration(gtGap))
	}
}

func TestFaultSlowHeaders(t *testing.T) {
	s := startSim(t, faultConfig(Faults{SlowHeaders: 1, SlowHeadersDuration: 150 * time.Millisecond}))
	t0 := time.Now()
	resp := post(t, s.URL(), chatBody("hi", 2, true, nil), nil) // returns at the headers
	d := time.Since(t0)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d < 150*time.Millisecond || resp.StatusCode != 200 {
		t.Fatalf("headers after %v, status %d", d, resp.StatusCode)
	}
}

func TestFaultMetrics(t *testing.T) {
	for _, c := range []struct {
		f      Faults
		status int
		ctype  string
	}{
		{Faults{Metrics503: 1}, 503, "text/plain; charset=utf-8"},
		{Faults{MetricsHTML: 1}, 200, "text/html; charset=utf-8"},
	} {
		s := startSim(t, faultConfig(c.f))
		resp, err := testClient.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.ctype || bytes.Contains(b, []byte("vllm:")) {
			t.Errorf("got %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}

func TestFaultRestart(t *testing.T) {
	cfg := faultConfig(Faults{RestartAt: 1500 * time.Millisecond, RestartDowntime: 150 * time.Millisecond})
	gt := withGroundTruth(t, &cfg)
	s := startSim(t, cfg)
	t0 := time.Now()
	resp := post(t, s.URL(), chatBody("before", 3, false, nil), nil)
	resp.Body.Close()
	before := scrape(t, s.URL())
	if time.Since(t0) > time.Second {
		t.Fatalf("setup took %v, too close to the restart", time.Since(t0))
	}
	start0 := mustSample(t, before, "process_start_time_seconds", nil)
	created0 := mustSample(t, before, "vllm:prompt_tokens_created", engine0)
	if v := mustSample(t, before, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); v != 1 {
		t.Fatalf("before restart: %v successes", v)
	}
	// A long stream in flight is dropped by the restart.
	long := post(t, s.URL(), chatBody("in flight", 3000, true, map[string]any{"ignore_eos": true}), map[string]string{"X-Request-Id": "inflight"})
	_, err := io.ReadAll(long.Body)
	long.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("in-flight stream: %v", err)
	}
	// During the downtime /health and chat answer 503.
	hr, err := testClient.Get(s.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != 503 {
		t.Errorf("/health during downtime: %d", hr.StatusCode)
	}
	time.Sleep(cfg.Faults.RestartDowntime + 50*time.Millisecond)
	hr, err = testClient.Get(s.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != 200 {
		t.Errorf("/health after downtime: %d", hr.StatusCode)
	}
	after := scrape(t, s.URL())
	if v := mustSample(t, after, "process_start_time_seconds", nil); v <= start0 {
		t.Errorf("process_start_time_seconds %v, before %v", v, start0)
	}
	if v := mustSample(t, after, "vllm:prompt_tokens_created", engine0); v <= created0 {
		t.Errorf("_created %v, before %v", v, created0)
	}
	if v := mustSample(t, after, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); v != 0 {
		t.Errorf("counters did not start again: %v", v)
	}
	if v := mustSample(t, after, "vllm:num_requests_running", engine0); v != 0 {
		t.Errorf("running after restart: %v", v)
	}
	_ = s.Close()
	g := gtByID(t, readGroundTruth(t, gt))
	if g["inflight"].Status != "restart" {
		t.Errorf("in-flight status %q", g["inflight"].Status)
	}
}

func TestShutdownDropsInFlight(t *testing.T) {
	s, err := Start(t.Context(), fastConfig(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, s.URL(), chatBody("x", 3000, true, map[string]any{"ignore_eos": true}), nil)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("in-flight stream after Close: %v", err)
	}
	if _, err := http.Get(s.URL() + "/health"); err == nil {
		t.Errorf("still serving after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartContextCancelCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, fastConfig(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testClient.Get(s.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still listening after the context was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
