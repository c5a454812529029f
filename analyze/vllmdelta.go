package analyze

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/artifact/vllmmetrics"
)

// States and unresolved reasons of the case blocks (stormlog.md §4.3).
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

// VLLMCaseBlock is telemetry.vllm.cases[case_id] (stormlog.md §2.6, §4.3): the
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

// series is one sample of an engine's family under its extra labels.
type series struct {
	extra map[string]string
	v     artifact.SeriesValue
}

// scrapeIndex is one scrape's vllm: series by family, engine and extra-label
// key.
type scrapeIndex struct {
	rec   *artifact.VLLMScrape
	kinds map[string]string
	fams  map[string]map[string]map[string]series
}

// extraKey renders the labels beyond engine and model_name: "a=b,c=d", or
// "_" for none.
func extraKey(labels map[string]string) (string, map[string]string) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "engine" && k != "model_name" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "_", map[string]string{}
	}
	sort.Strings(keys)
	extra := make(map[string]string, len(keys))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
		extra[k] = labels[k]
	}
	return b.String(), extra
}

func indexScrape(r *artifact.VLLMScrape) *scrapeIndex {
	ix := &scrapeIndex{rec: r, kinds: r.Scrape.Families, fams: map[string]map[string]map[string]series{}}
	for fam, byID := range r.Scrape.Values {
		if !strings.HasPrefix(fam, vllmmetrics.Prefix) {
			continue
		}
		byEngine := map[string]map[string]series{}
		for id, v := range byID {
			ls := r.Scrape.LabelSets[id]
			eng, ok := ls["engine"]
			if !ok {
				eng = noEngine
			}
			key, extra := extraKey(ls)
			if byEngine[eng] == nil {
				byEngine[eng] = map[string]series{}
			}
			byEngine[eng][key] = series{extra: extra, v: v}
		}
		ix.fams[fam] = byEngine
	}
	return ix
}

// engines returns the engine keys with vllm: series in the scrape.
func (ix *scrapeIndex) engines() map[string]bool {
	out := map[string]bool{}
	for fam, byEngine := range ix.fams {
		if vllmmetrics.IsStamp(fam, ix.kinds) {
			continue
		}
		for e := range byEngine {
			out[e] = true
		}
	}
	return out
}

// VLLMCaseTelemetry is the case block of a case's measured phase (stormlog.md
// §4.3): see VLLMPhaseTelemetry.
func VLLMCaseTelemetry(scrapes []artifact.VLLMScrape, caseID string) *VLLMCaseBlock {
	return VLLMPhaseTelemetry(scrapes, caseID, artifact.PhaseMeasured)
}

