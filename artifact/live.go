package artifact

// Live records: transient records that exist only on their way to live sinks (the exporter,
// a capacity search) and are never written to the artifact (Writer skips them). Their kinds
// use the "inferprobe.live." prefix, which no artifact line carries.
const (
	EventRequestSent  = "inferprobe.live.request_sent"
	EventRunJudgement = "inferprobe.live.run_judgement"
)

// Kinds of the live records.
var (
	KindRequestSent  = Kind{EventRequestSent, 1}
	KindRunJudgement = Kind{EventRunJudgement, 1}
)

// RequestSent says a request was dispatched, just before its HTTP call. Every RequestSent is
// followed, later, by the request's infer.request record (status ok, a failure, or cancelled
// at the drain deadline); requests recorded dropped were never sent and have none. Live
// sinks count requests in flight as the difference.
type RequestSent struct {
	SessionID  string
	CaseID     string
	Phase      string
	XRequestID string
	// TraceID is the trace id of the traceparent sent (32 lowercase hex digits).
	TraceID string
	// SentAtNS is the dispatch time, wall-clock Unix ns.
	SentAtNS int64
}

// RecordKind returns KindRequestSent.
func (RequestSent) RecordKind() Kind { return KindRequestSent }
func (RequestSent) transient()       {}

// Run outcomes of a RunJudgement: the artifact's final session status, or RunFailed for a run
// that could not start (its artifact could not be opened).
const (
	RunCompleted   = StatusCompleted
	RunInterrupted = StatusInterrupted
	RunIncomplete  = StatusIncomplete
	RunFailed      = "failed"
)

// RunJudgement is the last record of a run that live sinks receive: how the run ended and,
// when its artifact could be read back, the judgement the analysis of that artifact made —
// the numbers `inferprobe analyze` reports, so that live series and reports agree by
// construction. It comes after the closing infer.session record, once the artifact is
// closed and analysed.
type RunJudgement struct {
	// Outcome is one of the Run* constants.
	Outcome string
	// EndedAtNS is when the run ended, wall-clock Unix ns.
	EndedAtNS int64
	// Analysed is false when the artifact could not be read back; Cases and ScheduleMet are
	// then empty.
	Analysed bool
	// ScheduleMet says whether the load generator kept its schedule: no arrival dropped or
	// held for a slot, and the p99 dispatch lag of the measured open-loop requests within
	// 1 ms. Nil when not analysed.
	ScheduleMet *bool
	// ClientLimited says whether any case's self-audit found that the load generator, not
	// the server, shaped the numbers (dispatch lag p99 over 1 ms, dispatch under 99.5% of
	// the schedule, arrivals held or dropped, client CPU saturated). Nil when not analysed.
	ClientLimited *bool
	// Cases are the run's cases in the report's order.
	Cases []CaseJudgement
}

// RecordKind returns KindRunJudgement.
func (RunJudgement) RecordKind() Kind { return KindRunJudgement }
func (RunJudgement) transient()       {}

// CaseJudgement is one case of a RunJudgement.
type CaseJudgement struct {
	CaseID string
	// SpanJoinCoverage is the share of the case's measured requests with a joined server
	// span (0..1); nil when spans were not collected.
	SpanJoinCoverage *float64
	// SLO is the case's SLO evaluation; nil without an SLO policy.
	SLO *SLOJudgement
}

// SLOJudgement is a case's SLO evaluation: requests met, missed and unknown (judged, the
// measured population), the attainment bounds (0..1) and the goodput bounds (requests per
// second); a bound is nil when the evaluation could not give it.
type SLOJudgement struct {
	Name                             string
	Met, Missed, Unknown             int
	AttainmentLower, AttainmentUpper *float64
	GoodputLowerRPS, GoodputUpperRPS *float64
}
