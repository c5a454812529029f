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
// With -bombs it sends the element bombs of bombs.go instead (one at a time, four at once for
// one shape), printing each answer and the child's peak RSS; it exits 1 when a bomb is accepted,
// a real export afterwards is not, or the RSS reaches -max-rss-mib (256 by default there).
//
// Usage: go run ./bench/receiverflood [-factor 10] [-duration 10s] [-procs 1] [-bombs]
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
	bombMode := flag.Bool("bombs", false, "send the element bombs (see bombs.go) instead of a flood, with -max-rss-mib 256 unless set")
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
	cfg := config{procs: *procs, consumer: *consumer, factor: *factor, duration: *duration, calibrate: *calibrate,
		clients: *clients, batch: *batch, inflight: *inflight, maxRSSMiB: *maxRSS}
	if *bombMode {
		if !flagSet("max-rss-mib") {
			cfg.maxRSSMiB = 256
		}
		if err := runBombs(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "receiverflood:", err)
			os.Exit(1)
		}
		return
	}
	if err := runFlood(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "receiverflood:", err)
		os.Exit(1)
	}
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// config is the flood's settings, from the flags.
type config struct {
	procs     int           // GOMAXPROCS of the receiver process
	consumer  string        // "marshal" or "noop"
	factor    float64       // offered load as a multiple of the capacity
	duration  time.Duration // flood duration
	calibrate time.Duration // capacity measurement duration
	clients   int           // back-to-back senders while measuring capacity
	batch     int           // spans per export
	inflight  int           // most exports in flight during the flood
	maxRSSMiB int           // the peak RSS that fails the run
}

// target is the child receiver the parent sends to.
type target struct {
	client  *http.Client
	base    string // http://host:port
	url     string // base + receiver.TracesPath
	pid     int
	payload []byte // one export of batch spans
	batch   int
}

// runFlood starts the child receiver, measures its capacity, floods it at cfg.factor times
// that and prints what came back. It fails when the flood drew no 429/503 answer or the
// child's peak RSS reached cfg.maxRSSMiB.
func runFlood(cfg config) error {
	t, stop, err := startChild(cfg)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("receiver pid %d, GOMAXPROCS=%d, consumer=%s; exports of %d spans (%d bytes); %d cores here\n",
		t.pid, cfg.procs, cfg.consumer, cfg.batch, len(t.payload), runtime.NumCPU())
	capacity, err := t.capacity(cfg.calibrate, cfg.clients)
	if err != nil {
		return err
	}
	t.waitDrained()
	before, _ := stats(t.client, t.base)
	rate := cfg.factor * capacity / float64(cfg.batch) // exports per second
	fmt.Printf("flood: %.0fx capacity = %.0f spans/s offered (%.1f exports/s) for %v, at most %d in flight\n",
		cfg.factor, cfg.factor*capacity, rate, cfg.duration, cfg.inflight)
	stopSampling := sampleRSS(t.pid)
	res := t.flood(rate, cfg.duration, cfg.inflight)
	peak := stopSampling()
	after, err := stats(t.client, t.base)
	if err != nil {
		return err
	}
	hwm := rssKiB(t.pid, "VmHWM")
	res.print(cfg.batch, before, after)
	fmt.Printf("receiver RSS: peak sampled %.1f MiB, VmHWM %.1f MiB (limit %d MiB)\n", float64(peak)/1024, float64(hwm)/1024, cfg.maxRSSMiB)
	if res.ans.byStatus[429]+res.ans.byStatus[503] == 0 {
		return fmt.Errorf("the flood drew no 429/503 answer")
	}
	if max(peak, hwm) >= int64(cfg.maxRSSMiB)*1024 {
		return fmt.Errorf("peak RSS %d KiB reached the %d MiB limit", max(peak, hwm), cfg.maxRSSMiB)
	}
	return nil
}

