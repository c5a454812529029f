// Command ratecheck reads a profile artifact and prints, per case, how closely dispatch
// followed the schedule: the scheduled offered rate (N−1 over the first→last intended
// arrival), the achieved rate (sent−1 over the first→last send), their ratio, the dispatch lag
// p50/p99/max in ms, TTFT p50/p99 in ms (send → first content), and the outcome counts. Used by bench/profile-rate.sh.
// With -truth FILE (bench/ssestub -truth) it adds how far each request's first content as the
// client stamped it (started_at_ns + ttft_ms) lies after the stub began writing that event:
// ttft_err_p50/p99/max_ms over the requests found in both (truth_n), and the share of them
// with an error under 0 or over 1 ms. On loopback the bytes reach the client's socket inside
// the stub's write, so the error is the client's stamping error: the kernel's receive
// timestamp is of the newest segment a read consumed, so a read that comes later than the
// next event stamps the first content with that next event's arrival.
//
// A rate over fewer than two arrivals is unknown and printed as 0, with ratio 0.
// Exit codes: 0 ok, 2 usage, 5 an unreadable or malformed artifact or truth file, an artifact
// with no measured request, or a truth file that holds none of the artifact's requests. An
// artifact whose last line was cut short is read without it, with a warning.
//
// Usage: go run ./bench/ratecheck [-truth FILE] ARTIFACT
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

type caseAcc struct {
	intended, sent []int64
	lags, ttfts    []float64
	ttftErrs       []float64
	status         map[string]int
}

func main() {
	truthPath := flag.String("truth", "", "bench/ssestub -truth file to measure the client's TTFT against")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ratecheck [-truth FILE] ARTIFACT (exit 5: bad artifact or truth file)")
		os.Exit(2)
	}
	truth, err := readTruth(*truthPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	a, err := artifact.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	if t := a.Stats.Truncated; t != nil {
		fmt.Fprintf(os.Stderr, "ratecheck: warning: %s: %s: what it held is not in the figures below\n", flag.Arg(0), t)
	}
	cases := map[string]*caseAcc{}
	var ids []string
	for i := range a.Requests {
		r := &a.Requests[i]
		if r.Phase != artifact.PhaseMeasured {
			continue
		}
		c := cases[r.CaseID]
		if c == nil {
			c = &caseAcc{status: map[string]int{}}
			cases[r.CaseID] = c
			ids = append(ids, r.CaseID)
		}
		c.status[r.Status]++
		if r.IntendedAtNS != nil {
			c.intended = append(c.intended, *r.IntendedAtNS)
		}
		if r.XRequestID != nil && r.StartedAtNS != nil {
			c.sent = append(c.sent, *r.StartedAtNS)
		}
		if r.DispatchLagMS != nil {
			c.lags = append(c.lags, *r.DispatchLagMS)
		}
		if r.TTFTMS != nil {
			c.ttfts = append(c.ttfts, *r.TTFTMS)
			if t, ok := truth[deref(r.XRequestID)]; ok && r.StartedAtNS != nil {
				rx := *r.StartedAtNS + int64(math.Round(*r.TTFTMS*1e6)) // in ns: a float64 of Unix ns resolves only 256 ns
				c.ttftErrs = append(c.ttftErrs, float64(rx-t)/1e6)
			}
		}
	}
	if len(ids) == 0 {
		fmt.Fprintf(os.Stderr, "ratecheck: %s holds no measured request (%d lines, %d records)\n", flag.Arg(0), a.Stats.Lines, a.Stats.Records)
		os.Exit(5)
	}
	matched := 0
	for _, id := range ids {
		c := cases[id]
		matched += len(c.ttftErrs)
		sched, ach := rate(c.intended), rate(c.sent)
		ratio := 0.0
		if sched > 0 {
			ratio = ach / sched
		}
		sort.Float64s(c.lags)
		sort.Float64s(c.ttfts)
		fmt.Printf("%s scheduled_rate=%.3f achieved_rate=%.3f ratio=%.5f lag_p50_ms=%.3f lag_p99_ms=%.3f lag_max_ms=%.3f ttft_p50_ms=%.3f ttft_p99_ms=%.3f statuses=%v\n",
			id, sched, ach, ratio, q(c.lags, 0.5), q(c.lags, 0.99), q(c.lags, 1), q(c.ttfts, 0.5), q(c.ttfts, 0.99), c.status)
		if truth != nil && len(c.ttftErrs) > 0 {
			sort.Float64s(c.ttftErrs)
			var out int
			for _, e := range c.ttftErrs {
				if e < 0 || e > 1 {
					out++
				}
			}
			fmt.Printf("%s truth_n=%d ttft_err_p50_ms=%.3f ttft_err_p99_ms=%.3f ttft_err_max_ms=%.3f outside_0_1ms=%.4f\n",
				id, len(c.ttftErrs), q(c.ttftErrs, 0.5), q(c.ttftErrs, 0.99), q(c.ttftErrs, 1), float64(out)/float64(len(c.ttftErrs)))
		}
	}
	if truth != nil && matched == 0 {
		fmt.Fprintf(os.Stderr, "ratecheck: none of the artifact's requests with a TTFT is in %s (%d ids): no TTFT error to report\n", *truthPath, len(truth))
		os.Exit(5)
	}
}

// readTruth reads bench/ssestub's -truth file into X-Request-Id → the instant its first
// content event's write began (Unix ns); nil for an empty path.
func readTruth(path string) (map[string]int64, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		parts := strings.Split(strings.TrimSuffix(sc.Text(), "\r"), "\t")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: expected ID, before and after (Unix ns), tab separated", path, n)
		}
		before, err1 := strconv.ParseInt(parts[1], 10, 64)
		after, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if after < before {
			return nil, fmt.Errorf("%s:%d: the flush instant %d is earlier than the write instant %d", path, n, after, before)
		}
		m[parts[0]] = before
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, n+1, err)
	}
	return m, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func rate(ts []int64) float64 {
	if len(ts) < 2 {
		return 0
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return float64(len(ts)-1) / (float64(ts[len(ts)-1]-ts[0]) / 1e9)
}

func q(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[int(p*float64(len(s)-1))]
}
