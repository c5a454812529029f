package analyze

import "testing"

// rank is the count of the shard's own indexes below i, for open and closed loops.
func TestShardSliceRank(t *testing.T) {
	for _, s := range []shardSlice{{1, 3, 0}, {0, 2, 0}, {1, 2, 5}, {2, 3, 4}, {0, 4, 3}} {
		owns := func(i int64) bool {
			if s.concurrency < 1 {
				return i%s.shards == s.shard
			}
			return (i%s.concurrency)%s.shards == s.shard
		}
		var next int64
		for i := int64(0); i < 200; i++ {
			r, ok := s.rank(i)
			if ok != owns(i) || (ok && r != next) {
				t.Fatalf("%+v: rank(%d) = %d, %v; want %d, %v", s, i, r, ok, next, owns(i))
			}
			if ok {
				next++
			}
		}
	}
	if _, ok := (shardSlice{0, 2, 0}).rank(-2); ok {
		t.Fatal("a negative index ranked")
	}
}
