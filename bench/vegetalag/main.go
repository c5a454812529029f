// Command vegetalag reads `vegeta encode --to csv` output on stdin (columns timestamp in unix
// ns, code, latency, bytes out, bytes in, error, body, attack, seq, …) of a constant-rate
// attack and prints the line bench/sseblast prints: vegeta's schedule puts hit seq at
// t0 + seq/rate, so a hit's dispatch lag is timestamp − (t0 + seq/rate). The results do not
// say when the attack began, so t0 is the earliest timestamp − seq/rate over all hits: the
// most punctual hit counts as lag 0 (every lag is ≥ 0, a lower bound of vegeta's own).
//
//	vegeta encode --to csv < results.bin | vegetalag -rate 500
package main

import (
	"cmp"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
)

func main() {
	rate := flag.Float64("rate", 0, "the attack's rate, hits per second (> 0)")
	flag.Parse()
	if *rate <= 0 {
		fmt.Fprintln(os.Stderr, "vegetalag: -rate must be > 0")
		os.Exit(2)
	}
	hits, ok, err := parseHits(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vegetalag:", err)
		os.Exit(5)
	}
	if len(hits) < 2 {
		fmt.Fprintln(os.Stderr, "vegetalag: fewer than 2 hits")
		os.Exit(5)
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.seq, b.seq) })
	// The attack's start is not in the results: anchor the schedule on the most punctual
	// hit (lag 0), which makes every lag ≥ 0 and is a lower bound of vegeta's true lags.
	t0 := math.Inf(1)
	for _, h := range hits {
		t0 = min(t0, float64(h.ts) - float64(h.seq) / *rate * 1e9)
	}
	lags := make([]float64, len(hits))
	first, last := hits[0].ts, hits[0].ts
	for i, h := range hits {
		intended := t0 + float64(h.seq) / *rate * 1e9
		lags[i] = (float64(h.ts) - intended) / 1e6
		first, last = min(first, h.ts), max(last, h.ts)
	}
	n := len(hits)
	slices.Sort(lags)
	q := func(p float64) float64 { return lags[int(p*float64(n-1))] }
	ach := float64(n-1) / (float64(last-first) / 1e9)
	fmt.Printf("requests=%d ok=%d scheduled_rate=%.3f achieved_rate=%.3f ratio=%.5f lag_p50_ms=%.3f lag_p99_ms=%.3f lag_max_ms=%.3f\n",
		n, ok, *rate, ach, ach / *rate, q(0.5), q(0.99), lags[n-1])
}

// hit is one vegeta result: its timestamp (unix ns) and sequence number.
type hit struct{ ts, seq int64 }

// parseHits reads vegeta's CSV results (at least 9 columns: timestamp, code, latency, bytes
// out, bytes in, error, body, attack, seq, …) and returns every hit and how many were
// successful (code 200, no error). A malformed row is an error naming its line.
func parseHits(in io.Reader) (hits []hit, ok int, err error) {
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return hits, ok, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", line, err)
		}
		if len(rec) < 9 {
			return nil, 0, fmt.Errorf("line %d: %d columns, want at least 9", line, len(rec))
		}
		ts, err1 := strconv.ParseInt(rec[0], 10, 64)
		seq, err2 := strconv.ParseInt(rec[8], 10, 64)
		if err1 != nil || err2 != nil || seq < 0 {
			return nil, 0, fmt.Errorf("line %d: timestamp %q or seq %q is not a (non-negative) integer", line, rec[0], rec[8])
		}
		if rec[1] == "200" && rec[5] == "" {
			ok++
		}
		hits = append(hits, hit{ts, seq})
	}
}