// VLLMPhaseTelemetry computes the block of one case and phase from the run's
// scrapes (any order; other cases' and phases' scrapes are ignored). The
// window runs from the first ok phase_start scrape to the last ok phase_end
// scrape; without either the block is unresolved with
// "scrape_failed:<marker>" (a scrape with that marker failed) or
// "scrape_missing:<marker>", a null window and no engines. Counters and
// histograms are differenced between the two boundary scrapes; gauges are
// summarised over every ok scrape of the window from the start scrape's
// exporter. Nothing unresolved is ever read as 0.
func VLLMPhaseTelemetry(scrapes []artifact.VLLMScrape, caseID, phase string) *VLLMCaseBlock {
	var mine []*artifact.VLLMScrape
	for i := range scrapes {
		r := &scrapes[i]
		if r.CaseID != nil && *r.CaseID == caseID && r.Phase != nil && *r.Phase == phase {
			mine = append(mine, r)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].ObservedAtNS < mine[j].ObservedAtNS })
	block := &VLLMCaseBlock{State: StateResolved, Reasons: []string{}, Engines: map[string]*VLLMEngineBlock{}}
	var start, end *artifact.VLLMScrape
	for _, r := range mine {
		if r.OK() && r.Discovery != nil {
			if r.Marker == artifact.ScrapeMarkerPhaseStart && start == nil {
				start = r
			}
			if r.Marker == artifact.ScrapeMarkerPhaseEnd {
				end = r
			}
		}
	}
	for _, b := range []struct {
		marker string
		found  *artifact.VLLMScrape
	}{{artifact.ScrapeMarkerPhaseStart, start}, {artifact.ScrapeMarkerPhaseEnd, end}} {
		if b.found != nil {
			continue
		}
		reason := ReasonScrapeMissing
		for _, r := range mine {
			if r.Marker == b.marker {
				reason = ReasonScrapeFailed
			}
		}
		block.Reasons = append(block.Reasons, reason+":"+b.marker)
	}
	if start != nil && end != nil && end.ObservedAtNS < start.ObservedAtNS {
		block.Reasons = append(block.Reasons, ReasonOutOfOrder)
	}
	if len(block.Reasons) > 0 {
		block.State = StateUnresolved
		return block
	}

	// The window's scrapes, and whose exporter answered each.
	var inside []*artifact.VLLMScrape
	failed := 0
	for _, r := range mine {
		if r.ObservedAtNS < start.ObservedAtNS || r.ObservedAtNS > end.ObservedAtNS {
			continue
		}
		if r.OK() && r.Discovery != nil {
			inside = append(inside, r)
		} else {
			failed++
		}
	}
	startPS := start.Discovery.ProcessStartNS
	restart, changed, unknown := false, false, startPS == nil
	var own []*artifact.VLLMScrape
	for _, r := range inside {
		ps := r.Discovery.ProcessStartNS
		switch {
		case ps == nil || startPS == nil:
			unknown = unknown || ps == nil
		case *ps != *startPS:
			restart = true
		}
		if !equalStrings(r.Discovery.Engines, start.Discovery.Engines) {
			changed = true
		}
		if vllmmetrics.SameProcessStart(ps, startPS) {
			own = append(own, r)
		}
	}
	epoch := ""
	if restart {
		block.Reasons = append(block.Reasons, ReasonEngineRestart)
		epoch = ReasonEngineRestart
	}
	if changed {
		block.Reasons = append(block.Reasons, ReasonEngineSetChanged)
	}
	if unknown {
		block.Reasons = append(block.Reasons, ReasonIdentityUnknown)
		if epoch == "" {
			epoch = ReasonIdentityUnknown
		}
	}
	if len(block.Reasons) > 0 {
		block.State = StateUnresolved
	}
	seconds := float64(end.ObservedAtNS-start.ObservedAtNS) / 1e9
	block.Window = &ScrapeWindow{
		StartObservedAtNS: start.ObservedAtNS,
		EndObservedAtNS:   end.ObservedAtNS,
		Seconds:           seconds,
		IncludesDrain:     true,
		Scrapes:           len(own),
		ForeignScrapes:    len(inside) - len(own),
		FailedScrapes:     failed,
	}
	ixStart, ixEnd := indexScrape(start), indexScrape(end)
	ixOwn := make([]*scrapeIndex, 0, len(own))
	for _, r := range own {
		switch r {
		case start:
			ixOwn = append(ixOwn, ixStart)
		case end:
			ixOwn = append(ixOwn, ixEnd)
		default:
			ixOwn = append(ixOwn, indexScrape(r))
		}
	}
	engines := ixStart.engines()
	for e := range ixEnd.engines() {
		engines[e] = true
	}
	for e := range engines {
		block.Engines[e] = engineBlock(e, ixStart, ixEnd, ixOwn, seconds, epoch)
	}
	return block
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fieldOf names a family's report field: its catalogue field; a retired
// name's successor field unless the successor is exposed as well (then its
// own name); an uncatalogued family's exposed name.
func fieldOf(name string, exposed map[string]bool) (key string, info FieldInfo, meaning *string) {
	info = FieldInfo{Native: name, Provenance: "observed"}
	e, aliasOf, ok := vllmmetrics.Resolve(name)
	if !ok {
		return name, info, nil
	}
	if e.Unit != "" {
		info.Unit = artifact.Ptr(e.Unit)
	}
	if e.Provenance != "" {
		info.Provenance = e.Provenance
	}
	key = e.Field
	if aliasOf != "" {
		info.DeprecatedAliasOf = artifact.Ptr(aliasOf)
		if exposed[aliasOf] {
			key = name
		}
	}
	return key, info, artifact.Ptr(e.Meaning)
}

