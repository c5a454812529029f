package artifact

import (
	"encoding/json"
)

// Session statuses of infer.session (stormlog.md §2.5, seed "Ctrl+C stops a
// profile"): the first line is StatusRunning, the last one of the others.
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusInterrupted = "interrupted"
	StatusIncomplete  = "incomplete"
)

// Request outcome statuses of infer.request v1 (seed "Request outcomes").
const (
	RequestOK              = "ok"
	RequestTimeout         = "timeout"
	RequestRejected        = "rejected"
	RequestUnreachable     = "unreachable"
	RequestDeliveryUnknown = "delivery_unknown"
	RequestError           = "error"
	RequestDropped         = "dropped"
	RequestCancelled       = "cancelled"
)

// Phases of a case (seed "Measured window and drain").
const (
	PhaseWarmup   = "warmup"
	PhaseMeasured = "measured"
)

// ArrivalClosed is the closed-loop arrival mode; every other mode
// (fixed-rate, poisson, burst, replay) is an open loop.
const ArrivalClosed = "closed"

// Session is an infer.session v1 record. An artifact's first line is one
// with Status StatusRunning and Config set; its last line is another with
// Status StatusCompleted, StatusInterrupted or StatusIncomplete and Summary
// set (stormlog.md §2.5).
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

// SessionConfig is the settings block of the first infer.session line
// (stormlog.md §2.5). The API key is never part of it; URLs are recorded
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
	// VLLMMetrics is null when --vllm-metrics is off.
	VLLMMetrics *VLLMMetricsConfig `json:"vllm_metrics"`
	// VLLMSpans is the span receiver's settings object, or null when off;
	// its shape belongs to the receiver package.
	VLLMSpans          json.RawMessage    `json:"vllm_spans"`
	EnvironmentProxies EnvironmentProxies `json:"environment_proxies"`
}

