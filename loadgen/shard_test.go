package loadgen

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

func TestShardOwnershipPartitions(t *testing.T) {
	for _, tc := range []struct{ n, conc, total int }{{3, 0, 20}, {4, 0, 7}, {3, 8, 50}, {4, 4, 17}, {2, 5, 23}} {
		owner := map[int]int{}
		workers := 0
		for k := 0; k < tc.n; k++ {
			cfg := &Config{Shards: tc.n, Shard: k, Arrival: schedule.Poisson}
			if tc.conc > 0 {
				cfg.Arrival = schedule.Closed
				workers += cfg.ShardWorkers(tc.conc)
				// closedIndex lists exactly the owned indexes, increasing.
				var want []int
				for i := 0; i < tc.total; i++ {
					if (i%tc.conc)%tc.n == k {
						want = append(want, i)
					}
				}
				for j, w := range want {
					if got := cfg.closedIndex(tc.conc, j); got != w {
						t.Fatalf("n=%d c=%d shard %d: closedIndex(%d)=%d, want %d", tc.n, tc.conc, k, j, got, w)
					}
				}
				if got := cfg.ownedCount(tc.conc, tc.total); got != len(want) {
					t.Fatalf("ownedCount %d, want %d", got, len(want))
				}
			}
			for i := 0; i < tc.total; i++ {
				if cfg.Owns(tc.conc, i) {
					if prev, dup := owner[i]; dup {
						t.Fatalf("index %d owned by shards %d and %d", i, prev, k)
					}
					owner[i] = k
				}
			}
		}
		if len(owner) != tc.total {
			t.Fatalf("n=%d: %d of %d indexes owned", tc.n, len(owner), tc.total)
		}
		if tc.conc > 0 && workers != tc.conc {
			t.Fatalf("n=%d c=%d: %d workers in all, want %d", tc.n, tc.conc, workers, tc.conc)
		}
	}
	// ceil((C−K)/N): C=10, N=4 → 3,3,2,2.
	for k, want := range []int{3, 3, 2, 2} {
		if got := (&Config{Shards: 4, Shard: k}).ShardWorkers(10); got != want {
			t.Fatalf("shard %d of 4, C=10: %d workers, want %d", k, got, want)
		}
	}
}

func TestShardSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		shards, shard int
		conc          []int
		want          string
	}{
		{0, 1, nil, "--shards must be within"},
		{3, 3, nil, "--shard must be within 0..2"},
		{3, -1, nil, "--shard must be within 0..2"},
		{4, 0, []int{2}, "--concurrency 2 is below --shards 4"},
	} {
		cfg := &Config{Shards: tc.shards, Shard: tc.shard, Concurrency: tc.conc, Arrival: schedule.Closed}
		err := cfg.validateShards()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !IsUsage(err) {
			t.Fatalf("%+v: %v, want a usage error with %q", tc, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{{"x", "not an integer"}, {"1.5", "not an integer"}, {"-1", "outside 0..3"}, {"4", "outside 0..3"}, {"", "not an integer"}} {
		if _, err := ParseShardIndex(tc.in, "$JOB_COMPLETION_INDEX", 4); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
	if k, err := ParseShardIndex(" 3 ", "--shard", 4); err != nil || k != 3 {
		t.Fatalf("3: %d %v", k, err)
	}
}

// arrivalOf is one request as the schedule fixes it: its offset from its phase's start, its
// prompt, its id.
type arrivalOf struct {
	offsetNS  int64
	prompt    string
	requestID string
	status    string
}

// scheduleView maps (phase, case, request index) to the arrival; worker ids are left out of
// request ids of closed loops (the unsharded loop hands indexes to whichever worker is free).
func scheduleView(t *testing.T, sinks []*memSink, closed bool) (map[string]arrivalOf, map[string]string) {
	t.Helper()
	view := map[string]arrivalOf{}
	digests := map[string][]string{}
	for k, s := range sinks {
		starts := map[string]int64{}
		for _, w := range s.windows() {
			starts[w.CaseID+"/"+w.Phase] = *w.StartedAtNS
		}
		for _, r := range s.requests("") {
			key := fmt.Sprintf("%s/%s/%06d", r.CaseID, r.Phase, *r.RequestIndex)
			if _, dup := view[key]; dup {
				t.Fatalf("request %s recorded twice", key)
			}
			if len(sinks) > 1 && (r.Shard == nil || *r.Shard != int64(k)) {
				t.Fatalf("%s: shard %v, want %d", key, r.Shard, k)
			}
			id := r.RequestID
			var off int64
			if closed {
				parts := strings.Split(id, "_")
				var worker int
				fmt.Sscan(parts[len(parts)-2], &worker)
				if len(sinks) > 1 && worker%len(sinks) != k {
					t.Fatalf("%s: worker %d on shard %d of %d", id, worker, k, len(sinks))
				}
				id = strings.Join(append(parts[:len(parts)-2], parts[len(parts)-1]), "_")
			} else {
				off = *r.IntendedAtNS - starts[r.CaseID+"/"+r.Phase]
			}
			if *r.XRequestID != artifact.XRequestIDPrefix("run-1")+r.RequestID {
				t.Fatalf("x_request_id %s for request %s", *r.XRequestID, r.RequestID)
			}
			view[key] = arrivalOf{offsetNS: off, prompt: *r.PromptDigest, requestID: id, status: r.Status}
		}
	}
	// prompts_digest of the union, per phase, over the digests in index order.
	keys := make([]string, 0, len(view))
	for k := range view {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		ph := k[:strings.LastIndex(k, "/")]
		digests[ph] = append(digests[ph], view[k].prompt)
	}
	out := map[string]string{}
	for ph, d := range digests {
		out[ph] = prompt.PhaseDigest(d)
	}
	return view, out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestShardsUnionIsTheSingleHostSchedule(t *testing.T) {
	srv := fastSim(t, nil)
	modes := map[string]func(*Config){
		"poisson":    func(c *Config) { c.Arrival, c.Rates, c.Requests = schedule.Poisson, []float64{400}, 23 },
		"fixed-rate": func(c *Config) { c.Arrival, c.Rates, c.Requests = schedule.FixedRate, []float64{400}, 20 },
		"burst": func(c *Config) {
			c.Arrival, c.BurstSize, c.BurstInterval, c.Requests = schedule.Burst, 5, 20*time.Millisecond, 17
		},
		"replay": func(c *Config) {
			c.Arrival, c.TraceSource = schedule.Replay, "offsets"
			for i := 0; i < 19; i++ {
				c.Trace = append(c.Trace, time.Duration(i*i)*100*time.Microsecond)
			}
		},
		"closed": func(c *Config) { c.Arrival, c.Concurrency, c.Requests = schedule.Closed, []int{5}, 21 },
	}
	for name, set := range modes {
		t.Run(name, func(t *testing.T) {
			mk := func(shards, shard int) *Config {
				c := baseConfig(srv)
				c.PromptMode, c.WarmupRequests = prompt.Unique, 4
				set(c)
				c.Shards, c.Shard = shards, shard
				return c
			}
			one, err := runConfig(t, context.Background(), mk(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			const n = 3
			var parts []*memSink
			for k := 0; k < n; k++ {
				s, err := runConfig(t, context.Background(), mk(n, k))
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, s)
			}
			closed := name == "closed"
			want, wantDigests := scheduleView(t, []*memSink{one}, closed)
			got, gotDigests := scheduleView(t, parts, closed)
			if len(got) != len(want) {
				t.Fatalf("shards recorded %d requests, the single host %d", len(got), len(want))
			}
			for key, w := range want {
				if g, ok := got[key]; !ok || g != w {
					t.Fatalf("%s: shards %+v, single host %+v", key, g, w)
				}
			}
			for ph, d := range wantDigests {
				if gotDigests[ph] != d {
					t.Fatalf("%s prompts digest differs", ph)
				}
			}
			// Each shard's window covers its own slice; the single host's the whole schedule.
			for _, w := range one.windows() {
				if w.Phase != PhaseMeasured {
					continue
				}
				if *w.PromptsDigest != wantDigests[w.CaseID+"/"+w.Phase] {
					t.Fatal("the single host's prompts_digest is not the digest of its requests in index order")
				}
				if w.ScheduledArrivals != nil {
					var sum int64
					for _, p := range parts {
						sum += *p.windows()[1].ScheduledArrivals
					}
					if sum != *w.ScheduledArrivals {
						t.Fatalf("shards scheduled %d arrivals in all, single host %d", sum, *w.ScheduledArrivals)
					}
				}
			}
		})
	}
}

// FuzzParseShardIndex: any text gives an index within 0..shards−1 or a usage error, never a
// panic; an accepted text is the decimal spelling of the index (spaces around it allowed).
func FuzzParseShardIndex(f *testing.F) {
	for _, s := range []string{"0", "3", "-1", "4", "1.5", " 2 ", "", "99999999999999999999", "+1"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, shards int) {
		if shards < 1 || shards > MaxShards {
			return
		}
		k, err := ParseShardIndex(s, "--shard", shards)
		if err != nil {
			if !IsUsage(err) {
				t.Fatalf("%q: %v is not a usage error", s, err)
			}
			return
		}
		if k < 0 || k >= shards {
			t.Fatalf("%q accepted as %d of %d", s, k, shards)
		}
	})
}
