package prom

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// memSink keeps written scrape records.
type memSink struct {
	mu   sync.Mutex
	recs []artifact.MetricsScrape
	err  error
}

func (m *memSink) Write(rec artifact.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, *rec.(*artifact.MetricsScrape))
	return m.err
}

func (m *memSink) Close() error { return nil }

func (m *memSink) snapshot() []artifact.MetricsScrape {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]artifact.MetricsScrape(nil), m.recs...)
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countMarker(recs []artifact.MetricsScrape, marker string) int {
	n := 0
	for _, r := range recs {
		if r.Marker == marker {
			n++
		}
	}
	return n
}

func TestPhaseSamplerBracketsEachPhase(t *testing.T) {
	srv := newMetricsServer(t, textBody(preText))
	s := newScraper(t, Config{URL: srv.URL + "/metrics", Interval: 10 * time.Millisecond})
	sink := &memSink{}
	var warnings []string
	p := NewPhaseSampler(s, sink, func(m string) { warnings = append(warnings, m) })
	ctx := context.Background()
	for _, phase := range []string{"warmup", "measured"} {
		p.PhaseStart(ctx, "c1", phase)
		if recs := sink.snapshot(); recs[len(recs)-1].Marker != artifact.ScrapeMarkerPhaseStart {
			t.Fatalf("PhaseStart returned before its scrape was written")
		}
		waitFor(t, "two interval scrapes", func() bool {
			n := 0
			for _, r := range sink.snapshot() {
				if r.Marker == artifact.ScrapeMarkerInterval && *r.Phase == phase {
					n++
				}
			}
			return n >= 2
		})
		p.PhaseEnd(ctx, "c1", phase)
	}
	recs := sink.snapshot()
	if recs[0].Marker != artifact.ScrapeMarkerPhaseStart || recs[len(recs)-1].Marker != artifact.ScrapeMarkerPhaseEnd {
		t.Errorf("first %s last %s", recs[0].Marker, recs[len(recs)-1].Marker)
	}
	if countMarker(recs, artifact.ScrapeMarkerPhaseStart) != 2 || countMarker(recs, artifact.ScrapeMarkerPhaseEnd) != 2 {
		t.Errorf("markers %d/%d", countMarker(recs, artifact.ScrapeMarkerPhaseStart), countMarker(recs, artifact.ScrapeMarkerPhaseEnd))
	}
	// No interval scrape after a phase's end: each phase's records are
	// phase_start, interval…, phase_end in order.
	phaseOf := map[string][]string{}
	for _, r := range recs {
		if *r.CaseID != "c1" || r.Status != artifact.ScrapeOK || r.IntervalMS != 10 {
			t.Errorf("record %+v", r)
		}
		phaseOf[*r.Phase] = append(phaseOf[*r.Phase], r.Marker)
	}
	for phase, ms := range phaseOf {
		for i, m := range ms {
			if (i == 0) != (m == artifact.ScrapeMarkerPhaseStart) || (i == len(ms)-1) != (m == artifact.ScrapeMarkerPhaseEnd) {
				t.Errorf("%s markers %v", phase, ms)
				break
			}
		}
	}
	time.Sleep(30 * time.Millisecond)
	if n := len(sink.snapshot()); n != len(recs) {
		t.Errorf("%d scrapes written after the last phase ended", n-len(recs))
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %v", warnings)
	}
	tally := p.Tally()
	if tally.OK != len(recs) || tally.Failed != 0 {
		t.Errorf("tally %d ok %d failed, want %d ok", tally.OK, tally.Failed, len(recs))
	}
	cap := s.Capabilities(artifact.Context{RunID: "run-1"}, tally)
	if !cap.Available || cap.Component != "vllm.metrics" || cap.Metadata["failed_scrapes"] != 0 || cap.Metadata["per_request_attribution"] != "none" {
		t.Errorf("capabilities %+v", cap)
	}
	if !setOf(cap.Enabled)["queue_depth"] || !setOf(cap.Collected)["kv_cache_usage"] || len(cap.Supported) != len(engine.Catalogue()) {
		t.Errorf("enabled %v", cap.Enabled)
	}
	for _, f := range cap.Collected {
		if !setOf(cap.Supported)[f] {
			t.Errorf("collected %s is not supported", f)
		}
	}
	if _, err := artifact.MarshalLine(cap); err != nil {
		t.Errorf("capabilities do not encode: %v", err)
	}
}

