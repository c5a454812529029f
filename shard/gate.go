package shard

import (
	"context"
	"fmt"

	"github.com/inferprobe/inferprobe/artifact"
)

// Gate holds a shard's run back until the coordinator's start: Wait registers the shard,
// estimates its clock offset, writes the infer.clock_alignment record to the run's sink,
// waits for the start time and sleeps until it on the shard's wall clock.
type Gate struct {
	Client *Client
	Shard  int
	Shards int
}

// Wait is the run's start gate (run.Spec.StartGate): head is the run's artifact context (run
// id, session, clock domain), digest its workload digest. Errors, each ending the run before
// anything is sent: the coordinator unreachable or refusing the shard, the run aborted
// (wrapping ErrAborted), a sink error, ctx's error.
func (g *Gate) Wait(ctx context.Context, sink artifact.Sink, head artifact.Context, digest string) error {
	c := g.Client
	reg := Registration{Shard: g.Shard, Shards: g.Shards, RunID: head.RunID, WorkloadDigest: digest}
	if err := c.Register(ctx, reg); err != nil {
		return err
	}
	off, err := c.Offset(ctx)
	if err != nil {
		return err
	}
	to := off.Domain
	if to == "" || to == head.ClockDomain {
		to = "coordinator." + head.ClockDomain // the same host: still another process's clock
	}
	now := c.clock().Now().UnixNano()
	rec := &artifact.ClockAlignment{
		Context: head, EventID: fmt.Sprintf("shard-%d-coordinator-clock", g.Shard),
		Metadata: map[string]any{
			"method": artifact.ClockMethodShardCoordinator, "shard": g.Shard, "probes": off.Probes, "rtt_ns": off.RTTNS,
		},
		FromClockDomain: head.ClockDomain, ToClockDomain: to,
		OffsetNS: off.OffsetNS, UncertaintyNS: off.UncertaintyNS, ValidFromNS: &now,
	}
	if err := sink.Write(rec); err != nil {
		return err
	}
	start, err := c.WaitStart(ctx, g.Shard)
	if err != nil {
		return err
	}
	local := start.Add(-timeDuration(off.OffsetNS)) // the start on this shard's clock
	clk := c.clock()
	if d := local.Sub(clk.Now()); d > 0 {
		t := clk.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.Chan():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
