// Package exporter publishes what inferprobe measures as live Prometheus series: a sink of the
// same records that feed a probe run's artifact (infer.request, infer.vllm_span), plus the
// judgement of each finished run (SLO outcomes, attainment and goodput bounds, span-join
// coverage), the span receiver's counters and the vLLM scrape health of each target.
//
// Conventions: one registry per Exporter, never the global one;
// every name starts with inferprobe_, uses base units (seconds, ratios) and ends in _total for
// counters; labels are target, model, probe, case (and slo, status, outcome, bound, over,
// criterion where they say so) — request and trace ids appear only in exemplars (request_id =
// the X-Request-Id sent, trace_id = the traceparent trace id). Only measured-phase requests
// are counted, as in `inferprobe analyze`. Series describes every family; docs/reference/metrics.md is
// generated from it.
package exporter

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label names.
const (
	LabelTarget  = "target"
	LabelModel   = "model"
	LabelProbe   = "probe"
	LabelCase    = "case"
	LabelSLO     = "slo"
	LabelStatus  = "status"
	LabelOutcome = "outcome"
	LabelBound   = "bound"
)

// Labels identify one probe: the configured target and probe names and the model it sends.
type Labels struct {
	Target, Model, Probe string
}

// values are the label values of l, then extra; each not valid UTF-8 has its bad bytes
// replaced by U+FFFD (client_golang panics on such a value).
func (l Labels) values(extra ...string) []string {
	return append([]string{labelValue(l.Target), labelValue(l.Model), labelValue(l.Probe)}, extra...)
}

func (l Labels) match() prometheus.Labels {
	return prometheus.Labels{LabelTarget: labelValue(l.Target), LabelModel: labelValue(l.Model), LabelProbe: labelValue(l.Probe)}
}

// Histogram keys: the SLO criterion key a histogram carries ("client.ttft", …, as in
// `--slo KEY:MS`), plus the non-criterion ones.
const (
	KeyTTFT             = artifact.MetricTTFT
	KeyTTFTFromIntended = artifact.MetricTTFTFromIntended
	KeyE2E              = artifact.MetricE2E
	KeyE2EFromIntended  = artifact.MetricE2EFromIntended
	KeyTPOT             = artifact.MetricTPOT
	KeyDispatchLag      = "dispatch_lag"
	KeyServerQueue      = "server.queue"
	KeyServerPrefill    = "server.prefill"
	KeyServerDecode     = "server.decode"
	KeyServerTTFT       = "server.ttft"
	KeyServerE2E        = "server.e2e"
)

type histogramDef struct {
	key, name, help string
	buckets         []float64
}

// latencyBuckets are the classic buckets of request latencies, seconds.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300}

// tokenBuckets are the classic buckets of per-token and per-phase server times, seconds.
var tokenBuckets = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60}

// lagBuckets are the classic buckets of dispatch lag, seconds (the contract's bound is 1 ms).
var lagBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}

var histogramDefs = []histogramDef{
	{KeyTTFT, "inferprobe_ttft_seconds", "Time to first token: send to the first non-empty content, reasoning or tool-call delta (streaming, successful requests).", latencyBuckets},
	{KeyTTFTFromIntended, "inferprobe_ttft_from_intended_seconds", "TTFT measured from the scheduled arrival (coordinated-omission safe): TTFT + dispatch lag.", latencyBuckets},
	{KeyE2E, "inferprobe_e2e_seconds", "End-to-end latency: send to the end of the response (after [DONE] when streaming), successful requests.", latencyBuckets},
	{KeyE2EFromIntended, "inferprobe_e2e_from_intended_seconds", "End-to-end latency from the scheduled arrival (coordinated-omission safe), successful requests.", latencyBuckets},
	{KeyTPOT, "inferprobe_tpot_seconds", "Time per output token: (e2e - TTFT)/(output_tokens - 1), only with server-reported usage and at least 2 output tokens.", tokenBuckets},
	{KeyDispatchLag, "inferprobe_dispatch_lag_seconds", "Dispatch lag: send time minus scheduled arrival time, every sent request.", lagBuckets},
	{KeyServerQueue, "inferprobe_server_queue_seconds", "Server queue time from the request's joined vLLM span (gen_ai.latency.time_in_queue).", latencyBuckets},
	{KeyServerPrefill, "inferprobe_server_prefill_seconds", "Server prefill time from the request's joined vLLM span (gen_ai.latency.time_in_model_prefill).", latencyBuckets},
	{KeyServerDecode, "inferprobe_server_decode_seconds", "Server decode time from the request's joined vLLM span (gen_ai.latency.time_in_model_decode).", latencyBuckets},
	{KeyServerTTFT, "inferprobe_server_ttft_seconds", "Server time to first token from the request's joined vLLM span (gen_ai.latency.time_to_first_token).", latencyBuckets},
	{KeyServerE2E, "inferprobe_server_e2e_seconds", "Server end-to-end time from the request's joined vLLM span (gen_ai.latency.e2e).", latencyBuckets},
}

