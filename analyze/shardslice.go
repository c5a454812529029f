package analyze

// shardSlice is the share of a case's request indexes one shard of a sharded run sends
// (analysed alone): in an open loop (concurrency 0) the indexes i with i mod shards = shard;
// in a closed loop of concurrency workers those with (i mod concurrency) mod shards = shard
// — the load generator's own rule (loadgen.Config.Owns).
type shardSlice struct {
	shard, shards, concurrency int64
}

// rank is the position of global index i among the shard's own indexes (0 for its first),
// false when the shard does not send i.
func (s shardSlice) rank(i int64) (int64, bool) {
	if i < 0 || s.shards < 1 {
		return 0, false
	}
	if s.concurrency < 1 {
		if i%s.shards != s.shard {
			return 0, false
		}
		return i / s.shards, true
	}
	c := s.concurrency
	j := i % c
	if j%s.shards != s.shard {
		return 0, false
	}
	// owned among one full round of c workers, and among workers 0..j-1 of this round
	perRound := s.owned(c)
	return (i/c)*perRound + s.owned(j), true
}

// owned counts the workers w in [0, n) with w mod shards = shard.
func (s shardSlice) owned(n int64) int64 {
	if n <= s.shard {
		return 0
	}
	return (n - s.shard + s.shards - 1) / s.shards
}