// engineBlock differences one engine's families between the boundary
// scrapes and summarises its gauges over own.
func engineBlock(engine string, a, b *scrapeIndex, own []*scrapeIndex, seconds float64, epoch string) *VLLMEngineBlock {
	eb := &VLLMEngineBlock{
		Counters:   map[string]*CounterField{},
		Histograms: map[string]*HistogramField{},
		Gauges:     map[string]*GaugeField{},
		Unresolved: map[string][]string{},
	}
	kinds := map[string]string{}
	exposed := map[string]bool{}
	for _, ix := range append([]*scrapeIndex{b}, own...) { // the start scrape is in own
		for fam, byEngine := range ix.fams {
			exposed[fam] = true
			if _, ok := byEngine[engine]; !ok || vllmmetrics.IsStamp(fam, ix.kinds) {
				continue
			}
			if _, seen := kinds[fam]; !seen || ix == a {
				kinds[fam] = ix.kinds[fam]
			}
		}
	}
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	note := func(field, state string, reasons []string) {
		if state == StateResolved {
			return
		}
		for _, r := range reasons {
			eb.Unresolved[r] = append(eb.Unresolved[r], field)
		}
	}
	for _, name := range names {
		key, info, meaning := fieldOf(name, exposed)
		switch kinds[name] {
		case vllmmetrics.KindCounter:
			if a.fams[name][engine] == nil && b.fams[name][engine] == nil {
				continue // only in an interval scrape: nothing to difference
			}
			f := counterField(info, a.fams[name][engine], b.fams[name][engine], stampsOf(a, name, vllmmetrics.KindCounter, engine), stampsOf(b, name, vllmmetrics.KindCounter, engine), epoch)
			eb.Counters[key] = f
			note(key, f.State, f.Reasons)
		case vllmmetrics.KindHistogram, "summary":
			if a.fams[name][engine] == nil && b.fams[name][engine] == nil {
				continue
			}
			f := histogramField(info, meaning, a.fams[name][engine], b.fams[name][engine], stampsOf(a, name, kinds[name], engine), stampsOf(b, name, kinds[name], engine), epoch)
			eb.Histograms[key] = f
			note(key, f.State, f.Reasons)
		default: // gauge, untyped
			f := gaugeField(info, name, engine, own)
			eb.Gauges[key] = f
			note(key, f.State, f.Reasons)
		}
	}
	for r := range eb.Unresolved {
		sort.Strings(eb.Unresolved[r])
	}
	eb.Derived = derive(eb, engine, own, seconds)
	return eb
}

// stampsOf returns the "_created" stamps of a family for one engine.
func stampsOf(ix *scrapeIndex, family, kind, engine string) map[string]series {
	return ix.fams[vllmmetrics.StampName(family, kind)][engine]
}

// recreated reports whether a series' _created stamp differs between the
// scrapes; a stamp missing on either side proves nothing.
func recreated(key string, sa, sb map[string]series) bool {
	x, okA := sa[key]
	y, okB := sb[key]
	if !okA || !okB || x.v.Dist != nil || y.v.Dist != nil {
		return false
	}
	p, q := float64(x.v.Sample), float64(y.v.Sample)
	if math.IsNaN(p) && math.IsNaN(q) {
		return false
	}
	return p != q
}

// unionKeys returns the keys of both maps, sorted.
func unionKeys(a, b map[string]series) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	return sortedKeys(set)
}

// fieldState folds label-set states: resolved when all are, else
// unresolved with the distinct reasons.
func fieldState(states []string) (string, []string) {
	set := map[string]bool{}
	for _, s := range states {
		if s != StateResolved {
			set[s] = true
		}
	}
	if len(states) == 0 {
		return StateUnresolved, []string{ReasonSeriesMissing}
	}
	if len(set) == 0 {
		return StateResolved, nil
	}
	return StateUnresolved, sortedKeys(set)
}

