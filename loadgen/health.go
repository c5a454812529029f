package loadgen

import (
	"runtime"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// healthSnapshot is the process's cumulative CPU, GC and receive-stamp counters, and the
// host's busy CPU time, at one moment; two of them give a phase's artifact.ClientHealth.
type healthSnapshot struct {
	user, sys      time.Duration
	cpuKnown       bool
	gcCycles       uint32
	gcPauseNs      uint64
	reads, stamped int64
	hostBusy       float64 // seconds, all the host's CPUs
	hostCPUs       int
	hostKnown      bool
}

// healthNow reads the counters (runtime.ReadMemStats: a brief stop of the world, twice per
// phase).
func (r *Runner) healthNow() healthSnapshot {
	var h healthSnapshot
	h.user, h.sys, h.cpuKnown = processCPU()
	h.hostBusy, h.hostCPUs, h.hostKnown = hostCPUBusy()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.gcCycles, h.gcPauseNs = ms.NumGC, ms.PauseTotalNs
	if r.client != nil {
		h.reads, h.stamped = r.client.ReceiveStamps()
	}
	return h
}

// healthSince is the phase's health: the counters' growth from start to h.
func (h healthSnapshot) healthSince(start healthSnapshot) *artifact.ClientHealth {
	c := &artifact.ClientHealth{
		CPUs:                runtime.GOMAXPROCS(0),
		GCCycles:            int64(h.gcCycles - start.gcCycles),
		GCPauseSeconds:      float64(h.gcPauseNs-start.gcPauseNs) / 1e9,
		ReceiveReads:        h.reads - start.reads,
		ReceiveStampedReads: h.stamped - start.stamped,
	}
	if h.hostKnown && start.hostKnown {
		c.HostCPUs = h.hostCPUs
		c.HostCPUBusySeconds = artifact.Ptr(max(h.hostBusy-start.hostBusy, 0))
	}
	if h.cpuKnown && start.cpuKnown {
		c.CPUUserSeconds = artifact.Ptr((h.user - start.user).Seconds())
		c.CPUSystemSeconds = artifact.Ptr((h.sys - start.sys).Seconds())
	}
	return c
}
