package exporter

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// SeriesDoc describes one inferprobe_ metric family as the registry exposes it.
type SeriesDoc struct {
	// Name is the family's name, e.g. "inferprobe_ttft_seconds".
	Name string
	// Type is "counter", "gauge" or "histogram".
	Type string
	// Help is the family's HELP text.
	Help string
	// Labels are its label names, sorted.
	Labels []string
}

// Series describes every inferprobe_ family an Exporter registers — those of New, of
// WatchReceiver and of WatchReload — sorted by name, read from a registry with one sample
// of each (empty label values): the generated list of exported series is this. Errors: a
// family the registry describes has no sample here (touch below must be told of it).
func Series() ([]SeriesDoc, error) {
	e := New(Options{Version: "dev"})
	e.WatchReceiver(func() ReceiverCounts { return ReceiverCounts{} })
	e.WatchReload(func() bool { return true }, func() float64 { return 0 })
	e.touch()
	fams, err := e.reg.Gather()
	if err != nil {
		return nil, err
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "inferprobe_") {
			got[f.GetName()] = f
		}
	}
	ch := make(chan *prometheus.Desc)
	go func() { e.reg.Describe(ch); close(ch) }()
	var missing []string
	for d := range ch {
		if name := descName(d); strings.HasPrefix(name, "inferprobe_") && got[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("exporter: %s registered but given no sample by touch", strings.Join(missing, ", "))
	}
	out := make([]SeriesDoc, 0, len(got))
	for name, f := range got {
		s := SeriesDoc{Name: name, Type: strings.ToLower(f.GetType().String()), Help: f.GetHelp()}
		if m := f.GetMetric(); len(m) > 0 {
			for _, lp := range m[0].GetLabel() {
				s.Labels = append(s.Labels, lp.GetName())
			}
		}
		sort.Strings(s.Labels)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// descNameRE reads the fully-qualified name out of a Desc's String(), the only place
// client_golang shows it.
var descNameRE = regexp.MustCompile(`fqName: "([^"]*)"`)

func descName(d *prometheus.Desc) string {
	if m := descNameRE.FindStringSubmatch(d.String()); m != nil {
		return m[1]
	}
	return ""
}

// touch gives every labelled family of e one child with empty label values, so that a
// gather shows its type and label names.
func (e *Exporter) touch() {
	for _, v := range []*prometheus.CounterVec{e.requests, e.promptTokens, e.outputTokens, e.sloRequests, e.probeRuns, e.capacity.searches} {
		touchVec(v.MetricVec)
	}
	for _, v := range []*prometheus.GaugeVec{e.sloObjective, e.attainment, e.goodput, e.coverage, e.lastSuccess, e.lastRun,
		e.interval, e.running, e.inFlight, e.scheduleMet, e.clientLimit, e.scrapeUp, e.scrapeDuration,
		e.capacity.bracket, e.capacity.previous, e.capacity.binding, e.capacity.last} {
		touchVec(v.MetricVec)
	}
	e.histMu.RLock()
	defer e.histMu.RUnlock()
	for _, v := range e.hist {
		touchVec(v.MetricVec)
	}
}

// touchVec creates v's child with every label value empty.
func touchVec(v *prometheus.MetricVec) {
	for n := 1; n <= 16; n++ {
		if _, err := v.GetMetricWithLabelValues(make([]string, n)...); err == nil {
			return
		}
	}
}
