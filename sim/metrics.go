package sim

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// Bucket boundaries of vLLM V1's histograms, exactly as a real vLLM 0.30 /metrics page shows
// them (testdata/q05_c08_metrics_post.txt; TestMetricsMatchVLLMCapture compares them). The
// token-count histograms use buckets125(MaxModelLen) instead.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1,
		2.5, 5, 7.5, 10, 20, 40, 80}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50,
		60, 120, 240, 480, 960, 1920, 7680}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}
	preemptionBuckets     = []float64{1, 2, 3, 4, 5, 10, 20}
)

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max inclusive.
func buckets125(max int) []float64 {
	var out []float64
	for mag := 1; ; mag *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * mag
			if v > max {
				return out
			}
			out = append(out, float64(v))
		}
		if mag > math.MaxInt32/10 {
			return out
		}
	}
}

// successReasons are the finished_reason label values of vllm:request_success_total: one per
// finish reason vLLM V1 knows, in vLLM's order. Every one is exposed at zero from the start,
// as vLLM does; the simulator only ever counts stop, length and error.
var successReasons = []string{"stop", "length", "abort", "error", "repetition"}

// engineMetrics holds one engine's series, children bound to {model_name, engine}.
type engineMetrics struct {
	prefixQueries, prefixHits              prometheus.Counter
	preemptions                            prometheus.Counter
	promptTokens, genTokens                prometheus.Counter
	promptLocal, promptCacheHit, promptExt prometheus.Counter
	promptCached                           prometheus.Counter
	success                                map[string]prometheus.Counter
	promptHist, genHist, iterTokens        prometheus.Observer
	maxGenHist, paramsN, paramsMaxTokens   prometheus.Observer
	ttft, itl, tpot, e2e                   prometheus.Observer
	queue, inference, prefill, decode      prometheus.Observer
	numPreemptions, prefillKVComputed      prometheus.Observer
}

// observeFinished records the request-level series of a counted finish (vLLM's
// FinishedRequestStats): phases are queue = scheduled - arrival, prefill = first token -
// scheduled, decode = last token - first token, inference = last token - scheduled, e2e =
// finish - arrival.
func (m *engineMetrics) observeFinished(s *seq, code uint32) {
	m.success[finishReason(code)].Inc()
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	m.e2e.Observe(sec(s.finishNs - s.arrivalNs))
	m.queue.Observe(sec(s.scheduledNs - s.arrivalNs))
	m.prefill.Observe(sec(s.firstTokenNs - s.scheduledNs))
	m.decode.Observe(sec(s.lastTokenNs - s.firstTokenNs))
	m.inference.Observe(sec(s.lastTokenNs - s.scheduledNs))
	m.promptHist.Observe(float64(s.promptLen))
	m.genHist.Observe(float64(s.generated))
	m.maxGenHist.Observe(float64(s.maxTokens))
	m.paramsN.Observe(1)
	m.paramsMaxTokens.Observe(float64(s.maxTokens))
	m.numPreemptions.Observe(float64(s.preemptions))
	m.prefillKVComputed.Observe(float64(s.promptLen - s.cachedTokens))
	tpot := 0.0
	if s.generated > 1 {
		tpot = sec(s.lastTokenNs-s.firstTokenNs) / float64(s.generated-1)
	}
	m.tpot.Observe(tpot)
}

// metricSet is one lifetime of the /metrics registry; an engine restart replaces it, so
// every counter starts again from zero with new _created stamps.
type metricSet struct {
	reg       *prometheus.Registry
	proc      prometheus.Gatherer // the OS process series (vLLM's set, see processFamilies)
	startTime time.Time
	engines   []*engineMetrics
	httpReqs  *prometheus.CounterVec
}

// processFamilies are the series of prometheus_client's process collector that vLLM's
// /metrics has, less process_start_time_seconds: that one is the simulated engine's start
// (gaugeCollector), so that a simulated restart moves it as a real restart does.
// client_golang's process collector reads them from the OS for this process, with the same
// names, types and help texts; its other series (process_virtual_memory_max_bytes,
// process_network_*) vLLM does not have.
var processFamilies = map[string]bool{
	"process_virtual_memory_bytes": true, "process_resident_memory_bytes": true, "process_cpu_seconds_total": true,
	"process_open_fds": true, "process_max_fds": true,
}

