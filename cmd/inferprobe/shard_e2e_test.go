package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// process starts this test binary as `inferprobe args…` with extra environment.
func process(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "INFERPROBE_TEST_ARGS="+strings.Join(args, "\x1f")), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &stderr
}

// measuredRequests reads an artifact's measured infer.request lines (a cut last line ignored).
func measuredRequests(t *testing.T, path string) []artifact.Request {
	t.Helper()
	b, _ := os.ReadFile(path)
	var out []artifact.Request
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"event_type":"infer.request"`)) || !bytes.Contains(line, []byte(`"phase":"measured"`)) {
			continue
		}
		var r artifact.Request
		if json.Unmarshal(line, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// TestShardProcessesOnLoopback: a coordinator and three shard processes (shard 2 takes its
// index from JOB_COMPLETION_INDEX) against the sim; shard 1 is killed mid-run. The two
// others send exactly their slices of the single-host schedule (prompt for prompt), and
// analyze of the directory names the killed shard and keeps every request it recorded.
func TestShardProcessesOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	srv := testkit.StartSim(t, func(c *sim.Config) { c.Seed = 3 })
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	workload := []string{"profile", "--base-url", srv.URL() + "/v1", "--model", sim.DefaultConfig().Model, "--arrival", "poisson", "--rate", "30",
		"--requests", "90", "--seed", "4", "--prompt-mode", "unique", "--input-tokens", "16", "--output-tokens", "4", "--quiet", "--system-sampler", "none"}
	single := filepath.Join(dir, "single.jsonl")
	if code := runQuiet(append(workload[:len(workload):len(workload)], "--output", single)...); code != 0 {
		t.Fatalf("single host: exit %d", code)
	}
	want := map[int64]string{}
	for _, r := range measuredRequests(t, single) {
		want[*r.RequestIndex] = *r.PromptDigest
	}
	coord, coordErr := process(t, nil, "coordinate", "--shards", "3", "--listen", addr, "--start-delay", "0.5", "--start-deadline", "60")
	shardDir := filepath.Join(dir, "shards")
	var shards []*exec.Cmd
	var stderrs []*bytes.Buffer
	for k := 0; k < 3; k++ {
		args := append(workload[:len(workload):len(workload)], "--shards", "3", "--run-id", "run-e2e", "--coordinator", "http://"+addr,
			"--output", filepath.Join(shardDir, fmt.Sprintf("shard-%d.jsonl", k)))
		env := []string{"JOB_COMPLETION_INDEX=" + fmt.Sprint(k)}
		if k < 2 {
			args = append(args, "--shard", fmt.Sprint(k))
			env = nil
		}
		c, e := process(t, env, args...)
		shards, stderrs = append(shards, c), append(stderrs, e)
	}
	killed := filepath.Join(shardDir, "shard-1.jsonl")
	for deadline := time.Now().Add(120 * time.Second); len(measuredRequests(t, killed)) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("shard 1 never got under way\ncoordinator: %s\nshard 0: %s\nshard 1: %s\nshard 2: %s", coordErr, stderrs[0], stderrs[1], stderrs[2])
		}
	}
	_ = shards[1].Process.Kill()
	for k, c := range shards {
		err := c.Wait()
		if k != 1 && err != nil {
			t.Fatalf("shard %d: %v\n%s", k, err, stderrs[k])
		}
	}
	if err := coord.Wait(); err != nil {
		t.Fatalf("coordinator: %v\n%s", err, coordErr)
	}
	for _, k := range []int{0, 2} {
		got := measuredRequests(t, filepath.Join(shardDir, fmt.Sprintf("shard-%d.jsonl", k)))
		if len(got) != 30 {
			t.Fatalf("shard %d sent %d requests, want 30", k, len(got))
		}
		for _, r := range got {
			if *r.RequestIndex%3 != int64(k) || want[*r.RequestIndex] != *r.PromptDigest || *r.Shard != int64(k) {
				t.Fatalf("shard %d request %d: prompt %s, single host %s", k, *r.RequestIndex, *r.PromptDigest, want[*r.RequestIndex])
			}
		}
	}
	kept := len(measuredRequests(t, killed))
	report := filepath.Join(dir, "report.json")
	if code := runQuiet("analyze", shardDir, "--format", "json", "--output", report); code != 0 {
		t.Fatalf("analyze of the shards: exit %d", code)
	}
	var rep struct {
		Summary struct {
			TotalRequests int `json:"total_requests"`
		} `json:"summary"`
		Shards struct {
			Problems []string `json:"problems"`
			PerShard []struct {
				Status        string `json:"status"`
				ClockOffsetNS *int64 `json:"clock_offset_ns"`
			} `json:"per_shard"`
		} `json:"shards"`
	}
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Summary.TotalRequests != 60+kept {
		t.Fatalf("merged %d requests, the shards recorded %d", rep.Summary.TotalRequests, 60+kept)
	}
	named := false // on a loaded host a clock uncertainty above 1 ms is a problem too
	for _, p := range rep.Shards.Problems {
		named = named || strings.HasPrefix(p, "shard 1 (") && strings.Contains(p, "no closing infer.session record")
	}
	if len(rep.Shards.PerShard) != 3 || rep.Shards.PerShard[1].Status != "not_closed" || rep.Shards.PerShard[0].Status != "completed" ||
		rep.Shards.PerShard[0].ClockOffsetNS == nil || !named {
		t.Fatalf("shards block %+v", rep.Shards)
	}
}
