package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// compareTargets are the receivers -compare measures, in the order of each run.
var compareTargets = []string{"collector", "file", "noop", "norun"}

// compareNames describe each target in the table.
var compareNames = map[string]string{
	"collector": "otelcol v0.165.0: otlp receiver → nop exporter",
	"file":      "inferprobe: real path (span → infer.vllm_span → artifact file)",
	"noop":      "inferprobe: no-op path (decoded, converted, no sink)",
	"norun":     "inferprobe: daemon, no run attached (spans unrouted)",
}

// runCompare measures, runs times in turn, the capacity (spans/s accepted from cfg.clients
// back-to-back senders over cfg.calibrate, and per receiver CPU-second) of the Collector at
// collectorBin and of this receiver's file, noop and norun paths, over OTLP/HTTP protobuf and gRPC,
// each process with GOMAXPROCS=cfg.procs pinned to cfg.cpus; then prints the medians (min–max)
// and each inferprobe path's ratio to the Collector.
func runCompare(cfg config, collectorBin string, runs int) error {
	if collectorBin == "" {
		return fmt.Errorf("-compare needs -collector BINARY")
	}
	perSec := map[string][]float64{}
	perCPU := map[string][]float64{}
	for run := 1; run <= runs; run++ {
		for _, transport := range []string{"http", "grpc"} {
			for _, kind := range compareTargets {
				c := cfg
				c.transport = transport
				fmt.Printf("run %d, %s, %s: ", run, transport, kind)
				s, cpu, err := measureOne(c, kind, collectorBin)
				if err != nil {
					return fmt.Errorf("run %d %s %s: %w", run, transport, kind, err)
				}
				key := transport + " " + kind
				perSec[key] = append(perSec[key], s)
				perCPU[key] = append(perCPU[key], cpu)
			}
		}
	}
	fmt.Printf("\nspans/s accepted from %d back-to-back senders of %d-span exports, GOMAXPROCS=%d, taskset %q, %d runs: median (min–max)\n",
		cfg.clients, cfg.batch, cfg.procs, cfg.cpus, runs)
	fmt.Printf("%-5s %-64s %-26s %-26s %s\n", "", "receiver", "spans/s", "spans per CPU-s", "ratio to otelcol (wall, CPU)")
	for _, transport := range []string{"http", "grpc"} {
		base := transport + " collector"
		for _, kind := range compareTargets {
			key := transport + " " + kind
			ratio := ""
			if kind != "collector" {
				ratio = fmt.Sprintf("%.2f, %.2f", median(perSec[key])/median(perSec[base]), median(perCPU[key])/median(perCPU[base]))
			}
			fmt.Printf("%-5s %-64s %-26s %-26s %s\n", transport, compareNames[kind], spread(perSec[key]), spread(perCPU[key]), ratio)
		}
	}
	return nil
}

// measureOne starts one target, measures its capacity and stops it.
func measureOne(cfg config, kind, collectorBin string) (perSec, perCPU float64, err error) {
	var t *target
	var stop func()
	if kind == "collector" {
		t, stop, err = startCollector(cfg, collectorBin)
	} else {
		cfg.consumer = kind
		t, stop, err = startChild(cfg)
	}
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	time.Sleep(200 * time.Millisecond)
	return t.capacity(cfg.calibrate, cfg.clients)
}

// collectorConfig is the Collector's configuration: the otlp receiver on grpcAddr and
// httpAddr into the nop exporter, its own telemetry off.
func collectorConfig(grpcAddr, httpAddr string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  nop:
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [nop]
`, grpcAddr, httpAddr)
}

// startCollector runs the Collector at bin (GOMAXPROCS=cfg.procs, pinned to cfg.cpus) on two
// free loopback ports and waits, at most 30 s, until it accepts an export over HTTP.
func startCollector(cfg config, bin string) (*target, func(), error) {
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "receiverflood-otelcol")
	if err != nil {
		return nil, nil, err
	}
	conf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(conf, []byte(collectorConfig(grpcAddr, httpAddr)), 0o644); err != nil {
		return nil, nil, err
	}
	cmd := command(cfg.cpus, bin, "--config", conf)
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", cfg.procs))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	stopCmd := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	t, err := newTarget(cfg, "http://"+httpAddr+"/v1/traces", grpcAddr, "", cmd.Process.Pid)
	if err != nil {
		stopCmd()
		return nil, nil, err
	}
	probe := httpSender(t.client, t.url, body(1))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, err := probe(); err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.closeRPC()
			stopCmd()
			return nil, nil, fmt.Errorf("the Collector did not accept an export within 30 s")
		}
	}
	return t, func() { t.closeRPC(); stopCmd() }, nil
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is "median (min–max)" of v, rounded to whole numbers.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return strings.TrimSpace(fmt.Sprintf("%.0f (%.0f–%.0f)", median(s), s[0], s[len(s)-1]))
}
