package vllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
)

// Scrape markers (stormlog.md §2.5 infer.vllm_scrape "marker", §4.1): where in
// a phase a scrape was taken.
const (
	// MarkerPhaseStart is the scrape just before a phase's first send.
	MarkerPhaseStart = "phase_start"
	// MarkerInterval is a scrape every --vllm-metrics-interval seconds
	// during a phase.
	MarkerInterval = "interval"
	// MarkerPhaseEnd is the scrape after a phase's drain.
	MarkerPhaseEnd = "phase_end"
	// MarkerManual is a scrape outside the phase cycle.
	MarkerManual = "manual"
)

// Scrape statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// ObservationScope is the observation_scope of every scrape and report block:
// the numbers describe every request the engine served, from every client.
const ObservationScope = "engine_aggregate"

// validMarker reports whether m is one of the four markers.
func validMarker(m string) bool {
	switch m {
	case MarkerPhaseStart, MarkerInterval, MarkerPhaseEnd, MarkerManual:
		return true
	}
	return false
}

// ScrapeRecord is the infer.vllm_scrape v1 record: one GET of vLLM's
// /metrics, stamped on the client clock, kept whole in compact form
// (stormlog.md §2.5; fixtures/stormlog/schemas/inference_vllm_v1.schema.json,
// whose "scrape" definition allows no other field). A failed scrape has
// Status "error", an Error and null Scrape and Discovery; a successful one
// has Status "ok", a null Error, and both.
//
// Write it with artifact.Writer.Write; read it back with DecodeScrapeRecord
// (the artifact reader keeps this kind as *artifact.Raw).
type ScrapeRecord struct {
	artifact.Header
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
	// (artifact.RedactURL).
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
	Scrape *Compact `json:"scrape"`
	// Discovery compares an ok scrape with the metric catalogue.
	Discovery *Discovery `json:"discovery"`
}

// OK reports whether the scrape succeeded and carries its series.
func (r *ScrapeRecord) OK() bool {
	return r.Status == StatusOK && r.Scrape != nil
}

// ErrRecord is wrapped by every DecodeScrapeRecord error.
var ErrRecord = errors.New("vllm: invalid infer.vllm_scrape record")

