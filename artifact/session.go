package artifact

import (
	"encoding/json"
)

// Session statuses of infer.session: the first line is StatusRunning, the
// last one of the others — StatusCompleted, StatusInterrupted when the run
// was stopped (Ctrl+C), StatusIncomplete when an error ended it.
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusIncomplete  = "incomplete"
)

// Session is an infer.session v1 record. An artifact's first line is one
// with Status StatusRunning and Config set; its last line is another with
// Status StatusCompleted, StatusInterrupted or StatusIncomplete and Summary
// set.
type Session struct {
	SessionID string `json:"session_id"`
	// TimestampNS is the wall clock (Unix epoch, ns) when the session started
	// (first line) or ended (last line).
	TimestampNS int64           `json:"timestamp_ns"`
	Status      string          `json:"status"`
	Config      *SessionConfig  `json:"config,omitempty"`
	Summary     *SessionSummary `json:"summary,omitempty"`
}

func (Session) selfEncoding() {}

// RecordKind returns KindSession.
func (Session) RecordKind() Kind { return KindSession }

// MarshalJSON writes the record with its event_type and schema_version.
func (s Session) MarshalJSON() ([]byte, error) {
	type plain Session
	return withKind(KindSession, plain(s))
}

// Terminal reports whether the session record is a final one (completed,
// interrupted or incomplete).
func (s Session) Terminal() bool {
	switch s.Status {
	case StatusCompleted, StatusInterrupted, StatusIncomplete:
		return true
	}
	return false
}

// SessionConfig is the settings block of the first infer.session line.
// The API key is never part of it; URLs are recorded
// through RedactURL.
type SessionConfig struct {
	Endpoint           string   `json:"endpoint"`
	Model              string   `json:"model"`
	Concurrency        []int64  `json:"concurrency"`
	InputTokens        []int64  `json:"input_tokens"`
	OutputTokens       []int64  `json:"output_tokens"`
	DurationSeconds    *float64 `json:"duration_seconds"`
	RequestCount       *int64   `json:"request_count"`
	Stream             bool     `json:"stream"`
	StreamIncludeUsage bool     `json:"stream_include_usage"`
	// Tokenizer is the requested tokenizer ("auto", "tiktoken", "estimate"...).
	Tokenizer     string        `json:"tokenizer"`
	SystemSampler string        `json:"system_sampler"`
	Arrivals      []ArrivalSpec `json:"arrivals"`
	// MaxInFlight and Overflow apply to open-loop arrivals only (null for closed loops).
	MaxInFlight              *int64     `json:"max_in_flight"`
	Overflow                 *string    `json:"overflow"`
	Prompts                  PromptSpec `json:"prompts"`
	CacheState               string     `json:"cache_state"`
	CacheResetURL            *string    `json:"cache_reset_url"`
	CacheResetTimeoutSeconds float64    `json:"cache_reset_timeout_seconds"`
	// ServerMetrics is null when --vllm-metrics is off.
	ServerMetrics *MetricsConfig `json:"vllm_metrics"`
	// ServerSpans is the span receiver's settings object, or null when off;
	// its shape belongs to the receiver package.
	ServerSpans        json.RawMessage    `json:"vllm_spans"`
	EnvironmentProxies EnvironmentProxies `json:"environment_proxies"`
}

// MetricsConfig is the session config's vllm_metrics block.
type MetricsConfig struct {
	URL             string  `json:"url"`
	IntervalSeconds float64 `json:"interval_seconds"`
	TimeoutSeconds  float64 `json:"timeout_seconds"`
	// Authorization is null, or "bearer" when the API key is sent to the
	// metrics URL (same origin only); never the key itself.
	Authorization *string `json:"authorization"`
}

// EnvironmentProxies records that HTTP(S)_PROXY settings were ignored, and
// which schemes the environment set — never the proxy URLs.
type EnvironmentProxies struct {
	// Policy is always "ignored".
	Policy  string   `json:"policy"`
	Schemes []string `json:"schemes"`
}

// SessionSummary is the summary block of the final infer.session line.
type SessionSummary struct {
	SessionID string `json:"session_id"`
	// Source is the producer, "inferprobe.profile".
	Source string `json:"source"`
	Host   string `json:"host"`
	PID    int64  `json:"pid"`
	// StartedAtNS and EndedAtNS are wall-clock Unix epoch nanoseconds.
	StartedAtNS     int64   `json:"started_at_ns"`
	EndedAtNS       int64   `json:"ended_at_ns"`
	DurationSeconds float64 `json:"duration_seconds"`
	Status          string  `json:"status"`
	// RequestsRecorded counts infer.request records written, warmup included.
	RequestsRecorded int64 `json:"requests_recorded"`
	// Error says why an incomplete session stopped; null otherwise.
	Error *string `json:"error"`
}