// newProcessGatherer gathers processFamilies from a registry of its own (one per metric set,
// so any number of sims run in one process), where the collector's start time cannot clash
// with the simulated one.
func newProcessGatherer() prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return !processFamilies[mf.GetName()] }), err
	})
}

// newMetricSet builds the registry for engines (read by the gauge collector) at start: vLLM's
// families, each engine's children bound to {model_name, engine}, http_requests_total, the
// gauges read at scrape time, and the process series.
func newMetricSet(cfg *Config, engines []*engine, start time.Time) *metricSet {
	reg := prometheus.NewRegistry()
	ms := &metricSet{reg: reg, proc: newProcessGatherer(), startTime: start}
	vecs := newVLLMVecs(reg, cfg)
	for i := 0; i < cfg.Engines; i++ {
		ms.engines = append(ms.engines, vecs.bind(cfg.Model, itoa(i)))
	}
	ms.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "Total number of requests by method, status and handler.",
	}, []string{"handler", "method", "status"})
	reg.MustRegister(ms.httpReqs)
	reg.MustRegister(&gaugeCollector{cfg: cfg, engines: engines, start: start})
	return ms
}

// vllmVecs are vLLM's counter and histogram families of one metric set, labelled
// {model_name, engine} (plus source or finished_reason where vLLM has them).
type vllmVecs struct {
	zero                                   []*prometheus.CounterVec // present at zero, never moved
	prefixQueries, prefixHits, preemptions *prometheus.CounterVec
	promptTokens, promptBySource           *prometheus.CounterVec
	promptCached, genTokens, success       *prometheus.CounterVec

	prompt, gen, iter, maxGen, paramsN, paramsMaxTokens *prometheus.HistogramVec
	ttft, itl, tpot, e2e                                *prometheus.HistogramVec
	queue, inference, prefill, decode                   *prometheus.HistogramVec
	numPreemptions, prefillKVComputed                   *prometheus.HistogramVec
}

// newVLLMVecs registers vLLM's counter and histogram families on reg, with vLLM's names, help
// texts and buckets (the token-count ones the 1-2-5 series up to cfg.MaxModelLen).
func newVLLMVecs(reg *prometheus.Registry, cfg *Config) *vllmVecs {
	labels := []string{"model_name", "engine"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string{}, labels...), extra...))
		reg.MustRegister(v)
		return v
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(v)
		return v
	}
	v := &vllmVecs{}
	flops := counter("vllm:estimated_flops_per_gpu_total", "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).")
	readB := counter("vllm:estimated_read_bytes_per_gpu_total", "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).")
	writeB := counter("vllm:estimated_write_bytes_per_gpu_total", "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).")
	v.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	v.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	epq := counter("vllm:external_prefix_cache_queries_total", "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.")
	eph := counter("vllm:external_prefix_cache_hits_total", "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.")
	mmq := counter("vllm:mm_cache_queries_total", "Multi-modal cache queries, in terms of number of queried items.")
	mmh := counter("vllm:mm_cache_hits_total", "Multi-modal cache hits, in terms of number of cached items.")
	v.zero = []*prometheus.CounterVec{flops, readB, writeB, epq, eph, mmq, mmh}
	v.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	v.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	v.promptBySource = counter("vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source.", "source")
	v.promptCached = counter("vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external).")
	v.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	v.success = counter("vllm:request_success_total", "Count of successfully processed requests.", "finished_reason")
	tokBuckets := buckets125(cfg.MaxModelLen)
	v.prompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokBuckets)
	v.gen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokBuckets)
	v.iter = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationTokenBuckets)
	v.maxGen = hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tokBuckets)
	v.paramsN = hist("vllm:request_params_n", "Histogram of the n request parameter.", paramsNBuckets)
	v.paramsMaxTokens = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokBuckets)
	v.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	v.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	v.tpot = hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets)
	v.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	v.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	v.inference = hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	v.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	v.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)
	v.numPreemptions = hist("vllm:request_num_preemptions", "Histogram of the number of times a request was preempted.", preemptionBuckets)
	v.prefillKVComputed = hist("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill (excluding cached tokens).", tokBuckets)
	return v
}