// VLLMMetricsConfig is the session config's vllm_metrics block.
type VLLMMetricsConfig struct {
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

// ArtifactHeader is the infer.artifact v2 identity record (stormlog.md §2.5,
// inference_correlation_v2.schema.json "artifact").
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

// Context is the correlation-model context of v2 records
// (inference_correlation_v2.schema.json "context").
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

// Workload is the infer.workload v1 record: what traffic a run sent, so it
// can be repeated (stormlog.md §2.5, seed "Workload record").
type Workload struct {
	SessionID string `json:"session_id"`
	// WorkloadDigest is TrafficDigest of this record: 64 lowercase hex digits.
	WorkloadDigest string         `json:"workload_digest"`
	Seed           int64          `json:"seed"`
	Generator      Generator      `json:"generator"`
	Cases          []WorkloadCase `json:"cases"`
	Measurement    Measurement    `json:"measurement"`
	Prompts        PromptSpec     `json:"prompts"`
	Warmup         Warmup         `json:"warmup"`
	Decoding       Decoding       `json:"decoding"`
	Tokenizer      Tokenizer      `json:"tokenizer"`
	Cache          WorkloadCache  `json:"cache"`
	ChatTemplate   ChatTemplate   `json:"chat_template"`
}

func (Workload) selfEncoding() {}

// RecordKind returns KindWorkload.
func (Workload) RecordKind() Kind { return KindWorkload }

// MarshalJSON writes the record with its event_type and schema_version.
func (w Workload) MarshalJSON() ([]byte, error) {
	type plain Workload
	return withKind(KindWorkload, plain(w))
}

// TrafficDigest computes workload_digest per the contract (stormlog.md §2.5
// "Workload digest", seed "Workload record"): Digest of the canonical JSON of
// {seed, generator, cases (a replay trace reduced to arrivals and digest),
// measurement {request_count, duration_seconds, plus max_in_flight and
// overflow when any case is an open loop}, prompts, warmup, decoding,
// tokenizer, cache_requested}. It leaves out the endpoint, model, timeouts,
// drain timeout, reset URL and trace source, so one workload sent to two
// engine configurations has one digest; integral floats count as integers
// (extra_body 0 and 0.0 are equal).
func (w Workload) TrafficDigest() (string, error) {
	openLoop := false
	cases := make([]any, 0, len(w.Cases))
	for _, c := range w.Cases {
		if c.Arrival.Mode != ArrivalClosed {
			openLoop = true
		}
		arrival := map[string]any{"mode": c.Arrival.Mode}
		if c.Arrival.RatePerSecond != nil {
			arrival["rate_per_second"] = *c.Arrival.RatePerSecond
		}
		if c.Arrival.BurstSize != nil {
			arrival["burst_size"] = *c.Arrival.BurstSize
		}
		if c.Arrival.BurstIntervalSeconds != nil {
			arrival["burst_interval_seconds"] = *c.Arrival.BurstIntervalSeconds
		}
		if t := c.Arrival.Trace; t != nil {
			arrival["trace"] = map[string]any{"arrivals": t.Arrivals, "digest": t.Digest}
		}
		cases = append(cases, map[string]any{
			"case_id":       c.CaseID,
			"input_tokens":  c.InputTokens,
			"output_tokens": c.OutputTokens,
			"concurrency":   c.Concurrency,
			"max_in_flight": c.MaxInFlight,
			"arrival":       arrival,
		})
	}
	measurement := map[string]any{
		"request_count":    w.Measurement.RequestCount,
		"duration_seconds": w.Measurement.DurationSeconds,
	}
	if openLoop {
		measurement["max_in_flight"] = w.Measurement.MaxInFlight
		measurement["overflow"] = w.Measurement.Overflow
	}
	return Digest(map[string]any{
		"seed":            w.Seed,
		"generator":       w.Generator,
		"cases":           cases,
		"measurement":     measurement,
		"prompts":         w.Prompts,
		"warmup":          w.Warmup,
		"decoding":        w.Decoding,
		"tokenizer":       w.Tokenizer,
		"cache_requested": w.Cache.Requested,
	})
}

// Generator names the prompt generator and its version; the version changes
// whenever the generated text would.
type Generator struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// WorkloadCase is one case of the workload matrix.
type WorkloadCase struct {
	CaseID       string `json:"case_id"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	// Concurrency is the closed-loop worker count; null for open loops.
	Concurrency *int64 `json:"concurrency"`
	// MaxInFlight is the open-loop in-flight cap; null for closed loops.
	MaxInFlight *int64      `json:"max_in_flight"`
	Arrival     ArrivalSpec `json:"arrival"`
}

// ArrivalSpec is an arrival shape: mode "closed", "fixed-rate", "poisson",
// "burst" or "replay", with only the fields its mode takes.
type ArrivalSpec struct {
	Mode string `json:"mode"`
	// RatePerSecond is set for fixed-rate and poisson (requests/second).
	RatePerSecond *float64 `json:"rate_per_second,omitempty"`
	// BurstSize and BurstIntervalSeconds are set for burst.
	BurstSize            *int64   `json:"burst_size,omitempty"`
	BurstIntervalSeconds *float64 `json:"burst_interval_seconds,omitempty"`
	// Trace is set for replay.
	Trace *ArrivalTrace `json:"trace,omitempty"`
}

// ArrivalTrace describes a replayed arrival trace.
type ArrivalTrace struct {
	// Source says where the offsets came from ("offset_ms trace" or
	// "inferprobe artifact"); not part of the workload digest.
	Source string `json:"source"`
	// CaseID is the artifact case replayed, null for an offset_ms trace.
	CaseID *string `json:"case_id"`
	// Arrivals is the number of offsets in the trace.
	Arrivals int64 `json:"arrivals"`
	// Digest identifies the offsets (64 lowercase hex digits).
	Digest string `json:"digest"`
}

// Measurement holds the phase-length settings of a run.
type Measurement struct {
	RequestCount    *int64   `json:"request_count"`
	DurationSeconds *float64 `json:"duration_seconds"`
	// MaxInFlight and Overflow apply to open-loop arrivals only (null for closed loops).
	MaxInFlight         *int64  `json:"max_in_flight"`
	Overflow            *string `json:"overflow"`
	DrainTimeoutSeconds float64 `json:"drain_timeout_seconds"`
	TimeoutSeconds      float64 `json:"timeout_seconds"`
}

// PromptSpec is the prompt mode: "repeat", "unique" or "shared-prefix"
// (the last with its ratio in (0,1) and group count).
type PromptSpec struct {
	Mode              string   `json:"mode"`
	SharedPrefixRatio *float64 `json:"shared_prefix_ratio,omitempty"`
	PrefixGroups      *int64   `json:"prefix_groups,omitempty"`
}

// Warmup is the warmup setting: request count and whether warmup prompts
// are the measured ones ("measured", repeat mode) or separate ("separate").
type Warmup struct {
	Requests int64  `json:"requests"`
	Prompts  string `json:"prompts"`
}

// Decoding is what the requests asked of the server.
type Decoding struct {
	Stream             bool   `json:"stream"`
	StreamIncludeUsage bool   `json:"stream_include_usage"`
	MaxTokensField     string `json:"max_tokens_field"`
	// ExtraBody is the --extra-body object merged into every request ({}
	// when none).
	ExtraBody json.RawMessage `json:"extra_body"`
	// OtherSettings is "server defaults".
	OtherSettings string `json:"other_settings"`
}

// Tokenizer identifies what sized prompts and counted tokens without usage.
type Tokenizer struct {
	// Source is "tiktoken", "transformers" or "estimated".
	Source         string  `json:"source"`
	Exact          bool    `json:"exact"`
	Name           *string `json:"name"`
	Revision       *string `json:"revision"`
	Library        *string `json:"library"`
	LibraryVersion *string `json:"library_version"`
}

// WorkloadCache is the requested cache state and the (redacted) reset URL.
type WorkloadCache struct {
	// Requested is "unspecified" or "cold".
	Requested string  `json:"requested"`
	ResetURL  *string `json:"reset_url"`
}

// ChatTemplate says who applied the chat template ("server") and, as a hint
// only, the digest of a local template.
type ChatTemplate struct {
	AppliedBy            string  `json:"applied_by"`
	ClientTemplateDigest *string `json:"client_template_digest"`
}

// SLORecord is the infer.slo v1 record: the SLO policy a profile run
// declared (stormlog.md §2.5, §3.1). At most one per artifact.
type SLORecord struct {
	SessionID string `json:"session_id"`
	// Source is "flags" or "file".
	Source string `json:"source"`
	// Digest is Digest(SLO): 64 lowercase hex digits; 500 and 500.0 agree.
	Digest string `json:"digest"`
	// SLO is the policy document (format "stormlog.infer.slo" v1), validated
	// by the analyze package.
	SLO json.RawMessage `json:"slo"`
}

func (SLORecord) selfEncoding() {}

// RecordKind returns KindSLO.
func (SLORecord) RecordKind() Kind { return KindSLO }

// MarshalJSON writes the record with its event_type and schema_version.
func (s SLORecord) MarshalJSON() ([]byte, error) {
	type plain SLORecord
	return withKind(KindSLO, plain(s))
}

// CacheState is the infer.cache_state v1 record, written per case before it
// runs (stormlog.md §2.5, seed "Cache state").
type CacheState struct {
	SessionID string `json:"session_id"`
	CaseID    string `json:"case_id"`
	// Requested is "unspecified" or "cold".
	Requested string `json:"requested"`
	// Reset is null when no reset URL was given.
	Reset        *CacheReset `json:"reset"`
	Attempted    bool        `json:"attempted"`
	Acknowledged bool        `json:"acknowledged"`
	// Verified is "unverified" until an engine adapter can read the cache.
	Verified string `json:"verified"`
	Reason   string `json:"reason"`
	// RunKind is "cold_start", "steady_state" or "unspecified".
	RunKind string `json:"run_kind"`
}

func (CacheState) selfEncoding() {}

// RecordKind returns KindCacheState.
func (CacheState) RecordKind() Kind { return KindCacheState }

// MarshalJSON writes the record with its event_type and schema_version.
func (c CacheState) MarshalJSON() ([]byte, error) {
	type plain CacheState
	return withKind(KindCacheState, plain(c))
}

// CacheReset is what the cache reset endpoint answered.
type CacheReset struct {
	// URL is the reset URL through RedactURL.
	URL string `json:"url"`
	// AtNS is when the first attempt was sent; AnsweredAtNS when the recorded
	// (last) answer came back; Unix epoch ns.
	AtNS         *int64 `json:"at_ns"`
	AnsweredAtNS *int64 `json:"answered_at_ns"`
	// Status is the last HTTP status, null when none came back.
	Status *int64  `json:"status"`
	Error  *string `json:"error"`
	// Success is the answer's "success" field as sent (any JSON value), or
	// null when the answer had none.
	Success json.RawMessage `json:"success"`
	// Answer is "acknowledged", "refused" or "accepted_unverified".
	Answer   string `json:"answer"`
	Attempts int64  `json:"attempts"`
}

// PhaseWindow is the infer.phase_window v1 record, one per phase (warmup and
// measured) of each case (stormlog.md §2.5, seed "Measured window and
// drain"). Times are wall-clock Unix epoch ns; a missing time is null, never
// 0 (analysis marks such a window phase_window_incomplete).
type PhaseWindow struct {
	SessionID           string   `json:"session_id"`
	CaseID              string   `json:"case_id"`
	Phase               string   `json:"phase"`
	ArrivalMode         string   `json:"arrival_mode"`
	StartedAtNS         *int64   `json:"started_at_ns"`
	WindowEndedAtNS     *int64   `json:"window_ended_at_ns"`
	DrainedAtNS         *int64   `json:"drained_at_ns"`
	DrainTimeoutSeconds *float64 `json:"drain_timeout_seconds"`
	// ScheduledArrivals is the open-loop schedule's length; null for closed
	// loops.
	ScheduledArrivals *int64 `json:"scheduled_arrivals"`
	// ScheduledEndpointOffsetNS is where the schedule ends, from the phase
	// start: the duration, or one slot after the last counted arrival; null
	// for closed loops and replays without a duration.
	ScheduledEndpointOffsetNS *int64 `json:"scheduled_endpoint_offset_ns"`
	// PromptsDigest covers the prompts of every scheduled arrival in order.
	PromptsDigest     *string            `json:"prompts_digest"`
	AbandonedRequests *AbandonedRequests `json:"abandoned_requests"`
}

func (PhaseWindow) selfEncoding() {}

// RecordKind returns KindPhaseWindow.
func (PhaseWindow) RecordKind() Kind { return KindPhaseWindow }

// MarshalJSON writes the record with its event_type and schema_version.
func (p PhaseWindow) MarshalJSON() ([]byte, error) {
	type plain PhaseWindow
	return withKind(KindPhaseWindow, plain(p))
}

// AbandonedRequests is what a phase waited for before starting: calls an
// earlier drain gave up on that were still running.
type AbandonedRequests struct {
	RunningAtStart int64   `json:"running_at_start"`
	WaitedSeconds  float64 `json:"waited_seconds"`
	StillRunning   int64   `json:"still_running"`
}

// Request is the infer.request v1 record: one client request as observed by
// inferprobe (stormlog.md §2.5, seed "Profile an endpoint" … "Token
// accounting"). Times ending in _ns are wall-clock Unix epoch nanoseconds,
// durations ending in _ms are milliseconds measured on the monotonic clock.
// Every value that can be unknown is a pointer and is written as null, never
// 0. The v2 infer.request (correlation model) is a different record; see
// KindRequestV2.
type Request struct {
	SessionID string `json:"session_id"`
	// RequestID is "<case_id>_<phase>_<worker>_<index>".
	RequestID string `json:"request_id"`
	CaseID    string `json:"case_id"`
	Phase     string `json:"phase"`
	// TimestampNS equals StartedAtNS.
	TimestampNS *int64 `json:"timestamp_ns"`
	// StartedAtNS is when the request was sent; EndedAtNS when it ended.
	StartedAtNS *int64 `json:"started_at_ns"`
	EndedAtNS   *int64 `json:"ended_at_ns"`
	// Endpoint is the URL through RedactURL.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Concurrency is the closed-loop worker count; null for open loops.
	Concurrency *int64 `json:"concurrency"`
	// MaxInFlight is the open-loop in-flight cap; null for closed loops.
	MaxInFlight        *int64 `json:"max_in_flight"`
	TargetInputTokens  int64  `json:"target_input_tokens"`
	TargetOutputTokens int64  `json:"target_output_tokens"`
	Stream             bool   `json:"stream"`
	// Status is one of the Request* outcome constants.
	Status string `json:"status"`
	// E2ELatencyMS is send → end of response (after [DONE] when streaming);
	// null for dropped/cancelled requests.
	E2ELatencyMS *float64 `json:"e2e_latency_ms"`
	// TTFTMS is send → first non-empty content or reasoning delta; null
	// without streaming or without content.
	TTFTMS *float64 `json:"ttft_ms"`
	// FirstChunkLatencyMS is send → first SSE data event.
	FirstChunkLatencyMS *float64 `json:"first_chunk_latency_ms"`
	// ChunkInterarrivalMS are the gaps between content chunks (chunk-level,
	// never inter-token latency); written as [] when empty.
	ChunkInterarrivalMS []float64 `json:"chunk_interarrival_ms"`
	PromptTokens        *int64    `json:"prompt_tokens"`
	// PromptTokenSource is "server_usage", a tokenizer name, or "estimated".
	PromptTokenSource string  `json:"prompt_token_source"`
	PromptTokenExact  bool    `json:"prompt_token_exact"`
	OutputTokens      *int64  `json:"output_tokens"`
	OutputTokenSource string  `json:"output_token_source"`
	OutputTokenExact  bool    `json:"output_token_exact"`
	TotalTokens       *int64  `json:"total_tokens"`
	FinishReason      *string `json:"finish_reason"`
	ErrorType         *string `json:"error_type"`
	ErrorMessage      *string `json:"error_message"`
	HTTPStatus        *int64  `json:"http_status"`
	// ArrivalMode is the case's arrival mode ("closed", "poisson", ...).
	ArrivalMode  string `json:"arrival_mode"`
	RequestIndex *int64 `json:"request_index"`
	// IntendedAtNS is the scheduled arrival time.
	IntendedAtNS *int64 `json:"intended_at_ns"`
	// DispatchLagMS is sent − intended, in ms.
	DispatchLagMS      *float64 `json:"dispatch_lag_ms"`
	HeldForSlot        *bool    `json:"held_for_slot"`
	InFlightAtDispatch *int64   `json:"in_flight_at_dispatch"`
	// PromptMode is "repeat", "unique" or "shared-prefix".
	PromptMode         string  `json:"prompt_mode"`
	PromptID           *string `json:"prompt_id"`
	PrefixGroup        *int64  `json:"prefix_group"`
	SharedPrefixTokens *int64  `json:"shared_prefix_tokens"`
	PromptDigest       *string `json:"prompt_digest"`
	// XRequestID is the X-Request-Id sent, "inferprobe-<run_id>-<request_id>";
	// null for a request never sent.
	XRequestID *string `json:"x_request_id"`
	// TraceID is an inferprobe addition to the Stormlog v1 record: the W3C
	// trace id (32 lowercase hex digits) of the traceparent header sent with
	// the request, so server spans can be joined by trace as well as by
	// X-Request-Id; null for a request never sent.
	TraceID *string `json:"trace_id"`
	// FirstAnswerMS is an inferprobe addition to the Stormlog v1 record: send
	// → first non-empty non-reasoning content delta, in ms, when the model
	// streamed reasoning first (time to first answer token); null otherwise
	// or when no answer content arrived.
	FirstAnswerMS *float64 `json:"first_answer_ms"`
}

func (Request) selfEncoding() {}

// RecordKind returns KindRequest.
func (Request) RecordKind() Kind { return KindRequest }

// MarshalJSON writes the record with its event_type and schema_version;
// a nil ChunkInterarrivalMS is written as [].
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	p := plain(r)
	if p.ChunkInterarrivalMS == nil {
		p.ChunkInterarrivalMS = []float64{}
	}
	return withKind(KindRequest, p)
}

// Components of infer.capabilities: the vLLM /metrics scraper and the OTLP
// span receiver.
const (
	ComponentVLLMMetrics = "vllm.metrics"
	ComponentVLLMSpans   = "vllm.spans"
)

// Capabilities is the infer.capabilities v2 record: what a telemetry
// component (vllm.metrics, vllm.spans, ...) exposed and what was collected
// (stormlog.md §2.5, inference_correlation_v2.schema.json "capabilities").
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
// valid_to_ns) (stormlog.md §2.5, inference_correlation_v2.schema.json
// "clock_alignment"). Semantic checks (uncertainty ≥ 0, run id) belong to the
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

// Raw is a record kept as its JSON text: every kind this package does not
// decode into a typed record (infer.request v2, infer.vllm_scrape,
// infer.vllm_span, infer.system_sample,
// infer.summary, unknown types and versions, and objects without an
// event_type). Writing a Raw writes JSON as it is (compacted); it must be an
// object carrying its own event_type and schema_version.
type Raw struct {
	Kind Kind
	JSON json.RawMessage
}

// RecordKind returns the kind the line carried.
func (r Raw) RecordKind() Kind { return r.Kind }

// MarshalJSON returns the kept JSON text.
func (r Raw) MarshalJSON() ([]byte, error) {
	if len(r.JSON) == 0 {
		return []byte("null"), nil
	}
	return r.JSON, nil
}

// Ptr returns a pointer to a copy of v, for the nullable fields of records.
func Ptr[T any](v T) *T { return &v }
