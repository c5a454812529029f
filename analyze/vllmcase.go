package analyze

import (
	"encoding/json"

	"github.com/inferprobe/inferprobe/artifact"
)

// States and unresolved reasons of the case blocks.
const (
	StateResolved   = "resolved"
	StateUnresolved = "unresolved"

	// ReasonScrapeMissing and ReasonScrapeFailed are written with the
	// marker they concern: "scrape_missing:phase_end".
	ReasonScrapeMissing = "scrape_missing"
	ReasonScrapeFailed  = "scrape_failed"
	// ReasonOutOfOrder: the phase_end scrape was observed before the
	// phase_start scrape.
	ReasonOutOfOrder = "scrapes_out_of_order"
	// ReasonEngineRestart: process_start_time_seconds differs on some scrape
	// of the window.
	ReasonEngineRestart = "engine_restart"
	// ReasonEngineSetChanged: the set of engine labels differs on some
	// scrape of the window.
	ReasonEngineSetChanged = "engine_set_changed"
	// ReasonIdentityUnknown: some scrape of the window has no
	// process_start_time_seconds, so a restart cannot be ruled out.
	ReasonIdentityUnknown = "exporter_identity_unknown"
	// ReasonCounterReset: a counter, or a histogram's count, sum or bucket,
	// went backwards.
	ReasonCounterReset = "counter_reset"
	// ReasonCounterRecreated: the series' "_created" stamp changed.
	ReasonCounterRecreated = "counter_recreated"
	// ReasonSeriesMissing: one scrape lacks the series (or its _sum/_count);
	// it is never read as 0.
	ReasonSeriesMissing = "series_missing"
	// ReasonBoundariesChanged: the histogram's le set differs.
	ReasonBoundariesChanged = "bucket_boundaries_changed"
	// ReasonNonFinite: a sample is NaN or ±Inf.
	ReasonNonFinite = "non_finite_sample"
	// ReasonNotEnabled: the MFU counters stayed at zero while tokens were
	// generated (vLLM needs --enable-mfu-metrics).
	ReasonNotEnabled = "not_enabled"
)

// noEngine is the engine key of vllm: series without an engine label
// (vLLM V0, or V1 before 2025-03-27).
const noEngine = "_"

// VLLMCaseBlock is telemetry.vllm.cases[case_id]: the
// deltas over one phase window, per engine label. Engines are never summed.
type VLLMCaseBlock struct {
	// State is "resolved" unless Reasons is non-empty.
	State string `json:"state"`
	// Reasons are window-level: "scrape_failed:phase_start",
	// "scrape_missing:phase_end", engine_restart, engine_set_changed,
	// exporter_identity_unknown. Field-level reasons stay on the fields.
	Reasons []string `json:"reasons"`
	// ScrapeWindow is null when a boundary scrape is missing.
	Window *ScrapeWindow `json:"window"`
	// Engines maps an engine label ("_" for series without one) to its
	// block.
	Engines map[string]*VLLMEngineBlock `json:"engines"`
	// Spans is the per-case span block, filled by the span join (absent
	// when nil).
	Spans *CaseSpans `json:"spans,omitempty"`
}

// ScrapeWindow is the span of a case block: the phase_start scrape to the
// phase_end scrape, which comes after the drain.
type ScrapeWindow struct {
	StartObservedAtNS int64 `json:"start_observed_at_ns"`
	EndObservedAtNS   int64 `json:"end_observed_at_ns"`
	// Seconds is EndObservedAtNS − StartObservedAtNS in seconds.
	Seconds float64 `json:"seconds"`
	// IncludesDrain is always true: rates are over the whole phase.
	IncludesDrain bool `json:"includes_drain"`
	// Scrapes counts the ok scrapes from the start scrape's exporter in the
	// window, boundaries included; they feed the gauge statistics.
	Scrapes int `json:"scrapes"`
	// ForeignScrapes counts ok scrapes another exporter answered (another
	// process_start_time_seconds); their gauges are excluded.
	ForeignScrapes int `json:"foreign_scrapes"`
	// FailedScrapes counts failed scrapes of the phase inside the window.
	FailedScrapes int `json:"failed_scrapes"`
}

