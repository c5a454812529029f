// Command receiverflood floods the OTLP span receiver (package receiver) at a multiple of its
// capacity and reports its answers and its memory. Used by bench/receiver.sh.
//
// The receiver runs in a child process (this binary with -serve), consuming every span the way
// `inferprobe profile` does (encoding its infer.vllm_span line), with GOMAXPROCS=-procs. The
// parent first measures the receiver's capacity (spans/s accepted with -clients senders posting
// back to back), then offers -factor times that rate for -duration as an open loop: OTLP/HTTP
// protobuf exports of -batch vLLM-like spans, dispatched on schedule whether or not earlier ones
// were answered (at most -inflight at once; a dispatch that finds none free is counted as
// "not sent"). It samples the child's RSS (VmRSS) every 20 ms and prints the answers by status,
// the accepted and offered span rates, the peak RSS and the receiver's counters. It exits 1 when
// the flood drew no 429/503 answer or the peak RSS reached -max-rss-mib.
//
// Usage: go run ./bench/receiverflood [-factor 10] [-duration 10s] [-procs 1]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/receiver"
)

func main() {
	serve := flag.Bool("serve", false, "run the receiver (child mode)")
	procs := flag.Int("procs", 1, "GOMAXPROCS of the receiver process")
	consumer := flag.String("consumer", "marshal", "what the consumer does with each span: marshal (encode its artifact line) or noop")
	factor := flag.Float64("factor", 10, "offered load as a multiple of the measured capacity")
	duration := flag.Duration("duration", 10*time.Second, "flood duration")
	calibrate := flag.Duration("calibrate", 3*time.Second, "capacity measurement duration")
	clients := flag.Int("clients", 4, "back-to-back senders while measuring capacity")
	batch := flag.Int("batch", 512, "spans per export")
	inflight := flag.Int("inflight", 1024, "most exports in flight during the flood")
	maxRSS := flag.Int("max-rss-mib", 1024, "fail when the receiver's peak RSS reaches this many MiB")
	flag.Parse()
	if *serve {
		runServer(*procs, *consumer)
		return
	}
	if err := runFlood(*procs, *consumer, *factor, *duration, *calibrate, *clients, *batch, *inflight, *maxRSS); err != nil {
		fmt.Fprintln(os.Stderr, "receiverflood:", err)
		os.Exit(1)
	}
}

