package loadgen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// MaxShards bounds --shards: each shard is a host (or a Kubernetes pod) of its own.
const MaxShards = 10_000

// ShardIndexEnv is the variable a Kubernetes Indexed Job sets to each pod's completion index;
// profile takes --shard from it when the flag is not given.
const ShardIndexEnv = "JOB_COMPLETION_INDEX"

// ParseShardIndex parses a shard index as --shard or JOB_COMPLETION_INDEX spells it: a
// decimal integer 0 ≤ K < shards. Errors name the source (the flag, or the variable) and are
// usage errors (exit 2).
func ParseShardIndex(s, source string, shards int) (int, error) {
	k, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, flagErr("shard", "%s=%q is not an integer shard index", source, s)
	}
	if k < 0 || k >= shards {
		return 0, flagErr("shard", "%s=%d is outside 0..%d (--shards %d)", source, k, shards-1, shards)
	}
	return k, nil
}

// Sharded reports whether the run is one slice of a sharded run (Shards > 1).
func (c *Config) Sharded() bool { return c.Shards > 1 }

// validateShards checks --shards and --shard: 1 ≤ shards ≤ MaxShards, 0 ≤ shard < shards,
// and, in a sharded closed loop, every concurrency at least the shard count (each shard runs
// a worker).
func (c *Config) validateShards() error {
	if c.Shards == 0 && c.Shard == 0 {
		return nil
	}
	if c.Shards < 1 || c.Shards > MaxShards {
		return flagErr("shards", "--shards must be within 1..%d, not %d", MaxShards, c.Shards)
	}
	if c.Shard < 0 || c.Shard >= c.Shards {
		return flagErr("shard", "--shard must be within 0..%d (--shards %d), not %d", c.Shards-1, c.Shards, c.Shard)
	}
	if !c.OpenLoop() {
		for _, n := range c.Concurrency {
			if n < c.Shards {
				return flagErr("shards", "--concurrency %d is below --shards %d: a closed loop gives each shard at least one worker", n, c.Shards)
			}
		}
	}
	return nil
}

// shardInfo is the workload record's shard block (nil for an unsharded run).
func (c *Config) shardInfo() *artifact.ShardInfo {
	if !c.Sharded() {
		return nil
	}
	return &artifact.ShardInfo{Shard: int64(c.Shard), Shards: int64(c.Shards), RunID: c.RunID}
}

// shardPtr is the request record's shard field (nil for an unsharded run).
func (c *Config) shardPtr() *int64 {
	if !c.Sharded() {
		return nil
	}
	return artifact.Ptr(int64(c.Shard))
}

// Owns reports whether this shard sends request index i of a case: every index in an
// unsharded run; in an open loop i mod Shards = Shard; in a closed loop of concurrency workers
// (i mod concurrency) mod Shards = Shard, the indexes global worker i mod concurrency would
// take, so each shard's share follows its worker count (ShardWorkers).
func (c *Config) Owns(concurrency, i int) bool {
	if !c.Sharded() {
		return true
	}
	if c.OpenLoop() || concurrency < 1 {
		return i%c.Shards == c.Shard
	}
	return (i%concurrency)%c.Shards == c.Shard
}

// ShardWorkers is how many of a closed loop's concurrency workers this shard runs:
// ceil((concurrency − Shard) / Shards), all of them in an unsharded run.
func (c *Config) ShardWorkers(concurrency int) int {
	if !c.Sharded() {
		return concurrency
	}
	if concurrency <= c.Shard {
		return 0
	}
	return (concurrency - c.Shard + c.Shards - 1) / c.Shards
}

// globalWorker is the global number of this shard's local closed-loop worker w: Shard + w·Shards.
func (c *Config) globalWorker(w int) int {
	if !c.Sharded() {
		return w
	}
	return c.Shard + w*c.Shards
}

// closedIndex is the request index of this shard's j-th closed-loop request (j ≥ 0) in a
// loop of concurrency workers: the j-th index that Owns, in increasing order. Within each
// block of concurrency indexes the shard owns the offsets Shard, Shard+Shards, …
func (c *Config) closedIndex(concurrency, j int) int {
	m := c.ShardWorkers(concurrency)
	if !c.Sharded() || m == 0 {
		return j
	}
	return (j/m)*concurrency + c.Shard + (j%m)*c.Shards
}

// ownedCount is how many of the indexes 0..n−1 this shard owns.
func (c *Config) ownedCount(concurrency, n int) int {
	if !c.Sharded() {
		return n
	}
	k := 0
	for i := 0; i < n; i++ {
		if c.Owns(concurrency, i) {
			k++
		}
	}
	return k
}

// shardLabel is " (shard K of N)" for messages of a sharded run, "" otherwise.
func (c *Config) shardLabel() string {
	if !c.Sharded() {
		return ""
	}
	return fmt.Sprintf(" (shard %d of %d)", c.Shard, c.Shards)
}
