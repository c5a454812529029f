package exporter

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferprobe/inferprobe/artifact"
)

// Label names of the capacity series.
const (
	LabelOver      = "over"
	LabelCriterion = "criterion"
)

// Bounds of the capacity bracket (inferprobe_capacity{bound}).
const (
	BoundLower = "lower"
	BoundUpper = "upper"
)

// Search outcomes (inferprobe_capacity_searches_total{outcome}): a completed search's status
// (artifact.SearchFound, SearchAboveRange, SearchNone, SearchUndecided), or one of these for
// a search that did not complete.
const (
	SearchInterrupted = artifact.SearchInterrupted // stopped by a reload or shutdown
	SearchFailed      = "failed"                   // a probe run could not be made or judged
)

// searchOutcomes are the outcomes of inferprobe_capacity_searches_total.
var searchOutcomes = []string{artifact.SearchFound, artifact.SearchAboveRange, artifact.SearchNone, artifact.SearchUndecided,
	SearchInterrupted, SearchFailed}

// capacitySeries are the series of search probes (capacity canaries). Their gauges hold
// the last completed search until the next one completes, whatever the cadence.
type capacitySeries struct {
	bracket  *prometheus.GaugeVec   // target, model, probe, over, bound
	previous *prometheus.GaugeVec   // target, model, probe, over, bound
	binding  *prometheus.GaugeVec   // target, model, probe, criterion
	last     *prometheus.GaugeVec   // target, model, probe
	searches *prometheus.CounterVec // target, model, probe, outcome

	mu      sync.Mutex
	current map[Labels]bracket // the last completed search's bracket, by probe
	// active are the search probes configured (InitSearches) and not forgotten since: a
	// search of a forgotten probe that ends after ForgetProbe is counted, but its gauges
	// are not set again.
	active map[Labels]bool
}

// bracket is a completed search's control variable and bounds (nil: none).
type bracket struct {
	over         string
	lower, upper *float64
}

func newCapacitySeries(reg *prometheus.Registry) *capacitySeries {
	probe := []string{LabelTarget, LabelModel, LabelProbe}
	bounded := append(slices.Clone(probe), LabelOver, LabelBound)
	c := &capacitySeries{current: map[Labels]bracket{}, active: map[Labels]bool{},
		bracket: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inferprobe_capacity",
			Help: "Bracket of the probe's last completed capacity search, in the control variable's unit (over=concurrency: workers; over=rate: requests per second): lower = the largest value shown to pass below every failing one, upper = the lowest failing value; a bound the search did not find is absent."}, bounded),
		previous: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inferprobe_capacity_previous",
			Help: "Bracket of the completed capacity search before the last one (same units; absent before the second search, or when the control variable changed)."}, bounded),
		binding: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inferprobe_capacity_binding_criterion",
			Help: "1 for the binding criterion of the last completed capacity search (the test that failed at the upper bound with the largest margin, e.g. \"client.ttft p95\", or \"backlog\"); absent when none."}, append(slices.Clone(probe), LabelCriterion)),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inferprobe_capacity_last_search_timestamp_seconds",
			Help: "End of the probe's last completed capacity search, Unix seconds."}, probe),
		searches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inferprobe_capacity_searches_total",
			Help: "Finished capacity searches by outcome: found, above_range, none, undecided (completed), interrupted, failed."}, append(slices.Clone(probe), LabelOutcome)),
	}
	reg.MustRegister(c.bracket, c.previous, c.binding, c.last, c.searches)
	return c
}

// InitSearches creates a search probe's inferprobe_capacity_searches_total series at 0 for
// every outcome, so that the first search is seen by increase(), and marks the probe
// configured: SearchFinished publishes its gauges until ForgetProbe.
func (e *Exporter) InitSearches(l Labels) {
	e.capacity.mu.Lock()
	e.capacity.active[l] = true
	e.capacity.mu.Unlock()
	for _, o := range searchOutcomes {
		e.capacity.searches.WithLabelValues(l.values(o)...).Add(0)
	}
}

// SearchFinished publishes one finished capacity search of probe l, ended at end. rec is
// the search's infer.search record when it completed (nil otherwise); outcome is then its
// status, else SearchInterrupted or SearchFailed. The search is counted once in
// inferprobe_capacity_searches_total; unless the probe was forgotten since its
// InitSearches, inferprobe_probe_last_run_timestamp_seconds is set to end, and a completed
// search also moves the bracket published so far to
// inferprobe_capacity_previous (dropped when its control variable differs), publishes its
// own bracket and binding criterion, and sets the last-search and last-success timestamps.
func (e *Exporter) SearchFinished(l Labels, rec *artifact.Search, outcome string, end time.Time) {
	c := e.capacity
	e.mu.Lock()
	defer e.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := float64(end.UnixNano()) / 1e9
	c.searches.WithLabelValues(l.values(labelValue(outcome))...).Inc()
	if !c.active[l] {
		return
	}
	e.lastRun.WithLabelValues(l.values()...).Set(ts)
	if rec == nil {
		return
	}
	m := l.match()
	prev, had := c.current[l]
	c.previous.DeletePartialMatch(m)
	if had && prev.over == rec.Over {
		setBracket(c.previous, l, prev)
	}
	cur := bracket{over: labelValue(rec.Over), lower: rec.BracketLower, upper: rec.BracketUpper}
	c.current[l] = cur
	c.bracket.DeletePartialMatch(m)
	setBracket(c.bracket, l, cur)
	c.binding.DeletePartialMatch(m)
	if rec.BindingCriterion != nil {
		c.binding.WithLabelValues(l.values(labelValue(*rec.BindingCriterion))...).Set(1)
	}
	c.last.WithLabelValues(l.values()...).Set(ts)
	e.lastSuccess.WithLabelValues(l.values()...).Set(ts)
}

// setBracket sets v's lower and upper series of l to b's bounds (an absent bound is left out).
func setBracket(v *prometheus.GaugeVec, l Labels, b bracket) {
	for _, x := range []struct {
		bound string
		v     *float64
	}{{BoundLower, b.lower}, {BoundUpper, b.upper}} {
		if x.v != nil {
			v.WithLabelValues(l.values(b.over, x.bound)...).Set(*x.v)
		}
	}
}

// forget deletes the capacity gauges of probe l (its counter stays). Exporter.mu is held.
func (c *capacitySeries) forget(l Labels) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.current, l)
	delete(c.active, l)
	m := l.match()
	for _, v := range []*prometheus.GaugeVec{c.bracket, c.previous, c.binding, c.last} {
		v.DeletePartialMatch(m)
	}
}