func counterField(info FieldInfo, a, b, stampA, stampB map[string]series, epoch string) *CounterField {
	f := &CounterField{FieldInfo: info, ByLabel: map[string]CounterDelta{}}
	var states []string
	total := 0.0
	for _, key := range unionKeys(a, b) {
		x, okA := a[key]
		y, okB := b[key]
		okA, okB = okA && x.v.Dist == nil, okB && y.v.Dist == nil
		var d CounterDelta
		if okA {
			d.Start = fptr(float64(x.v.Sample))
		}
		if okB {
			d.End = fptr(float64(y.v.Sample))
		}
		p, q := float64(x.v.Sample), float64(y.v.Sample)
		switch {
		case !okA || !okB:
			d.State = ReasonSeriesMissing
		case epoch != "":
			d.State = epoch
		case !finite(p) || !finite(q):
			d.State = ReasonNonFinite
		case recreated(key, stampA, stampB):
			d.State = ReasonCounterRecreated
		case q < p:
			d.State = ReasonCounterReset
		default:
			d.State = StateResolved
			d.Delta = artifact.Ptr(q - p)
			total += q - p
		}
		f.ByLabel[key] = d
		states = append(states, d.State)
	}
	f.State, f.Reasons = fieldState(states)
	if f.State == StateResolved {
		f.Delta = artifact.Ptr(total)
	}
	return f
}

// histogramDelta differences one label set.
func histogramDelta(key string, x, y series, okA, okB bool, stampA, stampB map[string]series, epoch string) HistogramDelta {
	if !okA || !okB || x.v.Dist == nil || y.v.Dist == nil {
		return HistogramDelta{State: ReasonSeriesMissing}
	}
	da, db := x.v.Dist, y.v.Dist
	var missing []string
	for _, p := range []struct {
		name string
		v    *artifact.Float
	}{{"start_sum", da.Sum}, {"start_count", da.Count}, {"end_sum", db.Sum}, {"end_count", db.Count}} {
		if p.v == nil {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return HistogramDelta{State: ReasonSeriesMissing, Missing: missing}
	}
	if epoch != "" {
		return HistogramDelta{State: epoch}
	}
	allFinite := finite(float64(*da.Sum)) && finite(float64(*da.Count)) && finite(float64(*db.Sum)) && finite(float64(*db.Count))
	for _, d := range []*artifact.SeriesDistribution{da, db} {
		for _, bk := range d.Buckets {
			allFinite = allFinite && finite(float64(bk.Count))
		}
	}
	if !allFinite {
		return HistogramDelta{State: ReasonNonFinite}
	}
	if recreated(key, stampA, stampB) {
		return HistogramDelta{State: ReasonCounterRecreated}
	}
	if !sameBounds(da.Buckets, db.Buckets) {
		return HistogramDelta{State: ReasonBoundariesChanged}
	}
	backwards := float64(*db.Count) < float64(*da.Count) || float64(*db.Sum) < float64(*da.Sum)
	buckets := make([]BucketDelta, len(da.Buckets))
	for i := range da.Buckets {
		p, q := float64(da.Buckets[i].Count), float64(db.Buckets[i].Count)
		backwards = backwards || q < p
		buckets[i] = BucketDelta{LE: db.Buckets[i].LE, Delta: q - p}
	}
	if backwards {
		return HistogramDelta{State: ReasonCounterReset}
	}
	h := HistogramDelta{
		State:   StateResolved,
		Count:   float64(*db.Count) - float64(*da.Count),
		Sum:     float64(*db.Sum) - float64(*da.Sum),
		Buckets: buckets,
	}
	if h.Count > 0 {
		h.Mean = artifact.Ptr(h.Sum / h.Count)
	}
	return h
}

// sameBounds compares two bucket lists' bounds numerically (an unparseable
// bound matches nothing).
func sameBounds(a, b []artifact.SeriesBucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, errX := strconv.ParseFloat(a[i].LE, 64)
		y, errY := strconv.ParseFloat(b[i].LE, 64)
		if errX != nil || errY != nil || x != y {
			return false
		}
	}
	return true
}

func histogramField(info FieldInfo, meaning *string, a, b, stampA, stampB map[string]series, epoch string) *HistogramField {
	f := &HistogramField{FieldInfo: info, Meaning: meaning, ByLabel: map[string]HistogramDelta{}}
	keys := unionKeys(a, b)
	var states []string
	for _, key := range keys {
		x, okA := a[key]
		y, okB := b[key]
		d := histogramDelta(key, x, y, okA, okB, stampA, stampB, epoch)
		f.ByLabel[key] = d
		states = append(states, d.State)
	}
	state, reasons := fieldState(states)
	if state != StateResolved {
		f.HistogramDelta = HistogramDelta{State: state, Reasons: reasons}
		return f
	}
	total := HistogramDelta{State: StateResolved}
	var shape []BucketDelta
	sameShape := true
	for i, key := range keys {
		d := f.ByLabel[key]
		total.Count += d.Count
		total.Sum += d.Sum
		if i == 0 {
			shape = append([]BucketDelta(nil), d.Buckets...)
			continue
		}
		if len(d.Buckets) != len(shape) {
			sameShape = false
			continue
		}
		for j := range shape {
			if shape[j].LE != d.Buckets[j].LE {
				sameShape = false
			}
			shape[j].Delta += d.Buckets[j].Delta
		}
	}
	if sameShape {
		total.Buckets = shape
	}
	if total.Count > 0 {
		total.Mean = artifact.Ptr(total.Sum / total.Count)
	}
	f.HistogramDelta = total
	return f
}

