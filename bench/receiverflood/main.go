// Command receiverflood floods the OTLP span receiver (package receiver) at a multiple of its
// capacity and reports its answers, its CPU and its memory. Used by bench/receiver.sh,
// bench/receiver-flood.sh and bench/collector.sh.
//
// The receiver runs in a child process (this binary with -serve), consuming every span the way
// `inferprobe profile` does (-consumer file: each span's infer.vllm_span line written by an
// artifact.Writer into a file, removed at exit; marshal: the line encoded and dropped; noop:
// no sink; norun: the daemon's span feed with no run attached, norun.go), with GOMAXPROCS=-procs, pinned with taskset to -taskset CPUs
// when given. The parent first measures the receiver's capacity (spans/s accepted with -clients
// senders posting back to back), then offers -factor times that rate for -duration as an open
// loop: exports of -batch vLLM-like spans over -transport (http: OTLP/HTTP protobuf; grpc:
// OTLP/gRPC over 32 connections), dispatched on schedule whether or not earlier ones were
// answered (at most -inflight at once; a dispatch that finds none free is counted as "not
// sent"). It samples the child's RSS (VmRSS) every 20 ms and its CPU time (utime+stime) over
// each window, and prints the answers by status, the accepted and offered span rates, the
// accepted share of the capacity (by wall time and per receiver CPU-second), the peak RSS and
// the receiver's counters; -json adds one "RESULT {...}" line. It exits 1 when the flood drew
// no 429/503 answer or the peak RSS reached -max-rss-mib.
//
// With -bombs it sends the element bombs of bombs.go instead (one at a time, four at once for
// one shape), printing each answer and the child's peak RSS; it exits 1 when a bomb is accepted,
// a real export afterwards is not, or the RSS reaches -max-rss-mib (256 by default there).
//
// With -refusals it measures what one refused export costs the receiver (refusals.go): a
// consumer that never returns, so that the queue fills, then -clients back-to-back senders
// whose every export is refused before it is read; it prints the refusals per second and the
// receiver's CPU microseconds per refusal.
//
// With -compare it measures capacities side by side (compare.go): an OpenTelemetry Collector
// (-collector BINARY: otlp receiver → nop exporter) against this receiver's real path (file),
// its no-op path (noop: decoded and converted, no sink) and the daemon's path with no run
// attached (norun), HTTP and gRPC, -runs times alternating.
//
// Usage: go run ./bench/receiverflood [-factor 10] [-duration 10s] [-procs 1] [-transport http|grpc] [-bombs]
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
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
	compareMode := flag.Bool("compare", false, "measure capacities side by side with an OpenTelemetry Collector (see compare.go)")
	collector := flag.String("collector", "", "with -compare: the otelcol binary")
	runs := flag.Int("runs", 3, "with -compare: runs of each target, alternating")
	procs := flag.Int("procs", 1, "GOMAXPROCS of the receiver process")
	cpus := flag.String("taskset", "", "pin the receiver process to these CPUs (taskset -c LIST); empty: not pinned")
	consumer := flag.String("consumer", "file", "what the consumer does with each span: file (its artifact line into a file), marshal (encode the line), noop (no sink) or norun (the daemon with no run attached: see norun.go)")
	transport := flag.String("transport", "http", "the flood's protocol: http (OTLP/HTTP protobuf) or grpc")
	factor := flag.Float64("factor", 10, "offered load as a multiple of the measured capacity")
	duration := flag.Duration("duration", 10*time.Second, "flood duration")
	calibrate := flag.Duration("calibrate", 3*time.Second, "capacity measurement duration")
	clients := flag.Int("clients", 4, "back-to-back senders while measuring capacity")
	batch := flag.Int("batch", 512, "spans per export")
	inflight := flag.Int("inflight", 1024, "most exports in flight during the flood")
	maxRSS := flag.Int("max-rss-mib", 1024, "fail when the receiver's peak RSS reaches this many MiB")
	cpuProfile := flag.String("cpuprofile", "", "write the receiver's CPU profile over the flood to this file, and over the capacity measurement to this file + \".capacity\"")
	jsonOut := flag.Bool("json", false, "print one RESULT line of JSON with the figures")
	refusals := flag.Bool("refusals", false, "measure the receiver's CPU per refused export (see refusals.go) instead of a flood")
	flag.Parse()
	if *serve {
		runServer(*procs, *consumer)
		return
	}
	cfg := config{procs: *procs, cpus: *cpus, consumer: *consumer, transport: *transport, factor: *factor,
		duration: *duration, calibrate: *calibrate, clients: *clients, batch: *batch, inflight: *inflight,
		maxRSSMiB: *maxRSS, cpuProfile: *cpuProfile, json: *jsonOut}
	if cfg.transport != "http" && cfg.transport != "grpc" {
		fmt.Fprintf(os.Stderr, "receiverflood: -transport %q: want http or grpc\n", cfg.transport)
		os.Exit(2)
	}
	var err error
	switch {
	case *compareMode:
		err = runCompare(cfg, *collector, *runs)
	case *refusals:
		err = runRefusals(cfg)
	case *bombMode:
		if !flagSet("max-rss-mib") {
			cfg.maxRSSMiB = 256
		}
		err = runBombs(cfg)
	default:
		err = runFlood(cfg)
	}
	if err != nil {
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

// unstall is closed at SIGTERM: the "stall" consumer's Write returns then.
var unstall = make(chan struct{})

// runServer is the child: a receiver listening for OTLP/HTTP and OTLP/gRPC on 127.0.0.1 (its
// own servers, as `profile` runs it) and a second listener serving /stats and /debug/pprof/.
// It prints "listening HTTPADDR GRPCADDR STATSADDR" and serves until SIGTERM.
func runServer(procs int, consumer string) {
	runtime.GOMAXPROCS(procs)
	var sink artifact.Sink
	var file *artifact.Writer
	switch consumer {
	case "file":
		w, err := artifact.NewWriter(filepath.Join(os.TempDir(), fmt.Sprintf("receiverflood-%d.jsonl", os.Getpid())))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		file, sink = w, w
	case "marshal":
		sink = artifact.SinkFunc(func(rec artifact.Record) error {
			_, err := artifact.MarshalLine(rec)
			return err
		})
	case "noop":
	case "norun":
		sink = &noRunFeed{}
	case "stall": // returns only at SIGTERM: the queue fills and every later export is refused before it is read
		sink = artifact.SinkFunc(func(artifact.Record) error { <-unstall; return nil })
	default:
		fmt.Fprintf(os.Stderr, "-consumer %q: want file, marshal, noop or norun\n", consumer)
		os.Exit(2)
	}
	r := receiver.New(receiver.Options{SessionID: "flood", RunID: "flood", Sink: sink})
	if err := r.Listen(context.Background(), "127.0.0.1:0", "127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		st := r.Stats()
		st.BindErrors = nil
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println("listening", r.HTTPAddr(), r.GRPCAddr(), ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	close(unstall)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = r.Shutdown(ctx)
	if file != nil {
		_ = file.Close()
		_ = os.Remove(file.Path())
	}
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