// startChild runs this binary with -serve and waits for its "listening ADDR" line. stop
// sends the child SIGTERM and waits for it.
func startChild(cfg config) (t *target, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	child := exec.Command(exe, "-serve", "-procs", strconv.Itoa(cfg.procs), "-consumer", cfg.consumer)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := child.Start(); err != nil {
		return nil, nil, err
	}
	stop = func() {
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		stop()
		return nil, nil, fmt.Errorf("child did not start: %q %v", line, err)
	}
	base := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	return &target{
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.inflight, DisableCompression: true}, Timeout: 30 * time.Second},
		base:    base,
		url:     base + receiver.TracesPath,
		pid:     child.Process.Pid,
		payload: body(cfg.batch),
		batch:   cfg.batch,
	}, stop, nil
}

// capacity measures the spans/s the receiver accepts from clients back-to-back senders over
// d: a refused export is retried after a short pause, so the figure is what the receiver
// sustains. It fails when no export was accepted.
func (t *target) capacity(d time.Duration, clients int) (float64, error) {
	var accepted atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code, err := send(t.client, t.url, t.payload)
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
	capacity := float64(accepted.Load()*int64(t.batch)) / time.Since(t0).Seconds()
	fmt.Printf("capacity: %.0f spans/s (%d exports accepted in %v by %d back-to-back senders)\n", capacity, accepted.Load(), d, clients)
	if capacity <= 0 {
		return 0, fmt.Errorf("no export accepted while measuring capacity")
	}
	return capacity, nil
}

// waitDrained waits, at most 10 s, for the receiver's queue to empty.
func (t *target) waitDrained() {
	for i := 0; i < 200; i++ {
		if st, err := stats(t.client, t.base); err == nil && st.QueuedSpans == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sampleRSS samples the VmRSS of process pid every 20 ms until the returned stop is
// called; stop returns the peak in KiB.
func sampleRSS(pid int) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
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
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		sampler.Wait()
		return peak.Load()
	}
}

// floodResult is what one flood drew.
type floodResult struct {
	ans           *answers
	sent, notSent int           // exports sent, and dispatches that found no free sender
	window        time.Duration // the dispatch window: offered rates are over it
	elapsed       time.Duration // until the last answer
}

// flood offers rate exports/s for d as an open loop: each export is dispatched on schedule
// whether or not earlier ones were answered, at most inflight at once (a dispatch that finds
// none free is counted, not sent). It returns once every sent export is answered.
func (t *target) flood(rate float64, d time.Duration, inflight int) floodResult {
	interval := time.Duration(float64(time.Second) / rate)
	res := floodResult{ans: &answers{byStatus: map[int]int{}}}
	slots := make(chan struct{}, inflight)
	start := time.Now()
	end := start.Add(d)
	var flood sync.WaitGroup
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case slots <- struct{}{}:
		default:
			res.notSent++
			continue
		}
		res.sent++
		flood.Add(1)
		go func() {
			defer flood.Done()
			defer func() { <-slots }()
			res.ans.add(send(t.client, t.url, t.payload))
		}()
	}
	res.window = time.Since(start)
	flood.Wait()
	res.elapsed = time.Since(start)
	return res
}

// print writes the answers by status and the offered and accepted span rates, with the
// receiver's counters between the before and after snapshots.
func (res floodResult) print(batch int, before, after receiver.Stats) {
	ans := res.ans
	ok200 := ans.byStatus[200]
	fmt.Printf("answers: %d sent, %d not sent (no free sender): 200=%d 429=%d 503=%d other=%v transport errors=%d %s\n",
		res.sent, res.notSent, ok200, ans.byStatus[429], ans.byStatus[503], others(ans.byStatus), ans.errors, ans.errText)
	fmt.Printf("spans: offered %.0f/s (sent %.0f/s) over the %.1f s dispatch window, accepted %.0f/s over %.1f s; receiver: queue_full %d, busy %d, delivered %d, dropped %d\n",
		float64((res.sent+res.notSent)*batch)/res.window.Seconds(), float64(res.sent*batch)/res.window.Seconds(), res.window.Seconds(),
		float64(ok200*batch)/res.elapsed.Seconds(), res.elapsed.Seconds(),
		after.QueueFull-before.QueueFull, after.Busy-before.Busy, after.SpansDelivered-before.SpansDelivered, after.SpansDropped)
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
