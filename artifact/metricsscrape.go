package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Scrape markers, the infer.vllm_scrape "marker" field: where in a phase a
// scrape was taken.
const (
	// ScrapeMarkerPhaseStart is the scrape just before a phase's first send.
	ScrapeMarkerPhaseStart = "phase_start"
	// ScrapeMarkerInterval is a scrape every --vllm-metrics-interval seconds
	// during a phase.
	ScrapeMarkerInterval = "interval"
	// ScrapeMarkerPhaseEnd is the scrape after a phase's drain.
	ScrapeMarkerPhaseEnd = "phase_end"
	// ScrapeMarkerManual is a scrape outside the phase cycle.
	ScrapeMarkerManual = "manual"
)

// Scrape statuses.
const (
	ScrapeOK    = "ok"
	ScrapeError = "error"
)

// ScopeEngineAggregate is the observation_scope of every scrape and report block:
// the numbers describe every request the engine served, from every client.
const ScopeEngineAggregate = "engine_aggregate"

// ValidScrapeMarker reports whether m is one of the four markers.
func ValidScrapeMarker(m string) bool {
	switch m {
	case ScrapeMarkerPhaseStart, ScrapeMarkerInterval, ScrapeMarkerPhaseEnd, ScrapeMarkerManual:
		return true
	}
	return false
}

// MetricsScrape is the infer.vllm_scrape v1 record: one GET of vLLM's
// /metrics, stamped on the client clock, kept whole in compact form
// (Stormlog's inference_vllm_v1 JSON Schema allows no field beyond these
// and requires every one but completed_at_ns). A failed scrape has
// Status "error", an Error and null Scrape and ScrapeDiscovery; a successful one
// has Status "ok", a null Error, and both.
//
// Write it with Writer.Write; read it back with DecodeMetricsScrape
// (the artifact reader keeps this kind as *Raw).
type MetricsScrape struct {
	Header
	// ObservationScope is always "engine_aggregate".
	ObservationScope string `json:"observation_scope"`
	SessionID        string `json:"session_id"`
	RunID            string `json:"run_id"`
	// ObservedAtNS is when the GET was sent, wall-clock Unix epoch
	// nanoseconds on the client (the phase windows' clock).
	ObservedAtNS int64 `json:"observed_at_ns"`
	// TimestampNS equals ObservedAtNS.
	TimestampNS int64 `json:"timestamp_ns"`
	// CompletedAtNS is when the body had been read (or the request failed),
	// client wall clock, Unix ns.
	CompletedAtNS *int64 `json:"completed_at_ns"`
	// SourceURL is the metrics URL without credentials or query
	// (RedactURL).
	SourceURL string `json:"source_url"`
	// Marker is one of the Marker* constants.
	Marker string `json:"marker"`
	// IntervalMS is the configured interval between interval scrapes, ms.
	IntervalMS int64  `json:"interval_ms"`
	Status     string `json:"status"`
	// ClockDomain is the client's clock domain ("{host}/{boot}/unix_epoch_ns").
	ClockDomain string  `json:"clock_domain"`
	CaseID      *string `json:"case_id"`
	Phase       *string `json:"phase"`
	// DurationMS is CompletedAtNS − ObservedAtNS in milliseconds.
	DurationMS *float64 `json:"duration_ms"`
	// HTTPStatus is the answer's status code; null when no answer came.
	HTTPStatus *int `json:"http_status"`
	// Error says why the scrape failed: "HTTP 503", "unparseable response
	// …", "oversized: …", a transport error. Null when Status is "ok".
	Error *string `json:"error"`
	// ContentDigest is the SHA-256 of the body as read (after any
	// Content-Encoding), 64 lowercase hex digits; null when no body was read
	// whole.
	ContentDigest *string `json:"content_digest"`
	// ContentBytes is the length of that body.
	ContentBytes *int64 `json:"content_bytes"`
	// Scrape holds every series of an ok scrape.
	Scrape *ScrapeSeries `json:"scrape"`
	// ScrapeDiscovery compares an ok scrape with the metric catalogue.
	Discovery *ScrapeDiscovery `json:"discovery"`
}

// OK reports whether the scrape succeeded and carries its series.
func (r *MetricsScrape) OK() bool {
	return r.Status == ScrapeOK && r.Scrape != nil
}

// ErrMetricsScrape is wrapped by every DecodeMetricsScrape error.
var ErrMetricsScrape = errors.New("vllm: invalid infer.vllm_scrape record")