// Options configure an Exporter.
type Options struct {
	// Thresholds are SLO limits in seconds by histogram key (KeyTTFT, …): each becomes a
	// classic bucket boundary of that histogram, exactly, so that a bucket counts the requests
	// within the limit. Unknown keys are ignored.
	Thresholds map[string][]float64
	// Version is inferprobe's version, exposed by inferprobe_build_info.
	Version string
	// NoNativeHistograms turns native (sparse) histogram buckets off; classic buckets are
	// always exposed.
	NoNativeHistograms bool
}

// Exporter holds one registry and every inferprobe_ series. It lives as long as the process:
// a reload changes its histograms' buckets (SetThresholds) and forgets removed probes'
// gauges (ForgetProbe), but never replaces it, so every run is published where /metrics
// reads.
type Exporter struct {
	reg     *prometheus.Registry
	handler http.Handler // built once: promhttp registers its error counter with it

	requests     *prometheus.CounterVec
	promptTokens *prometheus.CounterVec
	outputTokens *prometheus.CounterVec

	// histMu guards hist and buckets: held (read) while a value is observed, so that
	// SetThresholds swaps a histogram between two observations, never during one.
	histMu  sync.RWMutex
	opts    Options                             // as New got them
	hist    map[string]*prometheus.HistogramVec // by histogram key
	buckets map[string][]float64                // each histogram's classic bucket boundaries

	sloRequests  *prometheus.CounterVec
	sloObjective *prometheus.GaugeVec
	attainment   *prometheus.GaugeVec
	goodput      *prometheus.GaugeVec
	coverage     *prometheus.GaugeVec

	probeRuns   *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	lastRun     *prometheus.GaugeVec
	interval    *prometheus.GaugeVec
	running     *prometheus.GaugeVec
	inFlight    *prometheus.GaugeVec
	scheduleMet *prometheus.GaugeVec
	clientLimit *prometheus.GaugeVec

	scrapeUp       *prometheus.GaugeVec
	scrapeDuration *prometheus.GaugeVec

	spansUnrouted prometheus.Counter

	capacity *capacitySeries // search probes

	mu     sync.Mutex
	probes map[Labels]*probeState // probes with runs started and not finished
}

// probeState is what the runs of one probe in progress share: runs may overlap (a run still
// draining its spans while the next one runs), and the running and in-flight gauges cover
// them all. Its fields are guarded by Exporter.mu.
type probeState struct {
	runs     int   // runs started and not finished
	inFlight int64 // requests outstanding, over those runs
	// forget is set by ForgetProbe while runs are in progress: the last of them to finish
	// deletes the probe's gauges once it has published its end. SetProbeConfig clears it.
	forget bool
}

// BucketsFor returns the classic bucket boundaries of the histogram with key k under opts:
// its defaults with every finite positive threshold merged in, sorted, without duplicates.
func BucketsFor(k string, opts Options) []float64 {
	var b []float64
	for _, d := range histogramDefs {
		if d.key == k {
			b = slices.Clone(d.buckets)
		}
	}
	if b == nil {
		return nil
	}
	for _, t := range opts.Thresholds[k] {
		if t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t) {
			b = append(b, t)
		}
	}
	sort.Float64s(b)
	return slices.Compact(b)
}

