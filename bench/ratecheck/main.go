// Command ratecheck reads a profile artifact and prints, per case, how closely dispatch
// followed the schedule: the scheduled offered rate (N−1 over the first→last intended
// arrival), the achieved rate (sent−1 over the first→last send), their ratio, the dispatch lag
// p50/p99/max in ms, TTFT p50/p99 in ms (send → first content), and the outcome counts. Used by bench/profile-rate.sh.
//
// Usage: go run ./bench/ratecheck ARTIFACT
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

type caseAcc struct {
	intended, sent []int64
	lags, ttfts    []float64
	status         map[string]int
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ratecheck ARTIFACT")
		os.Exit(2)
	}
	a, err := artifact.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
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
		}
	}
	for _, id := range ids {
		c := cases[id]
		sched, ach := rate(c.intended), rate(c.sent)
		sort.Float64s(c.lags)
		sort.Float64s(c.ttfts)
		fmt.Printf("%s scheduled_rate=%.3f achieved_rate=%.3f ratio=%.5f lag_p50_ms=%.3f lag_p99_ms=%.3f lag_max_ms=%.3f ttft_p50_ms=%.3f ttft_p99_ms=%.3f statuses=%v\n",
			id, sched, ach, ach/sched, q(c.lags, 0.5), q(c.lags, 0.99), q(c.lags, 1), q(c.ttfts, 0.5), q(c.ttfts, 0.99), c.status)
	}
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