// DecodeMetricsScrape reads one infer.vllm_scrape v1 line (e.g. the JSON of an
// *Raw of kind KindMetricsScrape). It checks the kind, the
// marker and status enums, that an ok record carries its scrape and
// discovery and a failed one its error, and that every histogram value is
// well formed. Errors wrap ErrMetricsScrape.
func DecodeMetricsScrape(line []byte) (MetricsScrape, error) {
	var r MetricsScrape
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&r); err != nil {
		return MetricsScrape{}, fmt.Errorf("%w: %v", ErrMetricsScrape, err)
	}
	if dec.More() {
		return MetricsScrape{}, fmt.Errorf("%w: trailing data after the object", ErrMetricsScrape)
	}
	if r.RecordKind() != KindMetricsScrape {
		return MetricsScrape{}, fmt.Errorf("%w: kind is %s, want %s", ErrMetricsScrape, r.RecordKind(), KindMetricsScrape)
	}
	if !ValidScrapeMarker(r.Marker) {
		return MetricsScrape{}, fmt.Errorf("%w: marker %q", ErrMetricsScrape, r.Marker)
	}
	switch r.Status {
	case ScrapeOK:
		if r.Scrape == nil || r.Discovery == nil {
			return MetricsScrape{}, fmt.Errorf("%w: an ok scrape without its scrape or discovery", ErrMetricsScrape)
		}
	case ScrapeError:
		if r.Error == nil || *r.Error == "" {
			return MetricsScrape{}, fmt.Errorf("%w: a failed scrape without its error", ErrMetricsScrape)
		}
	default:
		return MetricsScrape{}, fmt.Errorf("%w: status %q", ErrMetricsScrape, r.Status)
	}
	if r.Scrape != nil {
		if err := r.Scrape.check(); err != nil {
			return MetricsScrape{}, fmt.Errorf("%w: %v", ErrMetricsScrape, err)
		}
	}
	return r, nil
}

// MetricsScrapes decodes every infer.vllm_scrape v1 record an artifact
// kept as Raw, in file order. The first undecodable one is an error (wrapping
// ErrMetricsScrape) naming its position among the scrapes.
func MetricsScrapes(a *Artifact) ([]MetricsScrape, error) {
	var out []MetricsScrape
	for _, raw := range a.Others {
		if raw.Kind != KindMetricsScrape {
			continue
		}
		r, err := DecodeMetricsScrape(raw.JSON)
		if err != nil {
			return nil, fmt.Errorf("scrape record %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ScrapeSeries is one scrape with every series kept, in compact form:
// Families maps each family's exposed name to its # TYPE
// ("counter", "gauge", "histogram", "summary", "untyped"); LabelSets maps a
// label-set id ("0", "1", …) to its labels, shared by every family that uses
// the set (a histogram's sets exclude "le"); Values maps a family to
// {label-set id: value}; Helps maps a family to its # HELP text.
type ScrapeSeries struct {
	Families  map[string]string                 `json:"families"`
	LabelSets map[string]map[string]string      `json:"label_sets"`
	Values    map[string]map[string]SeriesValue `json:"values"`
	Helps     map[string]string                 `json:"helps"`
}

// check verifies the internal consistency of a decoded compact scrape.
func (c *ScrapeSeries) check() error {
	if c.Families == nil || c.LabelSets == nil || c.Values == nil {
		return errors.New("scrape lacks families, label_sets or values")
	}
	for fam, byID := range c.Values {
		kind, ok := c.Families[fam]
		if !ok {
			return fmt.Errorf("values of %q, a family without a type", fam)
		}
		for id, v := range byID {
			if _, ok := c.LabelSets[id]; !ok {
				return fmt.Errorf("%s uses label set %q, which is not defined", fam, id)
			}
			dist := kind == "histogram" || kind == "summary"
			if dist != (v.Dist != nil) {
				return fmt.Errorf("%s{%s}: a %s value must be %s", fam, id, kind, map[bool]string{true: "an object", false: "a number"}[dist])
			}
		}
	}
	return nil
}

// SeriesValue is one series' value in a compact scrape: a sample (counters,
// gauges, untyped; JSON number or "NaN"/"+Inf"/"-Inf") or a distribution
// (histograms and summaries; JSON object).
type SeriesValue struct {
	Sample Float
	Dist   *SeriesDistribution
}

// MarshalJSON writes a distribution as an object and a sample as a number
// or a non-finite string.
func (v SeriesValue) MarshalJSON() ([]byte, error) {
	if v.Dist != nil {
		return json.Marshal(v.Dist)
	}
	return v.Sample.MarshalJSON()
}

// UnmarshalJSON reads either form; null is an error.
func (v *SeriesValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		return errors.New("a series value is null")
	case b[0] == '{':
		var d SeriesDistribution
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		*v = SeriesValue{Dist: &d}
		return nil
	default:
		var f Float
		if err := f.UnmarshalJSON(b); err != nil {
			return err
		}
		*v = SeriesValue{Sample: f}
		return nil
	}
}

// SeriesDistribution is a histogram (cumulative bucket counts under their "le"
// upper bounds, ascending) or a summary (quantile values under their
// quantile). Sum and Count are nil when the exposition had no _sum or
// _count sample: never invented as zero.
type SeriesDistribution struct {
	Buckets []SeriesBucket `json:"buckets"`
	Sum     *Float         `json:"sum"`
	Count   *Float         `json:"count"`
}

// UnmarshalJSON requires the buckets, sum and count keys (the schema's
// histogram_value) and rejects null buckets.
func (d *SeriesDistribution) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("histogram value: %v", err)
	}
	for k := range raw {
		if k != "buckets" && k != "sum" && k != "count" {
			return fmt.Errorf("histogram value has an unknown field %q", k)
		}
	}
	rb, okB := raw["buckets"]
	rs, okS := raw["sum"]
	rc, okC := raw["count"]
	if !okB || !okS || !okC {
		return errors.New("histogram value lacks buckets, sum or count")
	}
	var out SeriesDistribution
	if err := json.Unmarshal(rb, &out.Buckets); err != nil {
		return fmt.Errorf("histogram buckets: %v", err)
	}
	if out.Buckets == nil {
		return errors.New("histogram buckets are null")
	}
	for _, p := range []struct {
		src json.RawMessage
		dst **Float
	}{{rs, &out.Sum}, {rc, &out.Count}} {
		if string(bytes.TrimSpace(p.src)) == "null" {
			continue
		}
		var f Float
		if err := f.UnmarshalJSON(p.src); err != nil {
			return err
		}
		*p.dst = &f
	}
	*d = out
	return nil
}

// SeriesBucket is one [le, cumulative count] pair; JSON ["0.3", 12]. LE is the
// bound as the exposition's float text in OpenMetrics canonical form
// ("0.3", "1000.0", "+Inf"), which is what vLLM's prometheus_client writes.
type SeriesBucket struct {
	LE    string
	Count Float
}

// MarshalJSON writes the pair as a two-element array.
func (b SeriesBucket) MarshalJSON() ([]byte, error) {
	le, err := json.Marshal(b.LE)
	if err != nil {
		return nil, err
	}
	n, err := b.Count.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(le)+len(n)+3)
	out = append(out, '[')
	out = append(out, le...)
	out = append(out, ',')
	out = append(out, n...)
	return append(out, ']'), nil
}

