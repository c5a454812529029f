package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inferprobe/inferprobe/receiver"
)

// config is the flood's settings, from the flags.
type config struct {
	procs      int           // GOMAXPROCS of the receiver process
	cpus       string        // taskset -c list for the receiver process; "" not pinned
	consumer   string        // "file", "marshal" or "noop"
	transport  string        // "http" or "grpc"
	factor     float64       // offered load as a multiple of the capacity
	duration   time.Duration // flood duration
	calibrate  time.Duration // capacity measurement duration
	clients    int           // back-to-back senders while measuring capacity
	batch      int           // spans per export
	inflight   int           // most exports in flight during the flood
	maxRSSMiB  int           // the peak RSS that fails the run
	cpuProfile string        // file for the receiver's CPU profile over the flood; "" none
	json       bool          // print a RESULT line
}

// target is the receiver process the parent sends to.
type target struct {
	client   *http.Client
	statsURL string // http://host:port of /stats and /debug/pprof; "" when the target has none
	url      string // the OTLP/HTTP traces URL
	grpcAddr string // the OTLP/gRPC address
	pid      int
	payload  []byte // one export of batch spans
	batch    int
	send     sender // one export over the configured transport
	closeRPC func()
}

// newTarget is the target at the given addresses, sending over transport.
func newTarget(cfg config, url, grpcAddr, statsURL string, pid int) (*target, error) {
	t := &target{
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.inflight, DisableCompression: true}, Timeout: 30 * time.Second},
		statsURL: statsURL, url: url, grpcAddr: grpcAddr, pid: pid,
		payload: body(cfg.batch), batch: cfg.batch, closeRPC: func() {},
	}
	t.send = httpSender(t.client, t.url, t.payload)
	if cfg.transport == "grpc" {
		s, closeAll, err := grpcSenders(grpcAddr, grpcConns, t.payload)
		if err != nil {
			return nil, err
		}
		t.send, t.closeRPC = s, closeAll
	}
	return t, nil
}

// result is one flood's figures (the RESULT line).
type result struct {
	Transport         string  `json:"transport"`
	CapacitySpansS    float64 `json:"capacity_spans_s"`
	CapacitySpansCPUS float64 `json:"capacity_spans_per_cpu_s"`
	FloodSpansS       float64 `json:"flood_accepted_spans_s"`
	FloodSpansCPUS    float64 `json:"flood_accepted_spans_per_cpu_s"`
	Ratio             float64 `json:"ratio"`
	RatioCPU          float64 `json:"ratio_per_cpu_s"`
	PeakRSSMiB        float64 `json:"peak_rss_mib"`
	Refused           int     `json:"refused"`
	TransportErrors   int     `json:"transport_errors"`
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
	fmt.Printf("receiver pid %d, GOMAXPROCS=%d, taskset %q, consumer=%s, transport=%s; exports of %d spans (%d bytes); %d cores here\n",
		t.pid, cfg.procs, cfg.cpus, cfg.consumer, cfg.transport, cfg.batch, len(t.payload), runtime.NumCPU())
	stopSampling := sampleRSS(t.pid)
	capDone := t.profile(capacityProfile(cfg.cpuProfile), cfg.calibrate)
	capacity, capCPU, err := t.capacity(cfg.calibrate, cfg.clients)
	<-capDone
	if err != nil {
		return err
	}
	t.waitDrained()
	before, _ := stats(t.client, t.statsURL)
	rate := cfg.factor * capacity / float64(cfg.batch) // exports per second
	fmt.Printf("flood: %.0fx capacity = %.0f spans/s offered (%.1f exports/s) for %v, at most %d in flight\n",
		cfg.factor, cfg.factor*capacity, rate, cfg.duration, cfg.inflight)
	profDone := t.profile(cfg.cpuProfile, cfg.duration)
	cpu0 := cpuTime(t.pid)
	res := t.flood(rate, cfg.duration, cfg.inflight)
	floodCPU := cpuTime(t.pid) - cpu0
	<-profDone
	peak := stopSampling()
	after, err := stats(t.client, t.statsURL)
	if err != nil {
		return err
	}
	hwm := rssKiB(t.pid, "VmHWM")
	res.print(cfg.batch, before, after)
	out := result{Transport: cfg.transport, CapacitySpansS: capacity, CapacitySpansCPUS: capCPU,
		FloodSpansS: float64(res.ans.byStatus[200]*cfg.batch) / res.elapsed.Seconds(),
		PeakRSSMiB:  float64(max(peak, hwm)) / 1024, Refused: res.ans.byStatus[429] + res.ans.byStatus[503],
		TransportErrors: res.ans.errors}
	if floodCPU > 0 {
		out.FloodSpansCPUS = float64(res.ans.byStatus[200]*cfg.batch) / floodCPU.Seconds()
		out.RatioCPU = out.FloodSpansCPUS / capCPU
	}
	out.Ratio = out.FloodSpansS / capacity
	fmt.Printf("accepted under the flood: %.0f spans/s = %.0f%% of capacity; per receiver CPU-second %.0f = %.0f%% of capacity's %.0f (receiver CPU %.2f s over %.1f s)\n",
		out.FloodSpansS, 100*out.Ratio, out.FloodSpansCPUS, 100*out.RatioCPU, capCPU, floodCPU.Seconds(), res.elapsed.Seconds())
	fmt.Printf("receiver RSS: peak sampled %.1f MiB, VmHWM %.1f MiB (limit %d MiB)\n", float64(peak)/1024, float64(hwm)/1024, cfg.maxRSSMiB)
	if cfg.json {
		b, _ := json.Marshal(out)
		fmt.Printf("RESULT %s\n", b)
	}
	if out.Refused == 0 {
		return fmt.Errorf("the flood drew no 429/503 answer")
	}
	if max(peak, hwm) >= int64(cfg.maxRSSMiB)*1024 {
		return fmt.Errorf("peak RSS %d KiB reached the %d MiB limit", max(peak, hwm), cfg.maxRSSMiB)
	}
	return nil
}

