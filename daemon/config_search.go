package daemon

import (
	"encoding/json"
	"math"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/capacity"
	"github.com/inferprobe/inferprobe/loadgen"
)

// Probe kinds (probes[].kind).
const (
	KindRun    = "run"    // one run of the workload per start (the default)
	KindSearch = "search" // one capacity search per start (a capacity canary)
)

// SearchProbe is a validated search probe's search: each start runs capacity.Search over a
// capacity.RunProber of Workload (its search id, run ids and seed set per search).
type SearchProbe struct {
	// Options are the search's options, Tests from the probe's SLO at the quantile; Seed
	// and SearchID are set per search.
	Options capacity.Options
	// Workload is the probe's workload as given, with the target's endpoint, model and key.
	Workload loadgen.Workload
	// Warmup is the workload's warmup-requests when it gives them (nil: ⌈value⌉ per probe).
	Warmup *int
	MaxLag time.Duration
}

// searchWorkloadKeys are workload keys a search sets itself.
var searchWorkloadKeys = []string{"concurrency", "rate", "duration", "arrival-trace"}

// maxLagRange is the range of search.max_lag, seconds.
var maxLagRange = artifact.Range{Min: 0.001, Max: 3600, Unit: "seconds"}

// loadSearch validates a search probe (kind: search): its search block, its SLO (required),
// its schedule (every, not continuous) and its workload (the keys the search sets refused,
// the rest checked as the first probe will run it). node is the workload's mapping, wkey
// its key, w the decoded workload. It returns the first probe's run configuration.
func loadSearch(key string, p ProbeFile, pr *Probe, wkey string, node *yaml.Node, w loadgen.Workload) (*loadgen.Config, error) {
	if pr.Continuous {
		return nil, cfgErr(key+".continuous", "a search probe runs on a schedule: give every")
	}
	if pr.SLO == nil {
		// Keyed by the probe, whose line the file has (the slo key is missing).
		return nil, cfgErr(key, "a search probe needs an slo: the search finds the largest load that meets it")
	}
	for _, k := range searchWorkloadKeys {
		if n := mappingKey(node, k); n != nil {
			return nil, cfgErr(wkey+"."+k, "is set by the search (over, min and max; each probe's size) (line %d)", n.Line)
		}
	}
	sf := SearchFile{}
	if p.Search != nil {
		sf = *p.Search
	}
	o, err := searchOptions(key+".search", sf)
	if err != nil {
		return nil, err
	}
	if n := mappingKey(node, "arrival"); n != nil && (o.Over != artifact.OverRate || w.Arrival == nil || (*w.Arrival != "poisson" && *w.Arrival != "fixed-rate")) {
		return nil, cfgErr(wkey+".arrival", "a search takes poisson or fixed-rate with over: rate only (line %d)", n.Line)
	}
	quantile := capacity.DefaultQuantile
	if sf.Quantile != nil {
		quantile = *sf.Quantile
	}
	if o.Tests, err = capacity.TestsOf(pr.SLO.Policy, quantile); err != nil {
		if sf.Quantile != nil {
			return nil, cfgErr(key+".search.quantile", "%v", err)
		}
		return nil, cfgErr(key+".slo", "%v", err)
	}
	if w.Requests != nil {
		o.Requests = *w.Requests
	}
	sp := &SearchProbe{Options: o, Workload: w, MaxLag: capacity.DefaultMaxLag}
	if sf.MaxLag != nil {
		sp.MaxLag = time.Duration(*sf.MaxLag)
	}
	if mappingKey(node, "warmup-requests") != nil {
		sp.Warmup = artifact.Ptr(w.WarmupRequests)
	}
	if _, err := capacity.PlanOf(o); err != nil {
		return nil, cfgErr(key+".search", "%v", err)
	}
	rp := &capacity.RunProber{Workload: w, Over: o.Over, Tests: o.Tests, Warmup: sp.Warmup}
	_, first, err := rp.Check(o)
	if err != nil {
		return nil, workloadError(wkey, node, err)
	}
	pr.Search = sp
	return first, nil
}