// New builds an Exporter and registers its series, the Go and process collectors and
// inferprobe_build_info on a new registry.
func New(opts Options) *Exporter {
	reg := prometheus.NewRegistry()
	e := &Exporter{reg: reg, opts: opts, hist: map[string]*prometheus.HistogramVec{}, buckets: map[string][]float64{},
		probes: map[Labels]*probeState{}}
	probe := []string{LabelTarget, LabelModel, LabelProbe}
	perCase := append(slices.Clone(probe), LabelCase)
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	e.requests = counter("inferprobe_requests_total", "Measured requests by outcome status (ok, timeout, rejected, unreachable, delivery_unknown, error, dropped, cancelled).", append(slices.Clone(perCase), LabelStatus)...)
	for _, d := range histogramDefs {
		v := newHistogram(d, opts)
		reg.MustRegister(v)
		e.hist[d.key], e.buckets[d.key] = v, BucketsFor(d.key, opts)
	}
	e.promptTokens = counter("inferprobe_prompt_tokens_total", "Prompt tokens of measured requests with a prompt token count (server usage, else the tokenizer's count).", perCase...)
	e.outputTokens = counter("inferprobe_output_tokens_total", "Output tokens of measured requests with an output token count (server usage, else the tokenizer's count).", perCase...)

	e.sloRequests = counter("inferprobe_slo_requests_total", "Judged measured requests of finished probe runs by SLO outcome (met, missed, unknown); failures count as missed. Advances when a run's artifact is analysed.", append(slices.Clone(perCase), LabelSLO, LabelOutcome)...)
	e.sloObjective = gauge("inferprobe_slo_objective_ratio", "The SLO's attainment target (the policy's attainment_target, else the probe's objective).", append(slices.Clone(probe), LabelSLO)...)
	e.attainment = gauge("inferprobe_slo_attainment_ratio", "SLO attainment of the last finished probe run over every offered request: lower counts unknown as missed, upper as met.", append(slices.Clone(perCase), LabelSLO, LabelBound)...)
	e.goodput = gauge("inferprobe_goodput_requests_per_second", "Goodput of the last finished probe run: requests meeting the SLO per second of the case's rate interval (lower: unknown as missed; upper: as met).", append(slices.Clone(perCase), LabelSLO, LabelBound)...)
	e.coverage = gauge("inferprobe_span_join_coverage_ratio", "Share of the last finished run's accepted requests that a server span confirmed (analyze's server_evidence_coverage).", perCase...)

	e.probeRuns = counter("inferprobe_probe_runs_total", "Probe runs by outcome: completed, interrupted, incomplete, failed (could not start).", append(slices.Clone(probe), LabelOutcome)...)
	e.lastSuccess = gauge("inferprobe_probe_last_success_timestamp_seconds", "End of the last completed probe run with at least one successful measured request, Unix seconds.", probe...)
	e.lastRun = gauge("inferprobe_probe_last_run_timestamp_seconds", "End of the last probe run of any outcome, Unix seconds.", probe...)
	e.interval = gauge("inferprobe_probe_interval_seconds", "Configured seconds between probe run starts (continuous probes: the run length).", probe...)
	e.running = gauge("inferprobe_probe_running", "1 while a probe run is in progress, else 0.", probe...)
	e.inFlight = gauge("inferprobe_in_flight_requests", "Requests of the probe outstanding now.", probe...)
	e.clientLimit = gauge("inferprobe_probe_client_limited", "1 when the last finished run's self-audit found the load generator, not the server, shaped its numbers (dispatch lag p99 over 1 ms, dispatch under 99.5% of the schedule, arrivals held or dropped, or client CPU at 95% of its CPUs), else 0.", probe...)
	e.scheduleMet = gauge("inferprobe_probe_schedule_met", "1 when the last finished run dispatched every measured arrival on schedule (none dropped or held for a slot, p99 dispatch lag at most 1 ms), else 0.", probe...)

	e.scrapeUp = gauge("inferprobe_scrape_up", "1 when the last scrape of the target's vLLM /metrics succeeded, else 0.", LabelTarget)
	e.scrapeDuration = gauge("inferprobe_scrape_duration_seconds", "Duration of the last scrape of the target's vLLM /metrics.", LabelTarget)

	e.spansUnrouted = prometheus.NewCounter(prometheus.CounterOpts{Name: "inferprobe_receiver_spans_unrouted_total", Help: "Delivered spans that matched no running or draining probe run."})
	reg.MustRegister(e.spansUnrouted)
	e.capacity = newCapacitySeries(reg)

	build := gauge("inferprobe_build_info", "A metric with a constant '1' value labeled by version and goversion.", "version", "goversion")
	build.WithLabelValues(opts.Version, runtime.Version()).Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          reg,
	})
	return e
}