// profile fetches the child's CPU profile over d into file (nothing when file is ""); the
// returned channel is closed once it is written.
// capacityProfile names the capacity measurement's CPU profile beside the flood's
// (FILE.capacity); "" when there is none.
func capacityProfile(file string) string {
	if file == "" {
		return ""
	}
	return file + ".capacity"
}

func (t *target) profile(file string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if file == "" || t.statsURL == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		secs := max(1, int(d.Seconds()))
		resp, err := t.client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.statsURL, secs))
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errorsJoin(err, f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
		}
	}()
	return done
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// command is argv run under taskset -c cpus when cpus is set.
func command(cpus string, argv ...string) *exec.Cmd {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// startChild runs this binary with -serve and waits for its "listening HTTP GRPC STATS"
// line. stop sends the child SIGTERM and waits for it.
func startChild(cfg config) (t *target, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	child := command(cfg.cpus, exe, "-serve", "-procs", strconv.Itoa(cfg.procs), "-consumer", cfg.consumer)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := child.Start(); err != nil {
		return nil, nil, err
	}
	stopChild := func() {
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(strings.TrimPrefix(line, "listening "))
	if err != nil || !strings.HasPrefix(line, "listening ") || len(f) != 3 {
		stopChild()
		return nil, nil, fmt.Errorf("child did not start: %q %v", line, err)
	}
	t, err = newTarget(cfg, "http://"+f[0]+receiver.TracesPath, f[1], "http://"+f[2], child.Process.Pid)
	if err != nil {
		stopChild()
		return nil, nil, err
	}
	return t, func() { t.closeRPC(); stopChild() }, nil
}

// capacity measures the spans/s the receiver accepts from clients back-to-back senders over
// d, and the spans it accepted per second of its CPU time: a refused export is retried after
// a short pause, so the figure is what the receiver sustains. It fails when no export was
// accepted.
func (t *target) capacity(d time.Duration, clients int) (perSec, perCPUSec float64, err error) {
	var accepted atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)
	t0 := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code, err := t.send()
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
	wg.Wait()
	spans := float64(accepted.Load() * int64(t.batch))
	perSec = spans / time.Since(t0).Seconds()
	if cpu := cpuTime(t.pid) - cpu0; cpu > 0 {
		perCPUSec = spans / cpu.Seconds()
	}
	fmt.Printf("capacity: %.0f spans/s, %.0f spans per receiver CPU-second (%d exports accepted in %v by %d back-to-back senders)\n",
		perSec, perCPUSec, accepted.Load(), d, clients)
	if perSec <= 0 {
		return 0, 0, fmt.Errorf("no export accepted while measuring capacity")
	}
	return perSec, perCPUSec, nil
}

// waitDrained waits, at most 10 s, for the receiver's queue to empty.
func (t *target) waitDrained() {
	for i := 0; i < 200 && t.statsURL != ""; i++ {
		if st, err := stats(t.client, t.statsURL); err == nil && st.QueuedSpans == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
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
			res.ans.add(t.send())
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
	fmt.Printf("spans: offered %.0f/s (sent %.0f/s) over the %.1f s dispatch window, accepted %.0f/s over %.1f s; receiver: queue_full %d, busy %d, memory_busy %d, delivered %d, dropped %d\n",
		float64((res.sent+res.notSent)*batch)/res.window.Seconds(), float64(res.sent*batch)/res.window.Seconds(), res.window.Seconds(),
		float64(ok200*batch)/res.elapsed.Seconds(), res.elapsed.Seconds(),
		after.QueueFull-before.QueueFull, after.Busy-before.Busy, after.MemoryBusy-before.MemoryBusy,
		after.SpansDelivered-before.SpansDelivered, after.SpansDropped)
}