// DecodeScrapeRecord reads one infer.vllm_scrape v1 line (e.g. the JSON of an
// *artifact.Raw of kind artifact.KindVLLMScrape). It checks the kind, the
// marker and status enums, that an ok record carries its scrape and
// discovery and a failed one its error, and that every histogram value is
// well formed. Errors wrap ErrRecord.
func DecodeScrapeRecord(line []byte) (ScrapeRecord, error) {
	var r ScrapeRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&r); err != nil {
		return ScrapeRecord{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if dec.More() {
		return ScrapeRecord{}, fmt.Errorf("%w: trailing data after the object", ErrRecord)
	}
	if r.RecordKind() != artifact.KindVLLMScrape {
		return ScrapeRecord{}, fmt.Errorf("%w: kind is %s, want %s", ErrRecord, r.RecordKind(), artifact.KindVLLMScrape)
	}
	if !validMarker(r.Marker) {
		return ScrapeRecord{}, fmt.Errorf("%w: marker %q", ErrRecord, r.Marker)
	}
	switch r.Status {
	case StatusOK:
		if r.Scrape == nil || r.Discovery == nil {
			return ScrapeRecord{}, fmt.Errorf("%w: an ok scrape without its scrape or discovery", ErrRecord)
		}
	case StatusError:
		if r.Error == nil || *r.Error == "" {
			return ScrapeRecord{}, fmt.Errorf("%w: a failed scrape without its error", ErrRecord)
		}
	default:
		return ScrapeRecord{}, fmt.Errorf("%w: status %q", ErrRecord, r.Status)
	}
	if r.Scrape != nil {
		if err := r.Scrape.check(); err != nil {
			return ScrapeRecord{}, fmt.Errorf("%w: %v", ErrRecord, err)
		}
	}
	return r, nil
}

// ScrapesFromArtifact decodes every infer.vllm_scrape v1 record an artifact
// kept as Raw, in file order. The first undecodable one is an error (wrapping
// ErrRecord) naming its position among the scrapes.
func ScrapesFromArtifact(a *artifact.Artifact) ([]ScrapeRecord, error) {
	var out []ScrapeRecord
	for _, raw := range a.Others {
		if raw.Kind != artifact.KindVLLMScrape {
			continue
		}
		r, err := DecodeScrapeRecord(raw.JSON)
		if err != nil {
			return nil, fmt.Errorf("scrape record %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Compact is one scrape with every series kept (stormlog.md §4.1 "stored
// compactly"): Families maps each family's exposed name to its # TYPE
// ("counter", "gauge", "histogram", "summary", "untyped"); LabelSets maps a
// label-set id ("0", "1", …) to its labels, shared by every family that uses
// the set (a histogram's sets exclude "le"); Values maps a family to
// {label-set id: value}; Helps maps a family to its # HELP text.
type Compact struct {
	Families  map[string]string            `json:"families"`
	LabelSets map[string]map[string]string `json:"label_sets"`
	Values    map[string]map[string]Value  `json:"values"`
	Helps     map[string]string            `json:"helps"`
}

// check verifies the internal consistency of a decoded compact scrape.
func (c *Compact) check() error {
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

// Value is one series' value in a compact scrape: a sample (counters,
// gauges, untyped; JSON number or "NaN"/"+Inf"/"-Inf") or a distribution
// (histograms and summaries; JSON object).
type Value struct {
	Sample artifact.Float
	Dist   *Distribution
}

// MarshalJSON writes a distribution as an object and a sample as a number
// or a non-finite string.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.Dist != nil {
		return json.Marshal(v.Dist)
	}
	return v.Sample.MarshalJSON()
}

// UnmarshalJSON reads either form; null is an error.
func (v *Value) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		return errors.New("a series value is null")
	case b[0] == '{':
		var d Distribution
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		*v = Value{Dist: &d}
		return nil
	default:
		var f artifact.Float
		if err := f.UnmarshalJSON(b); err != nil {
			return err
		}
		*v = Value{Sample: f}
		return nil
	}
}

// Distribution is a histogram (cumulative bucket counts under their "le"
// upper bounds, ascending) or a summary (quantile values under their
// quantile). Sum and Count are nil when the exposition had no _sum or
// _count sample: never invented as zero.
type Distribution struct {
	Buckets []Bucket        `json:"buckets"`
	Sum     *artifact.Float `json:"sum"`
	Count   *artifact.Float `json:"count"`
}

// UnmarshalJSON requires the buckets, sum and count keys (the schema's
// histogram_value) and rejects null buckets.
func (d *Distribution) UnmarshalJSON(b []byte) error {
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
	var out Distribution
	if err := json.Unmarshal(rb, &out.Buckets); err != nil {
		return fmt.Errorf("histogram buckets: %v", err)
	}
	if out.Buckets == nil {
		return errors.New("histogram buckets are null")
	}
	for _, p := range []struct {
		src json.RawMessage
		dst **artifact.Float
	}{{rs, &out.Sum}, {rc, &out.Count}} {
		if string(bytes.TrimSpace(p.src)) == "null" {
			continue
		}
		var f artifact.Float
		if err := f.UnmarshalJSON(p.src); err != nil {
			return err
		}
		*p.dst = &f
	}
	*d = out
	return nil
}

// Bucket is one [le, cumulative count] pair; JSON ["0.3", 12]. LE is the
// bound as the exposition's float text in OpenMetrics canonical form
// ("0.3", "1000.0", "+Inf"), which is what vLLM's prometheus_client writes.
type Bucket struct {
	LE    string
	Count artifact.Float
}

// MarshalJSON writes the pair as a two-element array.
func (b Bucket) MarshalJSON() ([]byte, error) {
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
func (b *Bucket) UnmarshalJSON(data []byte) error {
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
	if _, ok := parseBound(le); !ok {
		return fmt.Errorf("bucket bound %q is not a number", le)
	}
	var n artifact.Float
	if err := n.UnmarshalJSON(pair[1]); err != nil {
		return err
	}
	*b = Bucket{LE: le, Count: n}
	return nil
}

// Discovery is what one scrape exposes measured against the catalogue
// (stormlog.md §2.5 "discovery", §4.2). Name lists are sorted exposed family
// names and are never null.
type Discovery struct {
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

// sortedKeys returns the keys of a set, sorted, never nil.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// fptr returns a pointer to an artifact.Float.
func fptr(v float64) *artifact.Float { f := artifact.Float(v); return &f }
