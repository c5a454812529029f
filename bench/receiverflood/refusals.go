package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// runRefusals starts a child whose consumer never returns, fills its queue, then has
// cfg.clients senders post exports back to back for cfg.duration, every one refused before
// it is read (503), and prints the refusals per second and the child's CPU per refusal. It
// fails when an export was accepted after the queue filled, or none was refused.
func runRefusals(cfg config) error {
	cfg.consumer = "stall"
	t, stop, err := startChild(cfg)
	if err != nil {
		return err
	}
	defer stop()
	for i := 0; i < 400; i++ { // 100,000 spans fill the queue: 196 exports of 512
		if code, err := t.send(); err != nil || code != 200 {
			break
		}
	}
	var refused, other atomic.Int64
	deadline := time.Now().Add(cfg.duration)
	profDone := t.profile(cfg.cpuProfile, cfg.duration)
	cpu0 := cpuTime(t.pid)
	t0 := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < cfg.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code, err := t.send()
				if err == nil && (code == 503 || code == 429) {
					refused.Add(1)
				} else {
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := cpuTime(t.pid) - cpu0
	<-profDone
	n := refused.Load()
	if n == 0 {
		return fmt.Errorf("no export was refused")
	}
	out := map[string]any{"transport": cfg.transport, "refusals_s": float64(n) / elapsed.Seconds(),
		"cpu_us_per_refusal": float64(cpu.Microseconds()) / float64(n), "other_answers": other.Load()}
	fmt.Printf("%s: %d exports of %d bytes refused in %.1f s (%.0f/s) by %d senders, receiver CPU %.2f s = %.1f µs per refusal; other answers %d\n",
		cfg.transport, n, len(t.payload), elapsed.Seconds(), out["refusals_s"], cfg.clients, cpu.Seconds(), out["cpu_us_per_refusal"], other.Load())
	if cfg.json {
		b, _ := json.Marshal(out)
		fmt.Printf("RESULT %s\n", b)
	}
	if other.Load() > 0 {
		return fmt.Errorf("%d exports were not refused", other.Load())
	}
	return nil
}