// VLLMEngineBlock is one engine's part of a case block. Field keys are the
// catalogue's report fields (Entry.Field); an uncatalogued family is keyed
// by its exposed name, and a retired name by its successor's field (by its
// own name when the successor is exposed too).
type VLLMEngineBlock struct {
	Counters   map[string]*CounterField   `json:"counters"`
	Histograms map[string]*HistogramField `json:"histograms"`
	Gauges     map[string]*GaugeField     `json:"gauges"`
	Derived    VLLMDerived                `json:"derived"`
	// Unresolved maps each reason found on a field to the fields it left
	// unresolved (sorted).
	Unresolved map[string][]string `json:"unresolved"`
}

// FieldInfo names a field's native series.
type FieldInfo struct {
	// Native is the exposed family name.
	Native string `json:"native"`
	// Unit is the catalogue unit; null for uncatalogued families.
	Unit *string `json:"unit"`
	// Provenance is "observed", or "estimated" for MFU estimates.
	Provenance string `json:"provenance"`
	// DeprecatedAliasOf is the successor when Native is a retired name.
	DeprecatedAliasOf *string `json:"deprecated_alias_of"`
}

// CounterField is a counter's delta over the window: per extra label set
// (key "finished_reason=length", or "_" for none) and in total. Delta is the
// sum over the label sets, only when every set resolved.
type CounterField struct {
	FieldInfo
	State   string                  `json:"state"`
	Reasons []string                `json:"reasons,omitempty"`
	Delta   *float64                `json:"delta"`
	ByLabel map[string]CounterDelta `json:"by_label"`
}

// CounterDelta is one label set's delta; Start and End are the raw values
// (NaN/±Inf as strings), absent when the series is missing there.
type CounterDelta struct {
	State string          `json:"state"`
	Delta *float64        `json:"delta"`
	Start *artifact.Float `json:"start,omitempty"`
	End   *artifact.Float `json:"end,omitempty"`
}

// HistogramDelta is a histogram's change over the window. Resolved: count,
// sum, mean (Δsum/Δcount; null when Δcount is 0) and per-bucket deltas under
// the native le. Unresolved: the state (and, at field level, the distinct
// reasons of the label sets; for a missing _sum/_count, which parts).
type HistogramDelta struct {
	State   string
	Reasons []string
	Missing []string
	Count   float64
	Sum     float64
	Mean    *float64
	Buckets []BucketDelta
}

// MarshalJSON writes the resolved or the unresolved shape.
func (h HistogramDelta) MarshalJSON() ([]byte, error) {
	if h.State == StateResolved {
		b := h.Buckets
		if b == nil {
			b = []BucketDelta{}
		}
		return json.Marshal(struct {
			State   string        `json:"state"`
			Count   float64       `json:"count"`
			Sum     float64       `json:"sum"`
			Mean    *float64      `json:"mean"`
			Buckets []BucketDelta `json:"buckets"`
		}{h.State, h.Count, h.Sum, h.Mean, b})
	}
	return json.Marshal(struct {
		State   string   `json:"state"`
		Reasons []string `json:"reasons,omitempty"`
		Missing []string `json:"missing,omitempty"`
	}{h.State, h.Reasons, h.Missing})
}

// BucketDelta is one bucket's change, JSON ["0.3", 32].
type BucketDelta struct {
	LE    string
	Delta float64
}

// MarshalJSON writes the pair as a two-element array.
func (b BucketDelta) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{b.LE, b.Delta})
}

// HistogramField is a histogram family's change, per extra label set and in
// total (one set: its own delta; several: their sum when all resolved, the
// buckets summed when the sets share boundaries, else an empty bucket list).
type HistogramField struct {
	FieldInfo
	Meaning *string
	HistogramDelta
	ByLabel map[string]HistogramDelta
}

// MarshalJSON merges the field's names, its total and by_label.
func (h HistogramField) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		FieldInfo
		Meaning *string `json:"meaning"`
	}{h.FieldInfo, h.Meaning})
	if err != nil {
		return nil, err
	}
	total, err := h.HistogramDelta.MarshalJSON()
	if err != nil {
		return nil, err
	}
	by, err := json.Marshal(struct {
		ByLabel map[string]HistogramDelta `json:"by_label"`
	}{h.ByLabel})
	if err != nil {
		return nil, err
	}
	return mergeObjects(head, total, by), nil
}