// searchOptions checks a search block's values, each under its own key, and returns the
// search's options (defaults filled in; no tests yet).
func searchOptions(key string, sf SearchFile) (capacity.Options, error) {
	o := capacity.Options{Over: artifact.OverConcurrency, Min: capacity.DefaultMin, Max: capacity.DefaultMax,
		Tolerance: capacity.DefaultTolerance, Confidence: capacity.DefaultConfidence,
		MaxProbes: capacity.DefaultMaxProbes, MaxRequestsPerProbe: capacity.DefaultMaxRequestsPerProbe}
	if sf.Over != "" {
		o.Over = sf.Over
	}
	if o.Over != artifact.OverConcurrency && o.Over != artifact.OverRate {
		return o, cfgErr(key+".over", "want concurrency or rate, not %q", sf.Over)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, v := range []struct {
		name string
		in   *float64
		to   *float64
	}{{"min", sf.Min, &o.Min}, {"max", sf.Max, &o.Max}} {
		if v.in == nil {
			continue
		}
		whole := o.Over == artifact.OverRate || (*v.in == math.Trunc(*v.in) && *v.in <= 1e6)
		if !finite(*v.in) || *v.in <= 0 || !whole {
			return o, cfgErr(key+"."+v.name, "want a number > 0 (a whole number up to 1000000 with over: concurrency), not %g", *v.in)
		}
		*v.to = *v.in
	}
	if !(o.Min < o.Max) {
		k := key + ".max"
		if sf.Max == nil {
			k = key + ".min"
		}
		return o, cfgErr(k, "min must be below max (min %g, max %g)", o.Min, o.Max)
	}
	for _, v := range []struct {
		name string
		in   *float64
		to   *float64
	}{{"tolerance", sf.Tolerance, &o.Tolerance}, {"confidence", sf.Confidence, &o.Confidence}} {
		if v.in == nil {
			continue
		}
		if !(*v.in > 0 && *v.in < 1) {
			return o, cfgErr(key+"."+v.name, "want a number between 0 and 1, not %g", *v.in)
		}
		*v.to = *v.in
	}
	if sf.MaxProbes != nil {
		if o.MaxProbes = int(*sf.MaxProbes); o.MaxProbes < 2 || o.MaxProbes > 1000 {
			return o, cfgErr(key+".max_probes", "want a whole number within 2..1000, not %d", o.MaxProbes)
		}
	}
	if sf.MaxRequestsPerProbe != nil {
		if o.MaxRequestsPerProbe = int(*sf.MaxRequestsPerProbe); o.MaxRequestsPerProbe < 1 || o.MaxRequestsPerProbe > 10_000_000 {
			return o, cfgErr(key+".max_requests_per_probe", "want a whole number within 1..10000000, not %d", o.MaxRequestsPerProbe)
		}
	}
	if sf.MaxLag != nil {
		if err := maxLagRange.CheckDuration(time.Duration(*sf.MaxLag)); err != nil {
			return o, cfgErr(key+".max_lag", "%v", err)
		}
	}
	return o, nil
}

// searchKey is the part of a search probe's key its search block adds: a change of what
// the search sends restarts the probe.
func searchKey(sf *SearchFile) string {
	if sf == nil {
		return ""
	}
	b, _ := json.Marshal(sf) // plain numbers and strings: never fails
	return "\x1f" + string(b)
}

// kindOf checks a probe's kind and that only a search probe has a search block.
func kindOf(key string, p ProbeFile) (string, error) {
	switch p.Kind {
	case "", KindRun:
		if p.Search != nil {
			return "", cfgErr(key+".search", "only a probe of kind: search has a search block")
		}
		return KindRun, nil
	case KindSearch:
		return KindSearch, nil
	}
	return "", cfgErr(key+".kind", "want run or search, not %q", p.Kind)
}
