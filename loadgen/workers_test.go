package loadgen

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// goid is the calling goroutine's id, from its stack header ("goroutine 7 [running]:").
func goid() int {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

func TestWorkersReuseAWaitingGoroutine(t *testing.T) {
	w := newWorkers()
	ids := make(chan int)
	seen := map[int]bool{}
	reused := false
	for i := 0; i < 200 && !reused; i++ {
		w.Go(func() { ids <- goid() })
		id := <-ids
		reused = seen[id]
		seen[id] = true
		runtime.Gosched() // let the goroutine that sent get back to waiting
	}
	w.close()
	if !reused {
		t.Fatalf("200 sequential functions ran on %d goroutines, none reused", len(seen))
	}
}

func TestWorkersRunEachOnceAndEndOnClose(t *testing.T) {
	before := runtime.NumGoroutine()
	w := newWorkers()
	const n = 500
	var mu sync.Mutex
	ran := make([]int, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		w.Go(func() {
			defer wg.Done()
			if i < 50 {
				<-release // 50 running at once: Go must not block on them
			}
			mu.Lock()
			ran[i]++
			mu.Unlock()
		})
	}
	close(release)
	wg.Wait()
	for i, c := range ran {
		if c != 1 {
			t.Fatalf("function %d ran %d times", i, c)
		}
	}
	w.close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after close, %d before", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
	}
}
