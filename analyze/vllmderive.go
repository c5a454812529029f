package analyze

import (
	"math"

	"github.com/inferprobe/inferprobe/artifact"
)

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

// mfu reads the MFU counters: all-zero counters are
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