// mergeObjects joins JSON objects' members (each a non-empty "{…}").
func mergeObjects(objs ...[]byte) []byte {
	out := []byte{'{'}
	for _, o := range objs {
		inner := o[1 : len(o)-1]
		if len(inner) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, inner...)
	}
	return append(out, '}')
}

// GaugeField is a gauge's statistics over the window's scrapes from the
// start scrape's exporter, per extra label set.
type GaugeField struct {
	FieldInfo
	State   string                       `json:"state"`
	Reasons []string                     `json:"reasons,omitempty"`
	Stats   map[string]GaugeStats        `json:"stats"`
	Labels  map[string]map[string]string `json:"labels"`
}

// GaugeStats summarises one label set's finite samples: Samples counts
// them, NonFinite the NaN/±Inf samples left out. With no finite sample the
// statistics are null and State is "non_finite_sample". Last is the latest
// finite sample.
type GaugeStats struct {
	State     string   `json:"state"`
	Min       *float64 `json:"min"`
	Mean      *float64 `json:"mean"`
	Max       *float64 `json:"max"`
	Last      *float64 `json:"last"`
	Samples   int      `json:"samples"`
	NonFinite int      `json:"non_finite"`
}

// VLLMDerived are the per-engine figures computed from the fields.
type VLLMDerived struct {
	Rates       VLLMRates   `json:"rates"`
	PrefixCache PrefixCache `json:"prefix_cache"`
	KVCache     KVCache     `json:"kv_cache"`
	MFU         MFU         `json:"mfu"`
}

// VLLMRates are counter deltas over the window seconds (drain included); null
// when the delta is unresolved or the window has no length.
type VLLMRates struct {
	PromptTokensPerSecond     *float64 `json:"prompt_tokens_per_second"`
	GenerationTokensPerSecond *float64 `json:"generation_tokens_per_second"`
	// FinishedRequestsPerSecond counts vllm:request_success_total, every
	// finished_reason.
	FinishedRequestsPerSecond *float64 `json:"finished_requests_per_second"`
	WindowSeconds             float64  `json:"window_seconds"`
}

// PrefixCache is the local prefix cache over the window, in tokens.
// HitRatio is Hits/Queries; null when either is unresolved or Queries is 0.
type PrefixCache struct {
	State    string   `json:"state"`
	Queries  *float64 `json:"queries"`
	Hits     *float64 `json:"hits"`
	HitRatio *float64 `json:"hit_ratio"`
}

// KVCache is the KV cache occupancy: the kv_cache_usage gauge (a fraction of
// blocks) and, from vllm:cache_config_info, the size in blocks. NumGPUBlocks
// is the num_gpu_blocks label, else kv_cache_size_tokens // block_size;
// MaxBlocksInUse is round(MaxUsageFraction × NumGPUBlocks).
type KVCache struct {
	State             string   `json:"state"`
	Meaning           string   `json:"meaning"`
	MaxUsageFraction  *float64 `json:"max_usage_fraction"`
	MeanUsageFraction *float64 `json:"mean_usage_fraction"`
	BlockSize         *int64   `json:"block_size"`
	KVCacheSizeTokens *int64   `json:"kv_cache_size_tokens"`
	NumGPUBlocks      *int64   `json:"num_gpu_blocks"`
	MaxBlocksInUse    *int64   `json:"max_blocks_in_use"`
}

// MFU is the model-FLOPs-utilisation counters' state: resolved deltas
// (estimates per GPU), not_enabled (all zero while tokens were generated),
// unresolved, or series_missing.
type MFU struct {
	State                     string            `json:"state"`
	Provenance                string            `json:"provenance"`
	EstimatedFlopsPerGPU      *float64          `json:"estimated_flops_per_gpu"`
	EstimatedReadBytesPerGPU  *float64          `json:"estimated_read_bytes_per_gpu"`
	EstimatedWriteBytesPerGPU *float64          `json:"estimated_write_bytes_per_gpu"`
	Counters                  map[string]string `json:"counters"`
	Detail                    *string           `json:"detail"`
}

// kvMeaning is KVCache.Meaning.
const kvMeaning = "logical occupancy of KV cache blocks at scrape time, not device memory"
