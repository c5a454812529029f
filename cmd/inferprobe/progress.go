package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
)

// progress draws one live line per case on a terminal: done/offered, ok/failed, the
// completion rate and requests in flight. It draws nothing when the writer is not a TTY or
// with --quiet.
type progress struct {
	w       io.Writer
	enabled bool

	mu       sync.Mutex
	cs       loadgen.Case
	offered  int
	done     int
	ok       int
	failed   int
	sent     int
	dropped  int
	started  time.Time
	drawn    bool
	stopTick chan struct{}
	wg       sync.WaitGroup
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, enabled: !quiet && isTTY(w)}
}

func (p *progress) start() {
	if !p.enabled {
		return
	}
	p.stopTick = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stopTick:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

func (p *progress) stop() {
	if !p.enabled {
		return
	}
	close(p.stopTick)
	p.wg.Wait()
	p.draw()
	p.mu.Lock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.mu.Unlock()
}

// clear erases the live line so that a warning prints on a clean line.
func (p *progress) clear() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) caseStart(cs loadgen.Case, offered int) {
	if !p.enabled {
		return
	}
	p.draw()
	p.mu.Lock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.cs, p.offered, p.done, p.ok, p.failed, p.sent, p.started = cs, offered, 0, 0, 0, 0, time.Now()
	p.mu.Unlock()
}

func (p *progress) dispatched(cs loadgen.Case, phase string) {
	if !p.enabled || phase != loadgen.PhaseMeasured {
		return
	}
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
}

func (p *progress) request(cs loadgen.Case, phase string, st client.Outcome) {
	if !p.enabled || phase != loadgen.PhaseMeasured {
		return
	}
	p.mu.Lock()
	p.done++
	switch st {
	case client.OK:
		p.ok++
	case client.Dropped:
		p.failed++
		p.dropped++ // never sent
	default:
		p.failed++
	}
	p.mu.Unlock()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cs.ID == "" {
		return
	}
	el := time.Since(p.started).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done) / el
	}
	offered := "?"
	if p.offered > 0 {
		offered = fmt.Sprint(p.offered)
	}
	inFlight := max(p.sent-(p.done-p.dropped), 0)
	fmt.Fprintf(p.w, "\r\033[K%s: %d/%s done, ok %d, failed %d, %.1f req/s, %d in flight", p.cs.ID, p.done, offered, p.ok, p.failed, rate, inFlight)
	p.drawn = true
}
