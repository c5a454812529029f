package loadgen

import (
	"sync"
	"sync/atomic"
)

// dispatcher runs open-loop arrivals on a pool of dispatch goroutines, so that the pacer
// hands each arrival over instead of creating a goroutine for it (and the stacks that grew
// under a streamed call are kept). Only one goroutine (the pacer) may call dispatch and
// close. An arrival goes to an idle worker when there is one, else to a new worker: the pool
// grows to the most arrivals running at once and never shrinks until close.
type dispatcher struct {
	work    chan *attempt
	run     func(*attempt)
	idle    atomic.Int64 // workers announced as waiting on work and not yet claimed by a dispatch
	started atomic.Int64 // workers started, prestarted ones included
	wg      sync.WaitGroup
}

// newDispatcher starts prestart workers (≥ 0) that call run for each arrival.
func newDispatcher(prestart int, run func(*attempt)) *dispatcher {
	d := &dispatcher{work: make(chan *attempt), run: run}
	for range prestart {
		d.start(nil)
	}
	return d
}

// dispatch runs a on an idle worker, or on a new one when every worker is busy. It does not
// wait for a to run.
func (d *dispatcher) dispatch(a *attempt) {
	if d.idle.Load() > 0 {
		// Claim one announced worker: only this goroutine sends (and claims), so that worker
		// receives this send even if it has not reached its receive yet.
		d.idle.Add(-1)
		d.work <- a
		return
	}
	d.start(a)
}

func (d *dispatcher) start(first *attempt) {
	d.started.Add(1)
	d.wg.Add(1)
	go d.loop(first)
}

func (d *dispatcher) loop(a *attempt) {
	defer d.wg.Done()
	for {
		if a != nil {
			d.run(a)
		}
		d.idle.Add(1) // announced; the dispatch that claims it takes it back
		var ok bool
		if a, ok = <-d.work; !ok {
			return
		}
	}
}

// close ends the pool: idle workers exit now, busy ones once their arrival has run. No
// dispatch may follow it.
func (d *dispatcher) close() { close(d.work) }

// wait blocks until every worker has exited (after close).
func (d *dispatcher) wait() { d.wg.Wait() }