// runServer is the child: a receiver on 127.0.0.1:0 behind a mux that also serves /stats.
func runServer(procs int, consumer string) {
	runtime.GOMAXPROCS(procs)
	var sink artifact.Sink = artifact.SinkFunc(func(rec artifact.Record) error {
		if _, err := artifact.MarshalLine(rec); err != nil {
			panic(err)
		}
		return nil
	})
	if consumer == "noop" {
		sink = nil
	}
	r := receiver.New(receiver.Options{SessionID: "flood", RunID: "flood", Sink: sink})
	mux := http.NewServeMux()
	mux.Handle(receiver.TracesPath, r)
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		st := r.Stats()
		st.BindErrors = nil
		_ = json.NewEncoder(w).Encode(st)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadTimeout: 10 * time.Second, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println("listening", ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = r.Shutdown(ctx)
}

// body is one OTLP/HTTP protobuf export of n spans shaped like vLLM's llm_request spans.
func body(n int) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vllm-server")
	rs.Resource().Attributes().PutStr("vllm.instrumenting_module_name", "vllm.llm_engine")
	rs.Resource().Attributes().PutInt("vllm.process_id", 4242)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("vllm.llm_engine")
	start := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		sp := ss.Spans().AppendEmpty()
		var tid [16]byte
		var sid [8]byte
		binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
		binary.BigEndian.PutUint64(sid[:], uint64(i)+1)
		sp.SetTraceID(pcommon.TraceID(tid))
		sp.SetSpanID(pcommon.SpanID(sid))
		sp.SetName("llm_request")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(pcommon.Timestamp(start + int64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(start + int64(i)*1000 + 489_659_671))
		a := sp.Attributes()
		a.PutDouble(artifact.AttrTimeToFirstToken, 0.04058551788330078)
		a.PutDouble(artifact.AttrE2E, 0.48922157287597656)
		a.PutDouble(artifact.AttrTimeInQueue, 3.4356489777565e-05)
		a.PutInt(artifact.AttrPromptTokens, 512)
		a.PutInt(artifact.AttrCompletionTokens, 128)
		a.PutDouble(artifact.AttrTimeInModelPrefill, 0.027541324496269226)
		a.PutDouble(artifact.AttrTimeInModelDecode, 0.44931017979979515)
		a.PutDouble(artifact.AttrTimeInModelInference, 0.4768515042960644)
		a.PutStr(artifact.AttrRequestID, fmt.Sprintf("chatcmpl-inferprobe-flood-c8_in512_out128_measured_0_%d", i))
		a.PutDouble(artifact.AttrTopP, 1.0)
		a.PutInt(artifact.AttrMaxTokens, 128)
		a.PutInt(artifact.AttrN, 1)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

type answers struct {
	mu       sync.Mutex
	byStatus map[int]int
	errors   int
	errText  string
}

func (a *answers) add(code int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errors++
		if a.errText == "" {
			a.errText = err.Error()
		}
		return
	}
	a.byStatus[code]++
}

func send(client *http.Client, url string, b []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// rssKiB reads a VmRSS/VmHWM-style line of /proc/PID/status in KiB.
func rssKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line[len(field)+1:])
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

func stats(client *http.Client, base string) (receiver.Stats, error) {
	var st receiver.Stats
	resp, err := client.Get(base + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func runFlood(procs int, consumer string, factor float64, duration, calibrate time.Duration, clients, batch, inflight, maxRSS int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(exe, "-serve", "-procs", strconv.Itoa(procs), "-consumer", consumer)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() {
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		return fmt.Errorf("child did not start: %q %v", line, err)
	}
	base := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	url := base + receiver.TracesPath
	pid := child.Process.Pid
	payload := body(batch)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inflight, DisableCompression: true}, Timeout: 30 * time.Second}
	fmt.Printf("receiver pid %d, GOMAXPROCS=%d, consumer=%s; exports of %d spans (%d bytes); %d cores here\n",
		pid, procs, consumer, batch, len(payload), runtime.NumCPU())

	// Capacity: back-to-back senders; a refused export is retried after the advertised delay's
	// worth of a short pause, so the figure is what the receiver sustains.
	var accepted atomic.Int64
	deadline := time.Now().Add(calibrate)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code, err := send(client, url, payload)
				if err != nil {
					return
				}
				if code == 200 {
					accepted.Add(1)
				} else {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	t0 := time.Now()
	wg.Wait()
	capacity := float64(accepted.Load()*int64(batch)) / time.Since(t0).Seconds()
	fmt.Printf("capacity: %.0f spans/s (%d exports accepted in %v by %d back-to-back senders)\n", capacity, accepted.Load(), calibrate, clients)
	if capacity <= 0 {
		return fmt.Errorf("no export accepted while measuring capacity")
	}
	// Let the queue drain before the flood.
	for i := 0; i < 200; i++ {
		if st, err := stats(client, base); err == nil && st.QueuedSpans == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	before, _ := stats(client, base)

	// Flood: open loop at factor × capacity.
	rate := factor * capacity / float64(batch) // exports per second
	interval := time.Duration(float64(time.Second) / rate)
	fmt.Printf("flood: %.0fx capacity = %.0f spans/s offered (%.1f exports/s) for %v, at most %d in flight\n",
		factor, factor*capacity, rate, duration, inflight)
	ans := &answers{byStatus: map[int]int{}}
	slots := make(chan struct{}, inflight)
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := rssKiB(pid, "VmRSS"); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	var sent, notSent int
	start := time.Now()
	end := start.Add(duration)
	var flood sync.WaitGroup
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		default:
			notSent++
			continue
		}
		sent++
		flood.Add(1)
		go func() {
			defer flood.Done()
			defer func() { <-slots }()
			ans.add(send(client, url, payload))
		}()
	}
	window := time.Since(start) // the dispatch window: offered rates are over it
	flood.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	sampler.Wait()
	after, err := stats(client, base)
	if err != nil {
		return err
	}
	hwm := rssKiB(pid, "VmHWM")
	ok200 := ans.byStatus[200]
	refused := ans.byStatus[429] + ans.byStatus[503]
	fmt.Printf("answers: %d sent, %d not sent (no free sender): 200=%d 429=%d 503=%d other=%v transport errors=%d %s\n",
		sent, notSent, ok200, ans.byStatus[429], ans.byStatus[503], others(ans.byStatus), ans.errors, ans.errText)
	fmt.Printf("spans: offered %.0f/s (sent %.0f/s) over the %.1f s dispatch window, accepted %.0f/s over %.1f s; receiver: queue_full %d, busy %d, delivered %d, dropped %d\n",
		float64((sent+notSent)*batch)/window.Seconds(), float64(sent*batch)/window.Seconds(), window.Seconds(),
		float64(ok200*batch)/elapsed.Seconds(), elapsed.Seconds(),
		after.QueueFull-before.QueueFull, after.Busy-before.Busy, after.SpansDelivered-before.SpansDelivered, after.SpansDropped)
	fmt.Printf("receiver RSS: peak sampled %.1f MiB, VmHWM %.1f MiB (limit %d MiB)\n", float64(peak.Load())/1024, float64(hwm)/1024, maxRSS)
	if refused == 0 {
		return fmt.Errorf("the flood drew no 429/503 answer")
	}
	if max(peak.Load(), hwm) >= int64(maxRSS)*1024 {
		return fmt.Errorf("peak RSS %d KiB reached the %d MiB limit", max(peak.Load(), hwm), maxRSS)
	}
	return nil
}

func others(m map[int]int) map[int]int {
	o := map[int]int{}
	for k, v := range m {
		if k != 200 && k != 429 && k != 503 {
			o[k] = v
		}
	}
	return o
}