// UnmarshalJSON reads a [string, number] pair whose bound parses as a float.
func (b *SeriesBucket) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil {
		return fmt.Errorf("bucket: %v", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("bucket has %d elements, want [le, count]", len(pair))
	}
	var le string
	if err := json.Unmarshal(pair[0], &le); err != nil {
		return fmt.Errorf("bucket bound: %v", err)
	}
	if _, err := strconv.ParseFloat(le, 64); err != nil {
		return fmt.Errorf("bucket bound %q is not a number", le)
	}
	var n Float
	if err := n.UnmarshalJSON(pair[1]); err != nil {
		return err
	}
	*b = SeriesBucket{LE: le, Count: n}
	return nil
}

// ScrapeDiscovery is the record's "discovery": what one scrape exposes
// measured against the catalogue of vLLM metric families. Name lists are
// sorted exposed family names and are never null.
type ScrapeDiscovery struct {
	// VerifiedVLLMVersion is the vLLM version the catalogue was checked
	// against (VerifiedVersion).
	VerifiedVLLMVersion string `json:"verified_vllm_version"`
	// Present lists catalogued families the scrape has.
	Present []string `json:"present"`
	// Absent lists catalogued families every default 0.30 server exposes,
	// missing here.
	Absent []string `json:"absent"`
	// OptionalAbsent lists catalogued families that need a server setting
	// (Entry.Requires), missing here, and optional subsystem prefixes
	// ("vllm:spec_decode_*") with no family at all.
	OptionalAbsent []string `json:"optional_absent"`
	// OptionalPresent lists families under an optional subsystem prefix the
	// catalogue does not name one by one (kept raw).
	OptionalPresent []string `json:"optional_present"`
	// DeprecatedPresent lists retired names that have a successor.
	DeprecatedPresent []string `json:"deprecated_present"`
	// RemovedPresent lists retired names without a successor.
	RemovedPresent []string `json:"removed_present"`
	// Unknown lists vllm: families the catalogue does not know (kept, never
	// dropped).
	Unknown []string `json:"unknown"`
	// Engines lists the distinct "engine" label values of vllm: series.
	Engines []string `json:"engines"`
	// ModelNames lists the distinct "model_name" label values.
	ModelNames []string `json:"model_names"`
	// ProcessStartNS is process_start_time_seconds × 1e9 (rounded), the
	// exporter's identity; null when the scrape has no single finite one.
	ProcessStartNS *int64 `json:"process_start_ns"`
}