// newHistogram is the histogram vector of d under opts, by probe and case.
func newHistogram(d histogramDef, opts Options) *prometheus.HistogramVec {
	ho := prometheus.HistogramOpts{Name: d.name, Help: d.help, Buckets: BucketsFor(d.key, opts)}
	if !opts.NoNativeHistograms {
		ho.NativeHistogramBucketFactor = 1.1
		ho.NativeHistogramMaxBucketNumber = 160
		ho.NativeHistogramMinResetDuration = time.Hour
	}
	return prometheus.NewHistogramVec(ho, []string{LabelTarget, LabelModel, LabelProbe, LabelCase})
}

// SetThresholds makes the histograms' classic buckets hold the SLO limits th (seconds by
// histogram key, as Options.Thresholds). Each histogram whose boundaries change is replaced,
// in the same registry, by an empty one (rate() reads its restart as a counter reset); the
// other histograms, the counters and the gauges keep their values, and runs in progress go
// on publishing, into the new histograms. An error (the registry refusing a histogram) keeps
// that histogram as it was.
func (e *Exporter) SetThresholds(th map[string][]float64) error {
	e.histMu.Lock()
	defer e.histMu.Unlock()
	opts := e.opts
	opts.Thresholds = th
	var errs []error
	for _, d := range histogramDefs {
		if slices.Equal(BucketsFor(d.key, opts), e.buckets[d.key]) {
			continue
		}
		old, v := e.hist[d.key], newHistogram(d, opts)
		e.reg.Unregister(old)
		if err := e.reg.Register(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
			_ = e.reg.Register(old)
			continue
		}
		e.hist[d.key], e.buckets[d.key] = v, BucketsFor(d.key, opts)
	}
	return errors.Join(errs...)
}

// observeKey observes v in the histogram of key k (see observe), case caseID of l.
func (e *Exporter) observeKey(k string, l Labels, caseID string, v float64, ex prometheus.Labels) {
	e.histMu.RLock()
	defer e.histMu.RUnlock()
	observe(e.hist[k].WithLabelValues(l.values(caseID)...), v, ex)
}

// Registry returns the exporter's registry (to gather in tests, or to register more).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Handler serves the registry in the text format or, when the scraper asks for it,
// OpenMetrics (which carries exemplars) or protobuf (which carries native histograms).
func (e *Exporter) Handler() http.Handler { return e.handler }

// SetProbeConfig publishes a probe's configured interval (seconds between run starts) and its
// SLO objective (nil: no SLO), and sets its running and in-flight gauges to 0 when it has
// no run in progress, so that the probe's series exist before its first run. Called again
// for the same labels (a reload changed the probe's schedule or SLO, or configured a
// forgotten probe again), it replaces the interval and objective and cancels a pending
// ForgetProbe.
func (e *Exporter) SetProbeConfig(l Labels, intervalSeconds float64, slo string, objective *float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.probes[l]; st != nil {
		st.forget = false
	}
	e.interval.WithLabelValues(l.values()...).Set(intervalSeconds)
	e.running.WithLabelValues(l.values()...).Add(0)
	e.inFlight.WithLabelValues(l.values()...).Add(0)
	for _, st := range []string{RunCompleted, RunInterrupted, RunIncomplete, RunFailed} {
		e.probeRuns.WithLabelValues(l.values(st)...).Add(0)
	}
	e.sloObjective.DeletePartialMatch(l.match())
	if objective != nil {
		e.sloObjective.WithLabelValues(l.values(slo)...).Set(*objective)
	}
}

// ForgetProbe deletes the gauges of a probe that is no longer configured (after a reload):
// its interval, running, in-flight, objective, attainment, goodput, coverage, schedule,
// last-run and capacity series. With runs of the probe in progress, they go when the last of them has
// published its end: those runs are published in full, and counted, like any other. The
// probe's counters and histograms stay, so that every finished run stays counted; they go
// on if the probe is configured again.
func (e *Exporter) ForgetProbe(l Labels) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.probes[l]; st != nil {
		st.forget = true
		return
	}
	e.deleteGauges(l)
}