// bind creates one engine's children of every family: the never-moved counters at zero, as
// in vLLM, the three prompt-token sources, a success counter per finished_reason, and the
// rest, returned for the engine to move.
func (v *vllmVecs) bind(model, engine string) *engineMetrics {
	l := []string{model, engine}
	for _, z := range v.zero {
		z.WithLabelValues(l...)
	}
	em := &engineMetrics{
		prefixQueries:     v.prefixQueries.WithLabelValues(l...),
		prefixHits:        v.prefixHits.WithLabelValues(l...),
		preemptions:       v.preemptions.WithLabelValues(l...),
		promptTokens:      v.promptTokens.WithLabelValues(l...),
		genTokens:         v.genTokens.WithLabelValues(l...),
		promptLocal:       v.promptBySource.WithLabelValues(model, engine, "local_compute"),
		promptCacheHit:    v.promptBySource.WithLabelValues(model, engine, "local_cache_hit"),
		promptExt:         v.promptBySource.WithLabelValues(model, engine, "external_kv_transfer"),
		promptCached:      v.promptCached.WithLabelValues(l...),
		success:           make(map[string]prometheus.Counter, len(successReasons)),
		promptHist:        v.prompt.WithLabelValues(l...),
		genHist:           v.gen.WithLabelValues(l...),
		iterTokens:        v.iter.WithLabelValues(l...),
		maxGenHist:        v.maxGen.WithLabelValues(l...),
		paramsN:           v.paramsN.WithLabelValues(l...),
		paramsMaxTokens:   v.paramsMaxTokens.WithLabelValues(l...),
		ttft:              v.ttft.WithLabelValues(l...),
		itl:               v.itl.WithLabelValues(l...),
		tpot:              v.tpot.WithLabelValues(l...),
		e2e:               v.e2e.WithLabelValues(l...),
		queue:             v.queue.WithLabelValues(l...),
		inference:         v.inference.WithLabelValues(l...),
		prefill:           v.prefill.WithLabelValues(l...),
		decode:            v.decode.WithLabelValues(l...),
		numPreemptions:    v.numPreemptions.WithLabelValues(l...),
		prefillKVComputed: v.prefillKVComputed.WithLabelValues(l...),
	}
	for _, r := range successReasons {
		em.success[r] = v.success.WithLabelValues(model, engine, r)
	}
	return em
}

// gaugeCollector exposes the scheduler gauges read from the engines at scrape time, plus
// vllm:cache_config_info and process_start_time_seconds.
type gaugeCollector struct {
	cfg     *Config
	engines []*engine
	start   time.Time
}

var (
	descRunning   = prometheus.NewDesc("vllm:num_requests_running", "Number of requests in model execution batches.", []string{"model_name", "engine"}, nil)
	descWaiting   = prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", []string{"model_name", "engine"}, nil)
	descWaitingBy = prometheus.NewDesc("vllm:num_requests_waiting_by_reason",
		"Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
		[]string{"model_name", "engine", "reason"}, nil)
	descSleep = prometheus.NewDesc("vllm:engine_sleep_state",
		"Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
		[]string{"model_name", "engine", "sleep_state"}, nil)
	descKV          = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", []string{"model_name", "engine"}, nil)
	cacheInfoLabels = []string{"block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization",
		"kv_cache_size_tokens", "num_cpu_blocks", "num_gpu_blocks", "num_gpu_blocks_override", "prefix_caching_hash_algo"}
	descCacheInfo = prometheus.NewDesc("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", cacheInfoLabels, nil)
	descStart     = prometheus.NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", nil, nil)
)

func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descWaitingBy, descSleep, descKV, descCacheInfo, descStart} {
		ch <- d
	}
}

