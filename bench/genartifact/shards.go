package main

import (
	"fmt"
	"path/filepath"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
)

// shardSink splits one synthetic run into the artifacts of n shards, as `profile --shards n`
// would write them: every shard gets the head records (its own session id, the workload's
// shard block), the requests of the indexes i ≡ k (mod n) (with their shard), each phase
// window with its own share of scheduled arrivals, and its closing session.
type shardSink struct {
	w    []*artifact.Writer
	n    int
	sent []int64 // requests recorded per shard
}

func newShardSink(dir string, n int) (*shardSink, error) {
	s := &shardSink{n: n, sent: make([]int64, n)}
	for k := 0; k < n; k++ {
		w, err := artifact.NewWriter(filepath.Join(dir, fmt.Sprintf("shard-%d.jsonl", k)))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.w = append(s.w, w)
	}
	return s, nil
}

func sessionOf(k int) string { return fmt.Sprintf("bench-session-shard-%d", k) }

// Write routes one record of the unsharded run.
func (s *shardSink) Write(rec artifact.Record) error {
	if r, ok := rec.(*artifact.Request); ok {
		k := int(*r.RequestIndex) % s.n
		c := *r
		c.SessionID, c.Shard = sessionOf(k), artifact.Ptr(int64(k))
		s.sent[k]++
		return s.w[k].Write(&c)
	}
	for k := 0; k < s.n; k++ {
		if err := s.w[k].Write(s.forShard(rec, k)); err != nil {
			return err
		}
	}
	return nil
}

// forShard is shard k's copy of a record other than a request.
func (s *shardSink) forShard(rec artifact.Record, k int) artifact.Record {
	sid := sessionOf(k)
	switch v := rec.(type) {
	case *artifact.Session:
		c := *v
		c.SessionID = sid
		if v.Summary != nil {
			sum := *v.Summary
			sum.SessionID, sum.RequestsRecorded = sid, s.sent[k]
			c.Summary = &sum
		}
		return &c
	case *artifact.ArtifactHeader:
		c := *v
		c.Context.SessionID = sid
		return &c
	case *artifact.Workload:
		c := *v
		c.SessionID = sid
		c.Shard = &artifact.ShardInfo{Shard: int64(k), Shards: int64(s.n), RunID: synth.RunID}
		return &c
	case *artifact.CacheState:
		c := *v
		c.SessionID = sid
		return &c
	case *artifact.PhaseWindow:
		c := *v
		c.SessionID = sid
		if v.ScheduledArrivals != nil {
			total := *v.ScheduledArrivals
			own := total / int64(s.n)
			if int64(k) < total%int64(s.n) {
				own++
			}
			c.ScheduledArrivals = &own
		}
		return &c
	}
	return rec
}

// Close closes every shard's artifact and returns the first error.
func (s *shardSink) Close() error {
	var first error
	for _, w := range s.w {
		if err := w.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
