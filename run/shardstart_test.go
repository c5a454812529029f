package run

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/shard"
	"github.com/inferprobe/inferprobe/sim"
	"github.com/jonboulle/clockwork"
)

// gatedShards runs the given shard indexes of a 3-shard poisson run through coordinator url
// at once and returns their results and artifact paths.
func gatedShards(t *testing.T, srv *sim.Server, url, dir string, indexes []int) ([]*Result, []string) {
	t.Helper()
	results := make([]*Result, len(indexes))
	paths := make([]string, len(indexes))
	var wg sync.WaitGroup
	for i, k := range indexes {
		paths[i] = filepath.Join(dir, "shard-"+string(rune('a'+i))+".jsonl")
		g := &shard.Gate{Client: &shard.Client{Base: url, Probes: 4}, Shard: k, Shards: 3}
		spec := Spec{Workload: shardConfig(t, srv, "poisson", "run-c", 3, k), Tokenizer: tokenizer(t), TokenizerName: "auto",
			Output: paths[i], Version: "test", StartGate: g.Wait}
		wg.Add(1)
		go func(i int) { defer wg.Done(); results[i] = New(spec).Execute(context.Background()) }(i)
	}
	wg.Wait()
	return results, paths
}

func TestShardedStartThroughTheCoordinator(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	c, _ := shard.NewCoordinator(shard.Options{Shards: 3, StartDelay: 300 * time.Millisecond, ClockDomain: "coordinator-host/unix_epoch_ns"})
	hs := httptest.NewServer(c.Handler())
	defer hs.Close()
	results, paths := gatedShards(t, srv, hs.URL, t.TempDir(), []int{0, 1, 2})
	start, abort, _ := c.Outcome(context.Background(), time.Second)
	if abort != "" {
		t.Fatal(abort)
	}
	for k, res := range results {
		if res.Err != nil || res.ReportErr != nil || res.Status != artifact.StatusCompleted {
			t.Fatalf("shard %d: %+v", k, res)
		}
	}
	rep, err := AnalyzeShards(context.Background(), paths, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range rep.Shards.PerShard {
		if a.ClockOffsetNS == nil || a.ClockUncertaintyNS == nil || *a.ClockUncertaintyNS < 0 {
			t.Fatalf("shard %d: no clock alignment in its audit: %+v", k, a)
		}
		in, _ := analyze.ReadInput(context.Background(), paths[k])
		for _, w := range in.Artifact.PhaseWindows {
			// On its own clock, no phase starts before the announced start.
			if *w.StartedAtNS < start.UnixNano()-*a.ClockOffsetNS-*a.ClockUncertaintyNS {
				t.Fatalf("shard %d: %s window started %d ns before the start", k, w.Phase, start.UnixNano()-*w.StartedAtNS)
			}
		}
	}
	if rep.Summary.TotalRequests != 23 {
		t.Fatalf("merged %d requests, want 23", rep.Summary.TotalRequests)
	}
}

// TestShardMissingAtTheDeadlineAbortsTheOthers: shard 2 never registers; at the start
// deadline the two others end with its name in their error, nothing sent, and a closed
// artifact (incomplete). A second shard 0 is refused.
func TestShardMissingAtTheDeadlineAbortsTheOthers(t *testing.T) {
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	fc := clockwork.NewFakeClock()
	c, _ := shard.NewCoordinator(shard.Options{Shards: 3, StartDeadline: time.Minute, PollWait: time.Hour, Clock: fc})
	hs := httptest.NewServer(c.Handler())
	defer hs.Close()
	dir := t.TempDir()
	done := make(chan struct{})
	var results []*Result
	var paths []string
	go func() { results, paths = gatedShards(t, srv, hs.URL, dir, []int{0, 1, 0}); close(done) }()
	testkit.WaitFor(t, "two shards registered", 20*time.Second, func() bool { return len(c.Registered()) == 2 })
	fc.BlockUntilContext(context.Background(), 3) // the deadline timer and two start polls
	fc.Advance(time.Minute)
	<-done
	dups, aborted := 0, 0
	for i, res := range results {
		if res.Status != artifact.StatusIncomplete || res.Err == nil {
			t.Fatalf("shard run %d: status %s err %v", i, res.Status, res.Err)
		}
		msg := res.Err.Error()
		switch {
		case strings.Contains(msg, "shard 0 is already registered"):
			dups++
		case strings.Contains(msg, "shard 2 did not register within the start deadline"):
			aborted++
		default:
			t.Fatalf("shard run %d: %v", i, msg)
		}
		a, err := artifact.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		f := a.FinalSession()
		if f == nil || f.Status != artifact.StatusIncomplete || f.Summary.Error == nil || !strings.Contains(*f.Summary.Error, msg[:20]) || len(a.Requests) != 0 {
			t.Fatalf("shard run %d: artifact closing %+v, %d requests", i, f, len(a.Requests))
		}
	}
	if dups != 1 || aborted != 2 {
		t.Fatalf("%d refused as duplicates, %d aborted; want 1 and 2", dups, aborted)
	}
}
