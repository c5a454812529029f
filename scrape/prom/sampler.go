package prom

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// Bounds on a stopping phase: an interval scrape still in
// flight when a phase ends may finish within AbandonAfter and is abandoned
// (not recorded) after it, and a cancelled run's end scrape gets
// EndScrapeDeadline as a whole.
const (
	AbandonAfter      = 2 * time.Second
	EndScrapeDeadline = 2 * time.Second
)

// PhaseSampler scrapes around and during phases: one
// scrape just before a phase's first send (PhaseStart, marker
// phase_start), one every interval while it runs (marker interval), and one
// after its drain (PhaseEnd, marker phase_end). Every scrape is written to
// the sink, failed ones included; the run is never stopped by a scrape. The
// first failure is reported once through warn. PhaseStart and PhaseEnd have
// the signatures of loadgen.Hooks' fields. One phase runs at a time.
type PhaseSampler struct {
	s    *Scraper
	sink artifact.Sink
	warn func(string)

	mu       sync.Mutex
	tally    *engine.Tally
	warned   bool
	writeErr error
	cancel   context.CancelFunc // cancels the interval scrapes' context
	stop     chan struct{}      // closed when the phase ends
	done     chan struct{}      // closed when the interval loop has returned

	abandonAfter time.Duration
}

// NewPhaseSampler builds a sampler writing to sink. warn (optional) gets the
// first failed scrape's message, once, and a note when the API key is
// withheld from a metrics URL on another origin.
func NewPhaseSampler(s *Scraper, sink artifact.Sink, warn func(msg string)) *PhaseSampler {
	if warn == nil {
		warn = func(string) {}
	}
	p := &PhaseSampler{s: s, sink: sink, warn: warn, tally: engine.NewTally(), abandonAfter: AbandonAfter}
	if s.KeyWithheld() {
		warn(fmt.Sprintf("the vLLM metrics URL %s is not on the endpoint's origin; it is scraped without the API key", s.SourceURL()))
	}
	return p
}

// PhaseStart takes the phase_start scrape (synchronously, so it precedes the
// first send) and starts the interval scrapes.
func (p *PhaseSampler) PhaseStart(ctx context.Context, caseID, phase string) {
	p.stopInterval()
	p.record(p.s.Scrape(ctx, artifact.ScrapeMarkerPhaseStart, caseID, phase))
	scrapeCtx, cancel := context.WithCancel(ctx)
	stop, done := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.cancel, p.stop, p.done = cancel, stop, done
	p.mu.Unlock()
	go p.loop(scrapeCtx, stop, done, caseID, phase)
}

// loop scrapes every interval until stop is closed. A scrape in flight when
// the phase ends may finish (and is recorded) within abandonAfter; one cut
// short by the phase's end or the run's cancellation is not recorded.
func (p *PhaseSampler) loop(ctx context.Context, stop <-chan struct{}, done chan struct{}, caseID, phase string) {
	defer close(done)
	t := time.NewTicker(p.s.Interval())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select { // a pending tick never outruns the phase's end
		case <-stop:
			return
		default:
		}
		rec := p.s.Scrape(ctx, artifact.ScrapeMarkerInterval, caseID, phase)
		if ctx.Err() != nil {
			return
		}
		p.record(rec)
	}
}

// stopInterval stops the interval loop: no new scrape starts, one in flight
// gets abandonAfter to finish, then is cancelled.
func (p *PhaseSampler) stopInterval() {
	p.mu.Lock()
	cancel, stop, done := p.cancel, p.stop, p.done
	p.cancel, p.stop, p.done = nil, nil, nil
	p.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(p.abandonAfter):
		cancel()
		<-done // the cancelled request returns promptly
	}
	cancel()
}

// PhaseEnd stops the interval scrapes and takes the phase_end scrape. When
// ctx is already cancelled (an interrupted run) the end scrape still runs,
// bounded by EndScrapeDeadline.
func (p *PhaseSampler) PhaseEnd(ctx context.Context, caseID, phase string) {
	p.stopInterval()
	if ctx.Err() != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), EndScrapeDeadline)
		defer cancel()
		ctx = c
	}
	p.record(p.s.Scrape(ctx, artifact.ScrapeMarkerPhaseEnd, caseID, phase))
}

// Close stops any interval scrapes still running.
func (p *PhaseSampler) Close() { p.stopInterval() }

// record writes one scrape, counts it and warns once on the first failure.
func (p *PhaseSampler) record(rec artifact.MetricsScrape) {
	err := p.sink.Write(&rec)
	p.mu.Lock()
	p.tally.Add(&rec)
	if err != nil && p.writeErr == nil {
		p.writeErr = err
	}
	first := rec.Status != artifact.ScrapeOK && !p.warned
	if first {
		p.warned = true
	}
	p.mu.Unlock()
	if first {
		msg := "a vLLM metrics scrape failed"
		if rec.Error != nil {
			msg += " (" + *rec.Error + ")"
		}
		p.warn(msg + "; failed scrapes are recorded and the run continues")
	}
}

// Tally returns a copy of the counts and discoveries so far.
func (p *PhaseSampler) Tally() *engine.Tally {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tally.Clone()
}

// WriteErr returns the first error the sink returned, nil if none.
func (p *PhaseSampler) WriteErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writeErr
}
