package engine

import (
	"math"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// VerifiedVersion is the vLLM release the catalogue was checked against:
// its source (vllm/v1/metrics/loggers.py) and live captures of its /metrics.
const VerifiedVersion = "0.30.0"

// Prefix is the namespace of vLLM's own series.
const Prefix = "vllm:"

// Metric kinds of catalogue entries (the # TYPE of the exposed family).
const (
	KindCounter   = "counter"
	KindGauge     = "gauge"
	KindHistogram = "histogram"
)

// Entry describes one vLLM family: its exposed name, the report field that
// carries it, and what it means.
type Entry struct {
	// Name is the exposed family name: counters with their "_total"
	// ("vllm:prompt_tokens_total"), histograms without a suffix.
	Name string
	// Field is the report key (e.g. "queue_depth", "prompt_tokens").
	Field string
	// Kind is KindCounter, KindGauge or KindHistogram.
	Kind string
	// Group is the subsystem: scheduler, kv_cache, prefix_cache, tokens,
	// requests, latency, mfu, spec_decode, multimodal, lora.
	Group string
	// Unit is the value's unit ("requests", "tokens", "seconds",
	// "fraction", "flops", "bytes", …); "" when it has none.
	Unit string
	// Meaning says what the series counts.
	Meaning string
	// Labels are the extra labels beyond engine and model_name.
	Labels []string
	// Requires names the server setting without which the family is not
	// exposed (or does not advance); "" for families every default server
	// of VerifiedVersion exposes. Such families are optional in artifact.ScrapeDiscovery.
	Requires string
	// Since is the first vLLM release or upstream change that exposes the
	// family under this name, where known.
	Since string
	// Provenance is "observed", or "estimated" for model-shape estimates.
	Provenance string
}

// Retired is a name vLLM no longer exposes: deprecated (its meaning lives
// on under Successor) or removed (no successor).
type Retired struct {
	Name string
	// Successor is the family that carries the same meaning now; "" when
	// the meaning is gone (a removed series).
	Successor string
	// History says when and why, with the upstream change.
	History string
}

const residency = "wall-clock residency in a scheduler phase on the engine's clock; not execution time and not GPU time"

var catalogue = []Entry{
	// Scheduler state.
	{Name: "vllm:num_requests_running", Field: "running_requests", Kind: KindGauge, Group: "scheduler", Unit: "requests", Meaning: "requests in the RUNNING state at scrape time", Since: "V1"},
	{Name: "vllm:num_requests_waiting", Field: "queue_depth", Kind: KindGauge, Group: "scheduler", Unit: "requests", Meaning: "requests in the WAITING state at scrape time (capacity-waiting plus deferred since 2026-04-13, PR #38435)", Since: "V1"},
	{Name: "vllm:num_requests_waiting_by_reason", Field: "queue_depth_by_reason", Kind: KindGauge, Group: "scheduler", Unit: "requests", Meaning: "waiting requests by reason (capacity, deferred)", Labels: []string{"reason"}, Since: "2026-04-13 (PR #38435)"},
	{Name: "vllm:engine_sleep_state", Field: "engine_sleep_state", Kind: KindGauge, Group: "scheduler", Meaning: "1 for the engine's current sleep state (awake, weights_offloaded, discard_all)", Labels: []string{"sleep_state"}, Since: "2025-10-29"},
	{Name: "vllm:num_preemptions_total", Field: "preemptions", Kind: KindCounter, Group: "scheduler", Unit: "preemptions", Meaning: "requests preempted by the scheduler", Since: "V1"},
	{Name: "vllm:request_num_preemptions", Field: "preemptions_per_request", Kind: KindHistogram, Group: "scheduler", Unit: "preemptions", Meaning: "preemptions a finished request went through", Since: "V1"},
	{Name: "vllm:request_queue_time_seconds", Field: "queue_time", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "time a finished request spent WAITING (queued to first scheduled); " + residency, Since: "V1"},
	// KV cache.
	{Name: "vllm:kv_cache_usage_perc", Field: "kv_cache_usage", Kind: KindGauge, Group: "kv_cache", Unit: "fraction", Meaning: "fraction (0–1 despite the name) of KV cache blocks in use at scrape time; logical occupancy, not device memory", Since: "0.9.2 (PR #18354)"},
	{Name: "vllm:cache_config_info", Field: "cache_config", Kind: KindGauge, Group: "kv_cache", Meaning: "cache configuration carried as labels (block_size, num_gpu_blocks, kv_cache_size_tokens, …); the value is 1", Since: "V1"},
	{Name: "vllm:kv_block_lifetime_seconds", Field: "kv_block_lifetime", Kind: KindHistogram, Group: "kv_cache", Unit: "seconds", Meaning: "sampled KV block lifetime from allocation to eviction", Requires: "--kv-cache-metrics", Since: "2025-12-01"},
	{Name: "vllm:kv_block_idle_before_evict_seconds", Field: "kv_block_idle_before_evict", Kind: KindHistogram, Group: "kv_cache", Unit: "seconds", Meaning: "sampled idle time of a KV block before its eviction", Requires: "--kv-cache-metrics", Since: "2025-12-01"},
	{Name: "vllm:kv_block_reuse_gap_seconds", Field: "kv_block_reuse_gap", Kind: KindHistogram, Group: "kv_cache", Unit: "seconds", Meaning: "sampled gap between reuses of a KV block", Requires: "--kv-cache-metrics", Since: "2025-12-01"},
	// Prefix and multimodal caches.
	{Name: "vllm:prefix_cache_queries_total", Field: "prefix_cache_queries", Kind: KindCounter, Group: "prefix_cache", Unit: "tokens", Meaning: "prompt tokens looked up in the local prefix cache", Since: "0.9.2 (PR #18354)"},
	{Name: "vllm:prefix_cache_hits_total", Field: "prefix_cache_hits", Kind: KindCounter, Group: "prefix_cache", Unit: "tokens", Meaning: "prompt tokens served from the local prefix cache", Since: "0.9.2 (PR #18354)"},
	{Name: "vllm:external_prefix_cache_queries_total", Field: "external_prefix_cache_queries", Kind: KindCounter, Group: "prefix_cache", Unit: "tokens", Meaning: "prompt tokens looked up in an external KV cache (KV connector)", Since: "2025-10-23"},
	{Name: "vllm:external_prefix_cache_hits_total", Field: "external_prefix_cache_hits", Kind: KindCounter, Group: "prefix_cache", Unit: "tokens", Meaning: "prompt tokens served from an external KV cache (KV connector)", Since: "2025-10-23"},
	{Name: "vllm:mm_cache_queries_total", Field: "mm_cache_queries", Kind: KindCounter, Group: "multimodal", Unit: "items", Meaning: "multimodal cache lookups", Since: "2025-10-10"},
	{Name: "vllm:mm_cache_hits_total", Field: "mm_cache_hits", Kind: KindCounter, Group: "multimodal", Unit: "items", Meaning: "multimodal cache hits", Since: "2025-10-10"},
	// Tokens and requests.
	{Name: "vllm:prompt_tokens_total", Field: "prompt_tokens", Kind: KindCounter, Group: "tokens", Unit: "tokens", Meaning: "prefill (prompt) tokens processed", Since: "V1"},
	{Name: "vllm:prompt_tokens_cached_total", Field: "prompt_tokens_cached", Kind: KindCounter, Group: "tokens", Unit: "tokens", Meaning: "prompt tokens served from a cache (local plus external)", Since: "2026-02-04"},
	{Name: "vllm:prompt_tokens_by_source_total", Field: "prompt_tokens_by_source", Kind: KindCounter, Group: "tokens", Unit: "tokens", Meaning: "prompt tokens by source (local_compute, local_cache_hit, external_kv_transfer)", Labels: []string{"source"}, Since: "2026-02-04"},
	{Name: "vllm:generation_tokens_total", Field: "generation_tokens", Kind: KindCounter, Group: "tokens", Unit: "tokens", Meaning: "tokens generated", Since: "V1"},
	{Name: "vllm:iteration_tokens_total", Field: "iteration_tokens", Kind: KindHistogram, Group: "tokens", Unit: "tokens", Meaning: "tokens scheduled per engine step (a histogram despite the _total suffix)", Since: "V1"},
	{Name: "vllm:request_success_total", Field: "request_success", Kind: KindCounter, Group: "requests", Unit: "requests", Meaning: "finished requests by finished_reason (stop, length, abort, error, repetition); client aborts are not counted", Labels: []string{"finished_reason"}, Since: "V1"},
	{Name: "vllm:request_prompt_tokens", Field: "request_prompt_tokens", Kind: KindHistogram, Group: "requests", Unit: "tokens", Meaning: "prompt length of a finished request", Since: "V1"},
	{Name: "vllm:request_generation_tokens", Field: "request_generation_tokens", Kind: KindHistogram, Group: "requests", Unit: "tokens", Meaning: "generated length of a finished request", Since: "V1"},
	{Name: "vllm:request_max_num_generation_tokens", Field: "request_max_num_generation_tokens", Kind: KindHistogram, Group: "requests", Unit: "tokens", Meaning: "maximum generation tokens a finished request asked for", Since: "V1"},
	{Name: "vllm:request_params_n", Field: "request_params_n", Kind: KindHistogram, Group: "requests", Meaning: "the n parameter of a finished request", Since: "V1"},
	{Name: "vllm:request_params_max_tokens", Field: "request_params_max_tokens", Kind: KindHistogram, Group: "requests", Unit: "tokens", Meaning: "the max_tokens parameter of a finished request", Since: "V1"},
	{Name: "vllm:request_prefill_kv_computed_tokens", Field: "request_prefill_kv_computed_tokens", Kind: KindHistogram, Group: "requests", Unit: "tokens", Meaning: "KV tokens computed in prefill, cached tokens excluded", Since: "2025-12-08"},
	// Latency (engine clock, measured from the front end's arrival time).
	{Name: "vllm:time_to_first_token_seconds", Field: "time_to_first_token", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "arrival to first token, per request", Since: "V1"},
	{Name: "vllm:inter_token_latency_seconds", Field: "inter_token_latency", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "time between successive outputs of a request, observed per engine step (token level)", Since: "0.11 (PR #24110)"},
	{Name: "vllm:request_time_per_output_token_seconds", Field: "time_per_output_token", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "per-request mean time per output token", Since: "2025-09-24 (PR #24015)"},
	{Name: "vllm:e2e_request_latency_seconds", Field: "e2e_latency", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "arrival to finish, per request", Since: "V1"},
	{Name: "vllm:request_inference_time_seconds", Field: "inference_time", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "first scheduled to last token; " + residency, Since: "V1"},
	{Name: "vllm:request_prefill_time_seconds", Field: "prefill_time", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "first scheduled to first token; " + residency, Since: "V1"},
	{Name: "vllm:request_decode_time_seconds", Field: "decode_time", Kind: KindHistogram, Group: "latency", Unit: "seconds", Meaning: "first to last token; " + residency, Since: "V1"},
	// Model FLOPs utilisation: estimates from the model's shapes, per GPU.
	{Name: "vllm:estimated_flops_per_gpu_total", Field: "estimated_flops_per_gpu", Kind: KindCounter, Group: "mfu", Unit: "flops", Meaning: "estimated floating point operations per GPU; advances only with --enable-mfu-metrics", Requires: "--enable-mfu-metrics", Provenance: "estimated"},
	{Name: "vllm:estimated_read_bytes_per_gpu_total", Field: "estimated_read_bytes_per_gpu", Kind: KindCounter, Group: "mfu", Unit: "bytes", Meaning: "estimated bytes read from memory per GPU; advances only with --enable-mfu-metrics", Requires: "--enable-mfu-metrics", Provenance: "estimated"},
	{Name: "vllm:estimated_write_bytes_per_gpu_total", Field: "estimated_write_bytes_per_gpu", Kind: KindCounter, Group: "mfu", Unit: "bytes", Meaning: "estimated bytes written to memory per GPU; advances only with --enable-mfu-metrics", Requires: "--enable-mfu-metrics", Provenance: "estimated"},
	// Speculative decoding (vllm/v1/spec_decode/metrics.py).
	{Name: "vllm:spec_decode_num_drafts_total", Field: "spec_decode_num_drafts", Kind: KindCounter, Group: "spec_decode", Unit: "drafts", Meaning: "speculative drafts proposed", Requires: "a speculative config"},
	{Name: "vllm:spec_decode_num_draft_tokens_total", Field: "spec_decode_num_draft_tokens", Kind: KindCounter, Group: "spec_decode", Unit: "tokens", Meaning: "draft tokens proposed", Requires: "a speculative config"},
	{Name: "vllm:spec_decode_num_accepted_tokens_total", Field: "spec_decode_num_accepted_tokens", Kind: KindCounter, Group: "spec_decode", Unit: "tokens", Meaning: "draft tokens accepted", Requires: "a speculative config"},
	{Name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", Field: "spec_decode_num_accepted_tokens_per_pos", Kind: KindCounter, Group: "spec_decode", Unit: "tokens", Meaning: "draft tokens accepted by draft position", Labels: []string{"position"}, Requires: "a speculative config"},
	// Other optional families.
	{Name: "vllm:lora_requests_info", Field: "lora_requests", Kind: KindGauge, Group: "lora", Meaning: "LoRA adapter state carried as labels (max_lora, running_lora_adapters, waiting_lora_adapters); the value is a timestamp", Labels: []string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, Requires: "LoRA enabled"},
	{Name: "vllm:corrupted_requests_total", Field: "corrupted_requests", Kind: KindCounter, Group: "requests", Unit: "requests", Meaning: "requests whose logits held NaNs", Requires: "VLLM_COMPUTE_NANS_IN_LOGITS=1"},
}

// optionalPrefixes are optional subsystems the catalogue knows by prefix
// only: their families are listed as optional_present and kept raw, never
// as unknown.
var optionalPrefixes = []string{"vllm:kv_offload_", "vllm:spec_decode_", "vllm:diffusion_", "vllm:nixl_"}

var retired = []Retired{
	{Name: "vllm:gpu_cache_usage_perc", Successor: "vllm:kv_cache_usage_perc", History: "renamed in 0.9.2 (PR #18354), hidden in 0.11 (PR #24245), removed for 0.12 (PR #29330)"},
	{Name: "vllm:gpu_prefix_cache_queries_total", Successor: "vllm:prefix_cache_queries_total", History: "renamed in 0.9.2 (PR #18354), hidden in 0.11, removed for 0.12 (PR #29330)"},
	{Name: "vllm:gpu_prefix_cache_hits_total", Successor: "vllm:prefix_cache_hits_total", History: "renamed in 0.9.2 (PR #18354), hidden in 0.11, removed for 0.12 (PR #29330)"},
	{Name: "vllm:time_per_output_token_seconds", Successor: "vllm:inter_token_latency_seconds", History: "deprecated in 0.11 when inter_token_latency_seconds was added (PR #24110), hidden in 0.12 (PR #29330), removed 2026-01-20 (PR #32661)"},
	{Name: "vllm:time_in_queue_requests", Successor: "vllm:request_queue_time_seconds", History: "V0 queue-time histogram; both record WAITING residency per finished request"},
	{Name: "vllm:model_forward_time_milliseconds", History: "V0 only; no V1 series records model forward time"},
	{Name: "vllm:model_execute_time_milliseconds", History: "V0 only; no V1 series records model execute time"},
	{Name: "vllm:num_requests_swapped", History: "V0 only, removed 2025-05-28 (PR #18837)"},
	{Name: "vllm:cpu_cache_usage_perc", History: "V0 only, removed 2025-05-28 (PR #18837)"},
	{Name: "vllm:request_params_best_of", History: "V0 only, removed with the V0 metrics code (PR #27215)"},
	{Name: "vllm:avg_prompt_throughput_toks_per_s", History: "V0 only, removed with the V0 metrics code (PR #27215)"},
	{Name: "vllm:avg_generation_throughput_toks_per_s", History: "V0 only, removed with the V0 metrics code (PR #27215)"},
	{Name: "vllm:gpu_prefix_cache_hit_rate", History: "V0 gauge, deprecated 0.8 (PR #14136), removed 2025-05-28 (PR #18837); use the prefix cache counters"},
	{Name: "vllm:cpu_prefix_cache_hit_rate", History: "V0 gauge, deprecated 0.8 (PR #14136), removed 2025-05-28 (PR #18837)"},
	{Name: "vllm:spec_decode_draft_acceptance_rate", History: "V0 spec decode gauge, removed (PR #27215)"},
	{Name: "vllm:spec_decode_efficiency", History: "V0 spec decode gauge, removed (PR #27215)"},
	{Name: "vllm:spec_decode_num_emitted_tokens_total", History: "V0 spec decode counter, removed (PR #27215)"},
	{Name: "vllm:tokens_total", History: "V0 only, removed (PR #27215)"},
}

var (
	byName      = map[string]*Entry{}
	byField     = map[string]*Entry{}
	retiredByNm = map[string]*Retired{}
)

func init() {
	for i := range catalogue {
		byName[catalogue[i].Name] = &catalogue[i]
		byField[catalogue[i].Field] = &catalogue[i]
	}
	for i := range retired {
		retiredByNm[retired[i].Name] = &retired[i]
	}
}

// Catalogue returns every catalogued family of VerifiedVersion, in
// catalogue order (a copy).
func Catalogue() []Entry {
	out := make([]Entry, len(catalogue))
	copy(out, catalogue)
	return out
}

// RetiredNames returns every retired name the catalogue recognises (a copy).
func RetiredNames() []Retired {
	out := make([]Retired, len(retired))
	copy(out, retired)
	return out
}

// Lookup returns the catalogue entry of an exposed family name.
func Lookup(name string) (Entry, bool) {
	if e, ok := byName[name]; ok {
		return *e, true
	}
	return Entry{}, false
}

// LookupRetired returns the retirement of a name vLLM no longer exposes.
func LookupRetired(name string) (Retired, bool) {
	if r, ok := retiredByNm[name]; ok {
		return *r, true
	}
	return Retired{}, false
}

// Resolve maps an exposed name to the catalogue entry that carries its
// meaning: its own, or its successor's when the name is retired (aliasOf is
// then the successor's name). ok is false for removed and unknown names.
func Resolve(name string) (e Entry, aliasOf string, ok bool) {
	if e, ok := byName[name]; ok {
		return *e, "", true
	}
	if r, ok := retiredByNm[name]; ok && r.Successor != "" {
		if e, ok := byName[r.Successor]; ok {
			return *e, r.Successor, true
		}
	}
	return Entry{}, "", false
}

// Class is how the catalogue classifies an exposed family name.
type Class int

// Classes of ClassifyName.
const (
	// ClassOther is a family outside the vllm: namespace (process_*,
	// python_*, http_*).
	ClassOther Class = iota
	// ClassCatalogued is a family the catalogue names.
	ClassCatalogued
	// ClassOptional is a family under an optional subsystem prefix.
	ClassOptional
	// ClassDeprecated is a retired name with a successor.
	ClassDeprecated
	// ClassRemoved is a retired name without a successor.
	ClassRemoved
	// ClassStamp is a "_created" gauge stamping another family.
	ClassStamp
	// ClassUnknown is a vllm: family the catalogue does not know.
	ClassUnknown
)

// ClassifyName classifies an exposed family name. families (name → # TYPE)
// lets a "_created" family be recognised as the stamp of a counter or
// histogram of the same scrape; nil treats every vllm: "_created" name
// without a catalogued parent as unknown.
func ClassifyName(name string, families map[string]string) Class {
	if !strings.HasPrefix(name, Prefix) {
		return ClassOther
	}
	if _, ok := byName[name]; ok {
		return ClassCatalogued
	}
	if r, ok := retiredByNm[name]; ok {
		if r.Successor != "" {
			return ClassDeprecated
		}
		return ClassRemoved
	}
	if IsStamp(name, families) {
		return ClassStamp
	}
	for _, p := range optionalPrefixes {
		if strings.HasPrefix(name, p) {
			return ClassOptional
		}
	}
	return ClassUnknown
}

// StampName is the "_created" gauge prometheus_client writes beside a
// counter or histogram in single-process mode: a counter's without its
// "_total" (vllm:prompt_tokens_total → vllm:prompt_tokens_created), a
// histogram's with its full name (vllm:iteration_tokens_total →
// vllm:iteration_tokens_total_created). "" for other kinds.
func StampName(family, kind string) string {
	switch kind {
	case KindCounter:
		return strings.TrimSuffix(family, "_total") + "_created"
	case KindHistogram, "summary":
		return family + "_created"
	}
	return ""
}

// stampParent finds the counter or histogram a "_created" name stamps: in
// families when given, else in the catalogue.
func stampParent(name string, families map[string]string) (string, bool) {
	base, ok := strings.CutSuffix(name, "_created")
	if !ok {
		return "", false
	}
	for _, cand := range []struct{ name, kind string }{
		{base + "_total", KindCounter}, {base, KindHistogram}, {base, "summary"}, {base, KindCounter},
	} {
		kind, present := families[cand.name]
		if families == nil {
			var e *Entry
			if e, present = byName[cand.name]; present {
				kind = e.Kind
			}
		}
		if present && kind == cand.kind {
			return cand.name, true
		}
	}
	return "", false
}

// IsStamp reports whether name is a "_created" gauge (or untyped family)
// stamping a counter, histogram or summary: of families (name → # TYPE)
// when given, else of the catalogue.
func IsStamp(name string, families map[string]string) bool {
	if families != nil && families[name] != KindGauge && families[name] != "untyped" {
		return false
	}
	_, ok := stampParent(name, families)
	return ok
}

// Discover compares one scrape with the catalogue without dropping anything:
// the catalogued families present, the unconditional ones absent
// (Absent) and the optional ones absent (OptionalAbsent, with "<prefix>*"
// for an optional subsystem known by prefix only that has no family), the
// optional, deprecated, removed and unknown vllm: families present, the
// engine and model_name label values of the vllm: series, and the
// exporter's process start (ProcessStartNS; see processStartNS). Every list
// is sorted, never nil.
func Discover(c *artifact.ScrapeSeries) artifact.ScrapeDiscovery {
	d := artifact.ScrapeDiscovery{VerifiedVLLMVersion: VerifiedVersion}
	present, absent, optAbsent := map[string]bool{}, map[string]bool{}, map[string]bool{}
	optPresent, deprecated, removed, unknown := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range catalogue {
		switch _, ok := c.Families[e.Name]; {
		case ok:
			present[e.Name] = true
		case e.Requires == "":
			absent[e.Name] = true
		default:
			optAbsent[e.Name] = true
		}
	}
	prefixSeen := map[string]bool{}
	for name := range c.Families {
		for _, p := range optionalPrefixes {
			if strings.HasPrefix(name, p) {
				prefixSeen[p] = true
			}
		}
		switch ClassifyName(name, c.Families) {
		case ClassOptional:
			optPresent[name] = true
		case ClassDeprecated:
			deprecated[name] = true
		case ClassRemoved:
			removed[name] = true
		case ClassUnknown:
			unknown[name] = true
		}
	}
	for _, p := range optionalPrefixes {
		if !prefixSeen[p] && !prefixCatalogued(p) {
			optAbsent[p+"*"] = true
		}
	}
	engines, models := map[string]bool{}, map[string]bool{}
	for fam, byID := range c.Values {
		if !strings.HasPrefix(fam, Prefix) {
			continue
		}
		for id := range byID {
			ls := c.LabelSets[id]
			if v, ok := ls["engine"]; ok {
				engines[v] = true
			}
			if v, ok := ls["model_name"]; ok {
				models[v] = true
			}
		}
	}
	d.Present, d.Absent, d.OptionalAbsent = sortedKeys(present), sortedKeys(absent), sortedKeys(optAbsent)
	d.OptionalPresent, d.DeprecatedPresent = sortedKeys(optPresent), sortedKeys(deprecated)
	d.RemovedPresent, d.Unknown = sortedKeys(removed), sortedKeys(unknown)
	d.Engines, d.ModelNames = sortedKeys(engines), sortedKeys(models)
	d.ProcessStartNS = processStartNS(c)
	return d
}

// prefixCatalogued reports whether the catalogue names families under an
// optional prefix one by one (their absence is listed by name).
func prefixCatalogued(prefix string) bool {
	for _, e := range catalogue {
		if strings.HasPrefix(e.Name, prefix) {
			return true
		}
	}
	return false
}

// processStartNS reads the exporter's process_start_time_seconds: the
// family's single series, finite and in [0, 9e9] seconds, as rounded
// nanoseconds; nil otherwise.
func processStartNS(c *artifact.ScrapeSeries) *int64 {
	vals := c.Values["process_start_time_seconds"]
	if len(vals) != 1 {
		return nil
	}
	for _, v := range vals {
		s := float64(v.Sample)
		if v.Dist != nil || !finite(s) || s < 0 || s > 9e9 {
			return nil
		}
		ns := int64(math.Round(s * 1e9))
		return &ns
	}
	return nil
}

// FieldsOf returns the report fields of the catalogued names among names,
// sorted and without repeats; uncatalogued names are skipped.
func FieldsOf(names []string) []string {
	set := map[string]bool{}
	for _, n := range names {
		if e, ok := byName[n]; ok {
			set[e.Field] = true
		}
	}
	return sortedKeys(set)
}

// Fields returns every report field of the catalogue, sorted.
func Fields() []string {
	out := make([]string, 0, len(catalogue))
	for _, e := range catalogue {
		out = append(out, e.Field)
	}
	sort.Strings(out)
	return out
}
