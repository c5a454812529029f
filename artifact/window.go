package artifact

import (
	"encoding/json"
)

// Phases of a case: the warmup requests, then the measured ones.
const (
	PhaseWarmup   = "warmup"
	PhaseMeasured = "measured"
)

// SLORecord is the infer.slo v1 record: the SLO policy a profile run
// declared. At most one per artifact.
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
// runs: the cache state asked for and what the reset endpoint answered.
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
// measured) of each case: when the phase started, when its window ended and
// when its requests drained. Times are wall-clock Unix epoch ns; a missing time is null, never
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
	// ClientHealth is the load generator's own health over the phase (start to drained);
	// absent in artifacts written before it existed.
	ClientHealth *ClientHealth `json:"client_health,omitempty"`
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