// Failed scrapes are recorded, the phase goes on, and the first failure is
// warned once.
func TestPhaseSamplerWarnsOnceOnFailures(t *testing.T) {
	srv := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	other := newMetricsServer(t, textBody(preText))
	s := newScraper(t, Config{URL: srv.URL + "/metrics", Endpoint: other.URL + "/v1", APIKey: "k", Interval: 10 * time.Millisecond})
	sink := &memSink{}
	var mu sync.Mutex
	var warnings []string
	p := NewPhaseSampler(s, sink, func(m string) { mu.Lock(); warnings = append(warnings, m); mu.Unlock() })
	p.PhaseStart(context.Background(), "c1", "measured")
	waitFor(t, "an interval scrape", func() bool { return countMarker(sink.snapshot(), artifact.ScrapeMarkerInterval) >= 1 })
	p.PhaseEnd(context.Background(), "c1", "measured")
	recs := sink.snapshot()
	for _, r := range recs {
		if r.Status != artifact.ScrapeError || *r.Error != "HTTP 503" {
			t.Errorf("record %s %v", r.Status, deref2(r.Error))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 2 || !strings.Contains(warnings[0], "without the API key") || !strings.Contains(warnings[1], "HTTP 503") {
		t.Errorf("warnings %q, want the key notice and one failure", warnings)
	}
	tally := p.Tally()
	cap := s.Capabilities(artifact.Context{}, tally)
	if cap.Available || cap.Metadata["failed_scrapes"] != len(recs) || *(cap.Metadata["last_error"].(*string)) != "HTTP 503" || len(cap.Enabled) != 0 {
		t.Errorf("capabilities %+v", cap)
	}
	b := analyze.VLLMCaseTelemetry(recs, "c1")
	if strings.Join(b.Reasons, " ") != "scrape_failed:phase_start scrape_failed:phase_end" {
		t.Errorf("reasons %v", b.Reasons)
	}
}

// An interrupted run's end scrape still happens, within its own deadline;
// a sink error is kept, not fatal.
func TestPhaseSamplerEndScrapeAfterCancel(t *testing.T) {
	srv := newMetricsServer(t, textBody(preText))
	s := newScraper(t, Config{URL: srv.URL + "/metrics", Interval: time.Hour})
	sink := &memSink{err: errors.New("disk full")}
	p := NewPhaseSampler(s, sink, nil)
	ctx, cancel := context.WithCancel(context.Background())
	p.PhaseStart(ctx, "c1", "measured")
	cancel()
	p.PhaseEnd(ctx, "c1", "measured")
	recs := sink.snapshot()
	if len(recs) != 2 || recs[1].Marker != artifact.ScrapeMarkerPhaseEnd || recs[1].Status != artifact.ScrapeOK {
		t.Fatalf("records %d, last %+v", len(recs), recs[len(recs)-1])
	}
	if err := p.WriteErr(); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteErr %v", err)
	}
	p.Close()
}

// An interval scrape in flight at phase end may finish and is recorded; one
// that hangs past the abandon bound is cancelled and not recorded.
func TestPhaseSamplerInFlightIntervalScrapeAtPhaseEnd(t *testing.T) {
	for _, c := range []struct {
		name           string
		delay, abandon time.Duration
		recorded       bool
	}{{"finishes", 50 * time.Millisecond, 5 * time.Second, true}, {"hangs", 20 * time.Second, 300 * time.Millisecond, false}} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			slow, slowStarted := false, false
			srv := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				s := slow
				slowStarted = slowStarted || s
				mu.Unlock()
				if s {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(c.delay):
					}
				}
				textBody(preText)(w, r)
			})
			s := newScraper(t, Config{URL: srv.URL + "/metrics", Interval: 5 * time.Millisecond})
			sink := &memSink{}
			p := NewPhaseSampler(s, sink, nil)
			p.abandonAfter = c.abandon
			p.PhaseStart(context.Background(), "c1", "measured")
			mu.Lock()
			slow = true
			mu.Unlock()
			var n int
			waitFor(t, "a slow interval scrape in flight", func() bool {
				mu.Lock()
				defer mu.Unlock()
				if slowStarted {
					slow = false // the phase_end scrape answers at once
					n = len(sink.snapshot())
				}
				return slowStarted
			})
			p.PhaseEnd(context.Background(), "c1", "measured")
			recs := sink.snapshot()
			for _, r := range recs {
				if r.Status != artifact.ScrapeOK {
					t.Errorf("a failed scrape was recorded: %s", deref2(r.Error))
				}
			}
			tail := recs[n:]
			if tail[len(tail)-1].Marker != artifact.ScrapeMarkerPhaseEnd {
				t.Fatalf("last marker %s", tail[len(tail)-1].Marker)
			}
			if got := len(tail) == 2 && tail[0].Marker == artifact.ScrapeMarkerInterval; got != c.recorded {
				markers := []string{}
				for _, r := range tail {
					markers = append(markers, r.Marker)
				}
				t.Errorf("records after PhaseEnd began: %v; want the in-flight interval scrape recorded: %v", markers, c.recorded)
			}
		})
	}
}
