package artifact

// TraceWindowSchemaVersion is the version of the infer.trace_window record
// (EventTraceWindow).
const TraceWindowSchemaVersion = 1

// KindTraceWindow is the kind of the infer.trace_window v1 record.
var KindTraceWindow = Kind{EventTraceWindow, TraceWindowSchemaVersion}

// Start outcomes (TraceWindow.StartOutcome): what the reply to POST /start_profile
// established.
const (
	// StartAcknowledged: a 2xx reply; the window ran and was stopped at its end.
	StartAcknowledged = "acknowledged"
	// StartRejected: 404 or 405 (no profiler routes), or 401, 403 or 407 (a proxy); the start
	// never reached the engine and no stop was sent.
	StartRejected = "rejected"
	// StartUnknown: any other status (5xx, other 4xx), a timeout, a dropped connection, a
	// malformed reply or a redirect (never followed); a stop was sent at once.
	StartUnknown = "unknown"
	// StartNotTriggered: the window waited for its trigger (Trigger num_requests_running)
	// and the phase ended first; nothing was sent.
	StartNotTriggered = "not_triggered"
)

// Window triggers (TraceWindow.Trigger): what opened the window.
const (
	// TriggerPhaseStart: the window opened before the phase's first send.
	TriggerPhaseStart = "phase_start"
	// TriggerRequestsRunning: the window opened once the server's scraped
	// vllm:num_requests_running (summed over engines) reached TriggerThreshold.
	TriggerRequestsRunning = "num_requests_running"
)

// Stop reasons (TraceWindow.StopReason).
const (
	StopPhaseEnd        = "phase_end"         // the profiled phase ended
	StopMaxSeconds      = "max_seconds"       // --trace-max-seconds elapsed; the phase went on unprofiled
	StopCancelled       = "cancelled"         // the run was cancelled or stopped
	StopStartUnknown    = "start_unknown"     // the start's outcome was unknown
	StopStartRejected   = "start_rejected"    // no stop was sent: the start was rejected
	StopStoppedByServer = "stopped_by_server" // a worker trace appeared before our stop
	StopNotTriggered    = "not_triggered"     // no stop was sent: the trigger never fired
)

// TraceWindow is the infer.trace_window v1 record: one profiler window around one phase of
// one case, written when the window has ended (also when the run was cancelled).
//
// Profiler names the kind of profile ("vllm-torch"). ControlURL is the /start_profile URL
// without credentials, query or fragment. Times are Unix nanoseconds on the client's wall
// clock: RequestedAtNS when the phase asked for the window, StartRequestedAtNS when the
// start call was sent, StartReturnedAtNS when it returned (answered or failed),
// StartConfirmedAtNS the same instant when the start was acknowledged (null otherwise).
// StartStatus is the start's HTTP status (null without a reply), StartError why it failed
// (null when a 2xx came back). The Stop* fields describe the single /stop_profile call
// (all null when none was sent). StopReason is one of the Stop* reasons above.
// ProfilerMayBeRunning is true when a stop was needed and did not get a 2xx reply.
// TraceFiles are the worker trace files that appeared in the trace directory during the
// window, sorted by path ([] when none, or without a trace directory).
type TraceWindow struct {
	SessionID            string      `json:"session_id"`
	RunID                string      `json:"run_id"`
	CaseID               string      `json:"case_id"`
	Phase                string      `json:"phase"`
	Profiler             string      `json:"profiler"`
	ControlURL           string      `json:"control_url"`
	RequestedAtNS        int64       `json:"requested_at_ns"`
	StartRequestedAtNS   int64       `json:"start_requested_at_ns"`
	StartReturnedAtNS    int64       `json:"start_returned_at_ns"`
	StartOutcome         string      `json:"start_outcome"`
	StartConfirmedAtNS   *int64      `json:"start_confirmed_at_ns"`
	StartStatus          *int        `json:"start_status"`
	StartError           *string     `json:"start_error"`
	StopRequestedAtNS    *int64      `json:"stop_requested_at_ns"`
	StopReturnedAtNS     *int64      `json:"stop_returned_at_ns"`
	StopStatus           *int        `json:"stop_status"`
	StopError            *string     `json:"stop_error"`
	StopReason           string      `json:"stop_reason"`
	ProfilerMayBeRunning bool        `json:"profiler_may_be_running"`
	TraceFiles           []TraceFile `json:"trace_files"`
	// Trigger is what opened the window (Trigger*; absent in records written before
	// triggers existed: phase_start). TriggerThreshold is the num_requests_running it
	// waited for, TriggerValue the value that fired it and TriggeredAtNS when (null when
	// the trigger is phase_start or never fired).
	Trigger          string   `json:"trigger,omitempty"`
	TriggerThreshold *float64 `json:"trigger_threshold,omitempty"`
	TriggerValue     *float64 `json:"trigger_value,omitempty"`
	TriggeredAtNS    *int64   `json:"triggered_at_ns,omitempty"`
}

// TraceFile is one worker trace file a window found: Path in the trace directory, its size
// in bytes, and the worker's global rank parsed from the name.
type TraceFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Rank  int    `json:"rank"`
}

func (TraceWindow) selfEncoding() {}

// RecordKind returns KindTraceWindow.
func (TraceWindow) RecordKind() Kind { return KindTraceWindow }

// MarshalJSON writes the record header, then the fields.
func (w TraceWindow) MarshalJSON() ([]byte, error) {
	type plain TraceWindow
	if w.TraceFiles == nil {
		w.TraceFiles = []TraceFile{}
	}
	return withKind(KindTraceWindow, plain(w))
}