// deleteGauges deletes a probe's gauges (see ForgetProbe). e.mu is held.
func (e *Exporter) deleteGauges(l Labels) {
	m := l.match()
	for _, v := range []*prometheus.GaugeVec{
		e.sloObjective, e.attainment, e.goodput, e.coverage, e.lastSuccess, e.lastRun, e.interval, e.running, e.inFlight, e.scheduleMet, e.clientLimit,
	} {
		v.DeletePartialMatch(m)
	}
	e.capacity.forget(l)
}

// ForgetTarget deletes a target's scrape series.
func (e *Exporter) ForgetTarget(target string) {
	e.scrapeUp.DeleteLabelValues(labelValue(target))
	e.scrapeDuration.DeleteLabelValues(labelValue(target))
}

// ScrapeResult publishes one scrape of a target's vLLM /metrics.
func (e *Exporter) ScrapeResult(target string, up bool, d time.Duration) {
	v := 0.0
	if up {
		v = 1
	}
	e.scrapeUp.WithLabelValues(labelValue(target)).Set(v)
	e.scrapeDuration.WithLabelValues(labelValue(target)).Set(d.Seconds())
}

// SpanUnrouted counts a delivered span that matched no probe run.
func (e *Exporter) SpanUnrouted() { e.spansUnrouted.Inc() }

// SpansUnrouted counts n delivered spans that matched no probe run (n ≤ 0: none).
func (e *Exporter) SpansUnrouted(n int) {
	if n > 0 {
		e.spansUnrouted.Add(float64(n))
	}
}

// exemplar returns the exemplar labels of a request: trace_id, then request_id — the first
// of ids that fits (the X-Request-Id sent, else the artifact's own request_id, which is
// unique within the run). A value that is not valid UTF-8 or would take the labels past
// Prometheus's 128-rune exemplar limit is left out (either would otherwise panic the
// observation): a UUID run id makes inferprobe's X-Request-Id about 80 characters, which
// does not fit beside a trace id. nil when nothing fits.
func exemplar(traceID *string, ids ...*string) prometheus.Labels {
	var l prometheus.Labels
	n := 0
	add := func(name string, v *string) bool {
		if v == nil || *v == "" || !utf8.ValidString(*v) {
			return false
		}
		r := utf8.RuneCountInString(name) + utf8.RuneCountInString(*v)
		if n+r > prometheus.ExemplarMaxRunes {
			return false
		}
		if l == nil {
			l = prometheus.Labels{}
		}
		l[name] = *v
		n += r
		return true
	}
	add("trace_id", traceID)
	for _, id := range ids {
		if add("request_id", id) {
			break
		}
	}
	return l
}

// labelValue makes s usable as a label value: WithLabelValues panics on invalid UTF-8, and
// the exporter must never stop a run.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func observe(h prometheus.Observer, v float64, ex prometheus.Labels) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if eo, ok := h.(prometheus.ExemplarObserver); ok && ex != nil {
		eo.ObserveWithExemplar(v, ex)
		return
	}
	h.Observe(v)
}

// requestStatuses are the outcome statuses of inferprobe_requests_total.
var requestStatuses = []string{"ok", "timeout", "rejected", "unreachable", "delivery_unknown", "error", "dropped", "cancelled"}

// InitCases creates a probe's per-case counters at 0 before its first run — requests by
// every status and, with an SLO (slo != ""), SLO requests by every outcome — so that the
// first increase is seen by rate() and increase() rather than hidden in a series' first
// sample (Prometheus's "initialize your metrics" practice).
func (e *Exporter) InitCases(l Labels, slo string, cases []string) {
	for _, c := range cases {
		for _, st := range requestStatuses {
			e.requests.WithLabelValues(l.values(c, st)...).Add(0)
		}
		if slo == "" {
			continue
		}
		for _, o := range []string{OutcomeMet, OutcomeMissed, OutcomeUnknown} {
			e.sloRequests.WithLabelValues(l.values(c, slo, o)...).Add(0)
		}
	}
}