// ArtifactHeader is the infer.artifact v2 identity record of the
// correlation model: who produced the artifact, on which host and clock.
type ArtifactHeader struct {
	Context Context `json:"context"`
	// EventID is always "artifact".
	EventID  string           `json:"event_id"`
	Metadata ArtifactMetadata `json:"metadata"`
	// ArtifactKind is "inference_jsonl".
	ArtifactKind string `json:"artifact_kind"`
	// CreatedAtNS is the session start, wall-clock Unix epoch ns.
	CreatedAtNS int64 `json:"created_at_ns"`
}

func (ArtifactHeader) selfEncoding() {}

// RecordKind returns KindArtifact.
func (ArtifactHeader) RecordKind() Kind { return KindArtifact }

// MarshalJSON writes the record with its event_type and schema_version.
func (a ArtifactHeader) MarshalJSON() ([]byte, error) {
	type plain ArtifactHeader
	return withKind(KindArtifact, plain(a))
}

// ArtifactMetadata is infer.artifact's metadata. BootID is the host's
// /proc/sys/kernel/random/boot_id, null when unreadable; readers of artifacts
// written before clock domains named the boot take it from here.
type ArtifactMetadata struct {
	BootID *string `json:"boot_id"`
}

// Context is the correlation-model context every v2 record carries: run,
// session, producer, host, process and clock domain.
type Context struct {
	RunID      string `json:"run_id"`
	SessionID  string `json:"session_id"`
	ProducerID string `json:"producer_id"`
	Source     string `json:"source"`
	// SourceVersion is the producing binary's version, null when unknown.
	SourceVersion  *string `json:"source_version"`
	Engine         *string `json:"engine,omitempty"`
	EngineVersion  *string `json:"engine_version,omitempty"`
	Backend        *string `json:"backend,omitempty"`
	BackendVersion *string `json:"backend_version,omitempty"`
	Host           *string `json:"host"`
	PID            *int64  `json:"pid"`
	DeviceUUID     *string `json:"device_uuid,omitempty"`
	Rank           *int64  `json:"rank"`
	LocalRank      *int64  `json:"local_rank"`
	WorldSize      *int64  `json:"world_size"`
	// ClockDomain is "{host}/{boot_id}/unix_epoch_ns", or
	// "{host}/unix_epoch_ns" without a boot id (see ClockDomain).
	ClockDomain string `json:"clock_domain"`
	// ClockKind is "wall", "monotonic" or "device".
	ClockKind string `json:"clock_kind"`
	// CollectionMode is "active", "passive" or "imported".
	CollectionMode string `json:"collection_mode"`
	// Provenance is "observed", "reported" or "estimated".
	Provenance string `json:"provenance"`
}

// ProducerProfile is the producer_id and source of artifacts written by
// `inferprobe profile`.
const ProducerProfile = "inferprobe.profile"

// NewArtifactHeader builds the infer.artifact record of a profile run:
// producer and source "inferprobe.profile", the host's clock domain, clock
// kind "wall", collection mode "active", provenance "observed", and null
// rank/local_rank/world_size. createdAtNS is the session start (Unix ns);
// sourceVersion "" is recorded as null.
func NewArtifactHeader(runID, sessionID, sourceVersion string, createdAtNS int64, host Host, pid int) ArtifactHeader {
	var version *string
	if sourceVersion != "" {
		version = Ptr(sourceVersion)
	}
	return ArtifactHeader{
		Context: Context{
			RunID:          runID,
			SessionID:      sessionID,
			ProducerID:     ProducerProfile,
			Source:         ProducerProfile,
			SourceVersion:  version,
			Host:           Ptr(host.Name),
			PID:            Ptr(int64(pid)),
			ClockDomain:    ClockDomain(host.Name, host.BootID),
			ClockKind:      "wall",
			CollectionMode: "active",
			Provenance:     "observed",
		},
		EventID:      "artifact",
		Metadata:     ArtifactMetadata{BootID: host.BootID},
		ArtifactKind: "inference_jsonl",
		CreatedAtNS:  createdAtNS,
	}
}