// gaugeAcc accumulates one label set's samples.
type gaugeAcc struct {
	min, max, sum, last float64
	n, nonFinite        int
	labels              map[string]string
}

func gaugeField(info FieldInfo, name, engine string, own []*scrapeIndex) *GaugeField {
	f := &GaugeField{FieldInfo: info, Stats: map[string]GaugeStats{}, Labels: map[string]map[string]string{}}
	accs := map[string]*gaugeAcc{}
	for _, ix := range own {
		for key, s := range ix.fams[name][engine] {
			if s.v.Dist != nil {
				continue
			}
			acc := accs[key]
			if acc == nil {
				acc = &gaugeAcc{min: math.Inf(1), max: math.Inf(-1)}
				accs[key] = acc
			}
			acc.labels = s.extra
			v := float64(s.v.Sample)
			if !finite(v) {
				acc.nonFinite++
				continue
			}
			acc.n++
			acc.sum += v
			acc.min, acc.max, acc.last = math.Min(acc.min, v), math.Max(acc.max, v), v
		}
	}
	var states []string
	for key, acc := range accs {
		st := GaugeStats{State: StateResolved, Samples: acc.n, NonFinite: acc.nonFinite}
		if acc.n == 0 {
			st.State = ReasonNonFinite
		} else {
			st.Min, st.Max, st.Last = artifact.Ptr(acc.min), artifact.Ptr(acc.max), artifact.Ptr(acc.last)
			st.Mean = artifact.Ptr(acc.sum / float64(acc.n))
		}
		f.Stats[key] = st
		f.Labels[key] = acc.labels
		states = append(states, st.State)
	}
	f.State, f.Reasons = fieldState(states)
	return f
}

// resolvedDelta returns a counter field's total delta when resolved.
func resolvedDelta(eb *VLLMEngineBlock, field string) *float64 {
	f := eb.Counters[field]
	if f == nil || f.State != StateResolved {
		return nil
	}
	return f.Delta
}

func rate(delta *float64, seconds float64) *float64 {
	if delta == nil || !(seconds > 0) {
		return nil
	}
	return artifact.Ptr(*delta / seconds)
}

// derive computes rates, prefix cache, KV cache and MFU for one engine.
func derive(eb *VLLMEngineBlock, engine string, own []*scrapeIndex, seconds float64) VLLMDerived {
	var d VLLMDerived
	gen := resolvedDelta(eb, "generation_tokens")
	d.Rates = VLLMRates{
		PromptTokensPerSecond:     rate(resolvedDelta(eb, "prompt_tokens"), seconds),
		GenerationTokensPerSecond: rate(gen, seconds),
		FinishedRequestsPerSecond: rate(resolvedDelta(eb, "request_success"), seconds),
		WindowSeconds:             seconds,
	}

	q, h := resolvedDelta(eb, "prefix_cache_queries"), resolvedDelta(eb, "prefix_cache_hits")
	d.PrefixCache = PrefixCache{State: StateResolved, Queries: q, Hits: h}
	if q == nil || h == nil {
		d.PrefixCache.State = StateUnresolved
		if eb.Counters["prefix_cache_queries"] == nil && eb.Counters["prefix_cache_hits"] == nil {
			d.PrefixCache.State = ReasonSeriesMissing
		}
	} else if *q > 0 {
		d.PrefixCache.HitRatio = artifact.Ptr(*h / *q)
	}

	d.KVCache = kvCache(eb, engine, own)
	d.MFU = mfu(eb, gen)
	return d
}

