package artifact

// Components of infer.capabilities: the vLLM /metrics scraper and the OTLP
// span receiver.
const (
	ComponentMetrics = "vllm.metrics"
	ComponentSpans   = "vllm.spans"
)

// Capabilities is the infer.capabilities v2 record: what a telemetry
// component (vllm.metrics, vllm.spans, ...) exposed and what was collected.
type Capabilities struct {
	Context Context `json:"context"`
	EventID string  `json:"event_id"`
	// Metadata is free-form (failed_scrapes, per_request_attribution, ...);
	// written as {} when nil.
	Metadata  map[string]any `json:"metadata"`
	Component string         `json:"component"`
	Available bool           `json:"available"`
	Supported []string       `json:"supported"`
	Enabled   []string       `json:"enabled"`
	Collected []string       `json:"collected"`
}

func (Capabilities) selfEncoding() {}

// RecordKind returns KindCapabilities.
func (Capabilities) RecordKind() Kind { return KindCapabilities }

// MarshalJSON writes the record with its event_type and schema_version; nil
// metadata is written as {} and nil name lists as [].
func (c Capabilities) MarshalJSON() ([]byte, error) {
	type plain Capabilities
	p := plain(c)
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	for _, l := range []*[]string{&p.Supported, &p.Enabled, &p.Collected} {
		if *l == nil {
			*l = []string{}
		}
	}
	return withKind(KindCapabilities, p)
}

// ClockAlignment is the infer.clock_alignment v2 record: the offset between
// two clock domains over a half-open validity window [valid_from_ns,
// valid_to_ns). Semantic checks (uncertainty ≥ 0, run id) belong to the
// join package.
type ClockAlignment struct {
	Context         Context        `json:"context"`
	EventID         string         `json:"event_id"`
	Metadata        map[string]any `json:"metadata"`
	FromClockDomain string         `json:"from_clock_domain"`
	ToClockDomain   string         `json:"to_clock_domain"`
	// OffsetNS is added to a from-domain time to get the to-domain time.
	OffsetNS      int64  `json:"offset_ns"`
	UncertaintyNS int64  `json:"uncertainty_ns"`
	ValidFromNS   *int64 `json:"valid_from_ns"`
	ValidToNS     *int64 `json:"valid_to_ns"`
}

// ClockMethodShardCoordinator is the metadata "method" of the infer.clock_alignment a shard
// of a sharded run writes before its start: from the shard's clock domain to the
// coordinator's, estimated from the probe with the smallest round trip (offset
// ((t1−t0)+(t2−t3))/2, uncertainty half the round trip); its metadata also holds "shard",
// "probes" and "rtt_ns".
const ClockMethodShardCoordinator = "shard_coordinator_min_rtt"

func (ClockAlignment) selfEncoding() {}

// RecordKind returns KindClockAlignment.
func (ClockAlignment) RecordKind() Kind { return KindClockAlignment }

// MarshalJSON writes the record with its event_type and schema_version; nil
// metadata is written as {}.
func (c ClockAlignment) MarshalJSON() ([]byte, error) {
	type plain ClockAlignment
	p := plain(c)
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	return withKind(KindClockAlignment, p)
}