func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	model := g.cfg.Model
	pyBool := func(b bool) string {
		if b {
			return "True"
		}
		return "False"
	}
	for _, e := range g.engines {
		running, waiting, kv := e.snapshot()
		ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(running), model, e.label)
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(waiting), model, e.label)
		ch <- prometheus.MustNewConstMetric(descWaitingBy, prometheus.GaugeValue, float64(waiting), model, e.label, "capacity")
		ch <- prometheus.MustNewConstMetric(descWaitingBy, prometheus.GaugeValue, 0, model, e.label, "deferred")
		ch <- prometheus.MustNewConstMetric(descSleep, prometheus.GaugeValue, 1, model, e.label, "awake")
		ch <- prometheus.MustNewConstMetric(descSleep, prometheus.GaugeValue, 0, model, e.label, "weights_offloaded")
		ch <- prometheus.MustNewConstMetric(descSleep, prometheus.GaugeValue, 0, model, e.label, "discard_all")
		ch <- prometheus.MustNewConstMetric(descKV, prometheus.GaugeValue, kv, model, e.label)
		ch <- prometheus.MustNewConstMetric(descCacheInfo, prometheus.GaugeValue, 1,
			strconv.Itoa(g.cfg.BlockSize), "auto", pyBool(g.cfg.EnablePrefixCaching), e.label, "0.9",
			strconv.Itoa(g.cfg.NumGPUBlocks*g.cfg.BlockSize), "None", strconv.Itoa(g.cfg.NumGPUBlocks), "None", "sha256")
	}
	ch <- prometheus.MustNewConstMetric(descStart, prometheus.GaugeValue, float64(g.start.UnixNano())/1e9)
}

// gather returns, as vLLM's page has them, the process series first (without _created
// stamps, as prometheus_client writes none for them), then the registry's families with,
// after every counter, histogram and summary family, a gauge family of its children's
// creation times in unix seconds named like the Python client's single-process exposition
// that vLLM serves: "<name>_created", with a counter's "_total" suffix removed
// (vllm:prompt_tokens_total → vllm:prompt_tokens_created).
func (ms *metricSet) gather() ([]*dto.MetricFamily, error) {
	out, err := ms.proc.Gather()
	if err != nil {
		return nil, err
	}
	mfs, err := ms.reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, mf := range mfs {
		out = append(out, mf)
		var base string
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			base = strings.TrimSuffix(mf.GetName(), "_total")
		case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
			base = mf.GetName()
		default:
			continue
		}
		created := &dto.MetricFamily{
			Name: proto.String(base + "_created"),
			Help: proto.String(mf.GetHelp()),
			Type: dto.MetricType_GAUGE.Enum(),
		}
		for _, m := range mf.GetMetric() {
			var ts float64
			switch {
			case m.GetCounter().GetCreatedTimestamp() != nil:
				ts = tsSeconds(m.GetCounter().GetCreatedTimestamp().AsTime())
			case m.GetHistogram().GetCreatedTimestamp() != nil:
				ts = tsSeconds(m.GetHistogram().GetCreatedTimestamp().AsTime())
			case m.GetSummary().GetCreatedTimestamp() != nil:
				ts = tsSeconds(m.GetSummary().GetCreatedTimestamp().AsTime())
			default:
				ts = tsSeconds(ms.startTime)
			}
			created.Metric = append(created.Metric, &dto.Metric{
				Label: m.GetLabel(),
				Gauge: &dto.Gauge{Value: proto.Float64(ts)},
			})
		}
		out = append(out, created)
	}
	return out, nil
}

func tsSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// metricsContentType is what vLLM's /metrics (prometheus_client) answers with.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metricsHandler serves the current metric set in the Prometheus text format 0.0.4, as vLLM
// (prometheus_client's make_asgi_app, single-process mode) does.
func (s *Server) metricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := s.metrics.Load().gather()
		if err != nil {
			http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		var buf bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
				http.Error(w, "encoding metrics: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", metricsContentType)
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(buf.Bytes())
		}
	})
}
