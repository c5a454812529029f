package loadgen

import (
	"runtime"
	"sync"
	"testing"
)

// untilIdle yields until n workers of d have announced they wait for work.
func untilIdle(d *dispatcher, n int64) {
	for d.idle.Load() != n {
		runtime.Gosched()
	}
}

func TestDispatcherReusesIdleWorkers(t *testing.T) {
	done := make(chan int, 4)
	d := newDispatcher(1, func(a *attempt) { done <- a.idx })
	for i := range 3 {
		untilIdle(d, 1)
		d.dispatch(&attempt{idx: i})
		if got := <-done; got != i {
			t.Fatalf("ran arrival %d, want %d", got, i)
		}
	}
	untilIdle(d, 1)
	if n := d.started.Load(); n != 1 {
		t.Fatalf("%d workers started for 3 arrivals one after another, want the prestarted 1", n)
	}
	d.close()
	d.wait()
}

func TestDispatcherGrowsWhenBusy(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	ran := map[int]int{}
	d := newDispatcher(2, func(a *attempt) {
		<-release
		mu.Lock()
		ran[a.idx]++
		mu.Unlock()
	})
	untilIdle(d, 2)
	const n = 10
	for i := range n {
		d.dispatch(&attempt{idx: i})
	}
	// Every worker is held: the 2 prestarted ones took 2 arrivals, 8 more were started.
	if got := d.started.Load(); got != n {
		t.Fatalf("%d workers for %d arrivals held at once, want %d", got, n, n)
	}
	close(release)
	d.close()
	d.wait()
	if len(ran) != n {
		t.Fatalf("%d distinct arrivals ran, want %d: %v", len(ran), n, ran)
	}
	for i, c := range ran {
		if c != 1 {
			t.Fatalf("arrival %d ran %d times", i, c)
		}
	}
}