func kvCache(eb *VLLMEngineBlock, engine string, own []*scrapeIndex) KVCache {
	kv := KVCache{State: ReasonSeriesMissing, Meaning: kvMeaning}
	if g := eb.Gauges["kv_cache_usage"]; g != nil {
		kv.State = g.State
		if st, ok := g.Stats["_"]; ok {
			kv.State = st.State
			kv.MaxUsageFraction, kv.MeanUsageFraction = st.Max, st.Mean
		}
	}
	// The cache configuration of the latest scrape that has exactly one.
	var cfg map[string]string
	for i := len(own) - 1; i >= 0 && cfg == nil; i-- {
		name := "vllm:cache_config_info"
		if sets := own[i].fams[name][engine]; len(sets) == 1 {
			for _, s := range sets {
				cfg = s.extra
			}
		}
	}
	label := func(k string) *int64 {
		v, ok := cfg[k]
		if !ok {
			return nil
		}
		n, ok := parseCount(v)
		if !ok {
			return nil
		}
		return &n
	}
	kv.BlockSize, kv.KVCacheSizeTokens, kv.NumGPUBlocks = label("block_size"), label("kv_cache_size_tokens"), label("num_gpu_blocks")
	if kv.NumGPUBlocks == nil && kv.KVCacheSizeTokens != nil && kv.BlockSize != nil && *kv.BlockSize > 0 {
		kv.NumGPUBlocks = artifact.Ptr(*kv.KVCacheSizeTokens / *kv.BlockSize)
	}
	if kv.MaxUsageFraction != nil && kv.NumGPUBlocks != nil && *kv.NumGPUBlocks > 0 {
		kv.MaxBlocksInUse = artifact.Ptr(int64(math.Round(*kv.MaxUsageFraction * float64(*kv.NumGPUBlocks))))
	}
	return kv
}

// parseCount reads a positive integer label value ("107233"; "None" is not
// one).
func parseCount(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n > 0
}

// mfuFields are the MFU counters' report fields.
var mfuFields = []string{"estimated_flops_per_gpu", "estimated_read_bytes_per_gpu", "estimated_write_bytes_per_gpu"}

// mfu reads the MFU counters (stormlog.md §4.3): all-zero counters are
// "not_enabled" only against a resolved non-zero generation delta.
func mfu(eb *VLLMEngineBlock, gen *float64) MFU {
	m := MFU{State: ReasonSeriesMissing, Provenance: "estimated", Counters: map[string]string{}}
	any := false
	deltas := make([]*float64, len(mfuFields))
	allResolved := true
	for i, f := range mfuFields {
		c := eb.Counters[f]
		if c == nil {
			m.Counters[f] = ReasonSeriesMissing
			allResolved = false
			continue
		}
		any = true
		m.Counters[f] = c.State
		if c.State != StateResolved {
			allResolved = false
			continue
		}
		deltas[i] = c.Delta
	}
	if !any {
		m.Detail = artifact.Ptr("vLLM exposes no MFU counters")
		return m
	}
	if !allResolved {
		m.State = StateUnresolved
		m.Detail = artifact.Ptr("an MFU counter is unresolved")
		return m
	}
	nonzero := false
	for _, d := range deltas {
		nonzero = nonzero || *d != 0
	}
	set := func() {
		m.EstimatedFlopsPerGPU, m.EstimatedReadBytesPerGPU, m.EstimatedWriteBytesPerGPU = deltas[0], deltas[1], deltas[2]
	}
	switch {
	case nonzero:
		m.State = StateResolved
		set()
	case gen == nil:
		m.State = StateUnresolved
		set()
		m.Detail = artifact.Ptr("the counters did not advance and the generation token delta is unresolved, so a disabled feature and an idle engine cannot be told apart")
	case *gen > 0:
		m.State = ReasonNotEnabled
		m.Detail = artifact.Ptr("the counters did not advance while tokens were generated; vLLM needs --enable-mfu-metrics")
	default:
		m.State = StateResolved
		set()
		m.Detail = artifact.Ptr("no tokens were generated in the window")
	}
	return m
}

// sortedKeys returns the keys of a set, sorted, never nil.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fptr returns a pointer to an artifact.Float.
func fptr(v float64) *artifact.Float { f := artifact.Float(v); return &f }
