package loadgen

// workers runs an open loop's sends on reused goroutines. A goroutine that has finished one
// send waits for the next; Go hands the function to a waiting one, and starts a new
// goroutine only when none waits, so that the stack a send grows (net/http's call chain, the
// SSE reader, the record's encoding: 16–32 KiB) is grown once per goroutine rather than
// copied up from the runtime's starting size for every request. There are never more
// goroutines than sends running at once, plus those waiting; close ends the waiting ones.
// Go and close are called from one goroutine (the dispatch loop).
type workers struct {
	work chan func()
}

func newWorkers() *workers { return &workers{work: make(chan func())} }

// Go runs f on a waiting goroutine, or on a new one; it never blocks.
func (w *workers) Go(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

// loop runs f, then each function handed to it, until close.
func (w *workers) loop(f func()) {
	for ok := true; ok; f, ok = <-w.work {
		f()
	}
}

// close makes every waiting goroutine return; Go must not be called after it.
func (w *workers) close() { close(w.work) }
