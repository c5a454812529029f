// Package shard synchronises the shards of a sharded run (profile --shards N --coordinator
// URL) through a coordinator (inferprobe coordinate), over HTTP:
//
//   - POST /v1/register {shard, shards, run_id, workload_digest}: 200 when registered; 409
//     with {"error": …} for a shard index given twice, a shard count, run id or workload
//     digest other than the run's (the first registration fixes run id and digest), or a run
//     that already started or aborted; 400 for a body that is not such an object.
//   - GET /v1/start?shard=K: long poll (at most PollWait): 200 {"start_at_ns": T} once every
//     shard registered (T = the last registration + StartDelay, on the coordinator's clock);
//     410 {"error": …} once the run aborted (a shard missing at the start deadline); 202
//     {"status": "waiting"} when the poll timed out (ask again).
//   - GET /v1/time: 200 {"receive_ns": t1, "send_ns": t2, "clock_domain": …}, the
//     coordinator's wall clock, for the shards' offset probes.
//
// A shard registers, probes the coordinator's clock (Offset: of several probes the one with
// the smallest round trip; offset = ((t1−t0)+(t2−t3))/2, uncertainty = RTT/2), records that
// as an infer.clock_alignment, waits for the start time, and sleeps until it on its wall
// clock (start − offset); the load generator then paces on the monotonic clock.
package shard
