package exporter

import (
	"slices"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

func found(over string, lower, upper *float64, binding *string) *artifact.Search {
	return &artifact.Search{Over: over, Status: artifact.SearchFound, BracketLower: lower, BracketUpper: upper, BindingCriterion: binding}
}

// TestSearchFinishedSeries: a completed search publishes its bracket, binding criterion and
// time; the next one moves the bracket to _previous; an interrupted one only counts.
func TestSearchFinishedSeries(t *testing.T) {
	e := New(Options{})
	l := probeA
	e.InitSearches(l)
	t1, t2, t3 := time.Unix(1_700_000_000, 0), time.Unix(1_700_086_400, 0), time.Unix(1_700_090_000, 0)
	e.SearchFinished(l, found(artifact.OverConcurrency, p(9.0), p(10.0), p("client.ttft p95")), artifact.SearchFound, t1)
	fams := gather(t, e)
	bound := func(name, over, b string) float64 {
		return value(t, fams, name, probeLabels(l, LabelOver, over, LabelBound, b))
	}
	if lo, up := bound("inferprobe_capacity", "concurrency", "lower"), bound("inferprobe_capacity", "concurrency", "upper"); lo != 9 || up != 10 {
		t.Errorf("bracket [%g, %g], want [9, 10]", lo, up)
	}
	if n := len(fams["inferprobe_capacity_previous"].GetMetric()); n != 0 {
		t.Errorf("%d previous series after the first search, want none", n)
	}
	if v := value(t, fams, "inferprobe_capacity_binding_criterion", probeLabels(l, LabelCriterion, "client.ttft p95")); v != 1 {
		t.Errorf("binding criterion %g, want 1", v)
	}
	if v := value(t, fams, "inferprobe_capacity_last_search_timestamp_seconds", probeLabels(l)); v != 1_700_000_000 {
		t.Errorf("last search %g", v)
	}

	// The second search: upper bound only (none: the minimum failed), binding backlog.
	e.SearchFinished(l, &artifact.Search{Over: artifact.OverConcurrency, Status: artifact.SearchNone, BracketUpper: p(2.0),
		BindingCriterion: p("backlog")}, artifact.SearchNone, t2)
	e.SearchFinished(l, nil, SearchInterrupted, t3)
	fams = gather(t, e)
	if lo, up := bound("inferprobe_capacity_previous", "concurrency", "lower"), bound("inferprobe_capacity_previous", "concurrency", "upper"); lo != 9 || up != 10 {
		t.Errorf("previous bracket [%g, %g], want [9, 10]", lo, up)
	}
	if got := series(fams, "inferprobe_capacity"); !slices.Equal(got, []string{"bound=upper,model=facebook/opt-125m,over=concurrency,probe=steady,target=vllm"}) {
		t.Errorf("capacity series %v, want only the upper bound", got)
	}
	if v := bound("inferprobe_capacity", "concurrency", "upper"); v != 2 {
		t.Errorf("upper %g, want 2", v)
	}
	if got := series(fams, "inferprobe_capacity_binding_criterion"); len(got) != 1 || metric(t, fams, "inferprobe_capacity_binding_criterion", probeLabels(l, LabelCriterion, "backlog")) == nil {
		t.Errorf("binding series %v, want only backlog", got)
	}
	want := map[string]float64{"found": 1, "none": 1, "interrupted": 1, "above_range": 0, "undecided": 0, "failed": 0}
	for o, w := range want {
		if v := value(t, fams, "inferprobe_capacity_searches_total", probeLabels(l, LabelOutcome, o)); v != w {
			t.Errorf("searches_total{outcome=%s} = %g, want %g", o, v, w)
		}
	}
	// The interrupted search is the last run; the last success is the completed one.
	if v := value(t, fams, "inferprobe_probe_last_run_timestamp_seconds", probeLabels(l)); v != 1_700_090_000 {
		t.Errorf("last run %g", v)
	}
	if v := value(t, fams, "inferprobe_probe_last_success_timestamp_seconds", probeLabels(l)); v != 1_700_086_400 {
		t.Errorf("last success %g", v)
	}
}

// TestSearchOverChangeAndForget: a search over another control variable drops the previous
// bracket (its units differ); ForgetProbe deletes the capacity gauges and keeps the counter.
func TestSearchOverChangeAndForget(t *testing.T) {
	e := New(Options{})
	l := probeB
	e.InitSearches(l)
	now := time.Unix(1_700_000_000, 0)
	e.SearchFinished(l, found(artifact.OverConcurrency, p(9.0), p(10.0), nil), artifact.SearchFound, now)
	e.SearchFinished(l, found(artifact.OverRate, p(30.5), p(33.0), nil), artifact.SearchFound, now)
	fams := gather(t, e)
	if n := len(fams["inferprobe_capacity_previous"].GetMetric()); n != 0 {
		t.Errorf("%d previous series across a change of control variable, want none", n)
	}
	if v := value(t, fams, "inferprobe_capacity", probeLabels(l, LabelOver, "rate", LabelBound, "lower")); v != 30.5 {
		t.Errorf("rate lower %g, want 30.5", v)
	}
	if n := len(fams["inferprobe_capacity_binding_criterion"].GetMetric()); n != 0 {
		t.Errorf("%d binding series without a binding criterion", n)
	}
	e.ForgetProbe(l)
	fams = gather(t, e)
	for _, name := range []string{"inferprobe_capacity", "inferprobe_capacity_last_search_timestamp_seconds"} {
		if n := len(fams[name].GetMetric()); n != 0 {
			t.Errorf("%s: %d series after ForgetProbe", name, n)
		}
	}
	if v := value(t, fams, "inferprobe_capacity_searches_total", probeLabels(l, LabelOutcome, "found")); v != 2 {
		t.Errorf("searches_total{found} = %g after ForgetProbe, want 2", v)
	}
	// A search ending after the forget is counted but sets no gauge again.
	e.SearchFinished(l, found(artifact.OverRate, p(20.0), p(22.0), nil), artifact.SearchFound, now)
	fams = gather(t, e)
	for _, name := range []string{"inferprobe_capacity", "inferprobe_probe_last_run_timestamp_seconds"} {
		if n := len(fams[name].GetMetric()); n != 0 {
			t.Errorf("%s: %d series from a search of a forgotten probe", name, n)
		}
	}
	if v := value(t, fams, "inferprobe_capacity_searches_total", probeLabels(l, LabelOutcome, "found")); v != 3 {
		t.Errorf("searches_total{found} = %g, want 3", v)
	}
	// Configured again: a new search has no previous bracket.
	e.InitSearches(l)
	e.SearchFinished(l, found(artifact.OverRate, p(20.0), p(22.0), nil), artifact.SearchFound, now)
	fams = gather(t, e)
	if n := len(fams["inferprobe_capacity_previous"].GetMetric()); n != 0 {
		t.Errorf("%d previous series after a forget", n)
	}
	if v := value(t, fams, "inferprobe_capacity", probeLabels(l, LabelOver, "rate", LabelBound, "upper")); v != 22 {
		t.Errorf("upper %g after configuring again, want 22", v)
	}
}
