// Command genartifact writes a realistic synthetic profile artifact for the analyze
// benchmark (bench/analyze-1m.sh): the records of a Poisson open-loop run (package
// internal/synth), the same for the same flags.
//
// Usage: go run ./bench/genartifact -out FILE [-requests 1000000] [-cases 2] [-seed 1] [-ttft-scale 1]
//
// With -shards N, -out is a directory and the run is written as the artifacts of N shards
// (shard-K.jsonl: the requests i ≡ K mod N), as `profile --shards N` writes them, for the
// merge benchmark (bench/merge-shards.sh).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
)

func main() {
	out := flag.String("out", "", "artifact path to write (required)")
	total := flag.Int("requests", 1_000_000, "measured requests in all, split evenly over the cases")
	ncases := flag.Int("cases", 2, "Poisson cases (rates 250, 500, 750, ... req/s)")
	seed := flag.Int64("seed", 1, "seed of the schedule, prompts and drawn latencies")
	shards := flag.Int("shards", 0, "write the run as the artifacts of this many shards into the directory -out")
	ttftScale := flag.Float64("ttft-scale", 1, "multiply every TTFT by this (the same workload, a slower or faster first token: compare's benchmark)")
	flag.Parse()
	if *out == "" || *ncases < 1 || *total < *ncases {
		flag.Usage()
		os.Exit(2)
	}
	gen := generate
	if *shards > 0 {
		gen = func(dir string, run synth.Run) error { return generateShards(dir, run, *shards) }
	}
	if err := gen(*out, synth.Run{Requests: *total, Cases: *ncases, Seed: *seed, TTFTScale: *ttftScale}); err != nil {
		fmt.Fprintln(os.Stderr, "genartifact:", err)
		os.Exit(1)
	}
}

func generate(path string, run synth.Run) error {
	w, err := artifact.NewWriter(path)
	if err != nil {
		return err
	}
	if err := run.Write(w); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

func generateShards(dir string, run synth.Run, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s, err := newShardSink(dir, n)
	if err != nil {
		return err
	}
	if err := run.Write(s); err != nil {
		_ = s.Close()
		return err
	}
	return s.Close()
}
