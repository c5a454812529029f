package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// AnalysisVersion is the report's analysis_version. Version 2 divides every rate by the
// case's rate interval (throughput.interval_seconds, interval_kind, numerator_cohort); the
// version-1 key throughput.duration_seconds is gone, so a consumer must check this first.
const AnalysisVersion = 2

// Policy sources recorded in the report's slo block and each evaluation.
const (
	SourceFlags    = "flags"
	SourceFile     = "file"
	SourceArtifact = "artifact"
)

// ServerEvidence is what a server-side source (a vLLM span join, execution records)
// contributes per request, keyed by the request's recorded x_request_id. A nil
// *ServerEvidence means the run had no server source (population.server_admitted null).
// Spans holds each joined request's span attributes (gen_ai.latency.* seconds); Quarantined
// the requests whose spans were refused, with the reason (conflicting_spans, multiple_spans)
// — they count as admitted; Admitted any further request a source confirmed it saw.
type ServerEvidence struct {
	Spans       map[string]map[string]any
	Quarantined map[string]string
	Admitted    map[string]bool
}

// Options configures Analyze. A zero Options analyses with the artifact's own policy (if it
// recorded one) and DefaultRule.
type Options struct {
	// Policy, when set, replaces the artifact's infer.slo policy (precedence: flags/file >
	// artifact > none); PolicySource is then "flags" or "file".
	Policy       *Policy
	PolicySource string
	// Rule is the sufficiency rule of the latency block; zero means DefaultRule.
	Rule Rule
	// Scheduler recomputes open-loop schedules that need the generator (see ScheduleFunc).
	Scheduler ScheduleFunc
	// Server is the server evidence, nil without a server source. When nil and the artifact
	// (or VLLMSpans) holds vLLM spans, the span join supplies it.
	Server *ServerEvidence
	// VLLMSpans are spans from outside the artifact (analyze --vllm-spans FILE), joined with
	// the artifact's own infer.vllm_span records.
	VLLMSpans []artifact.VLLMSpan
	// ServerTelemetry, when set with samples, is joined to the case windows
	// (telemetry.server_join, server_targets, memory.server_*; see ServerTelemetry).
	ServerTelemetry *ServerTelemetry
}

// Summary is the report's summary over measured requests: totals, failures by status,
// failure rate (nil without requests), the number of cases, and how the session ended (the
// last infer.session record's status: completed, interrupted, incomplete, or running when
// the producer never wrote its final line).
type Summary struct {
	TotalRequests      int            `json:"total_requests"`
	SuccessfulRequests int            `json:"successful_requests"`
	FailedRequests     int            `json:"failed_requests"`
	FailureRate        *float64       `json:"failure_rate"`
	FailuresByStatus   map[string]int `json:"failures_by_status"`
	// FailureReasons are the most common reasons of the failed requests (at most
	// MaxFailureReasons, most frequent first): what to fix first when a run fails.
	FailureReasons []FailureReason `json:"failure_reasons"`
	CaseCount      int             `json:"case_count"`
	SessionStatus  *string         `json:"session_status"`
}

// MaxFailureReasons bounds Summary.FailureReasons.
const MaxFailureReasons = 5

// FailureReason is one distinct (status, http_status, error_type, error_message) among the
// failed measured requests, with how many had it; fields the records leave null are null.
type FailureReason struct {
	Status       string  `json:"status"`
	HTTPStatus   *int64  `json:"http_status"`
	ErrorType    *string `json:"error_type"`
	ErrorMessage *string `json:"error_message"`
	Count        int     `json:"count"`
}

// failureReasons tallies the reasons of failed requests.
type failureReasons map[failureKey]int

type failureKey struct {
	status, errType, msg string
	http                 int64
	hasHTTP, hasType     bool
	hasMsg               bool
}

func (f failureReasons) add(r *Request) {
	k := failureKey{status: r.Status}
	if r.HTTPStatus != nil {
		k.http, k.hasHTTP = *r.HTTPStatus, true
	}
	if r.ErrorType != nil {
		k.errType, k.hasType = *r.ErrorType, true
	}
	if r.ErrorMessage != nil {
		k.msg, k.hasMsg = *r.ErrorMessage, true
		if strings.Contains(k.msg, "->") {
			// "read tcp 127.0.0.1:49388->127.0.0.1:8000: …": the local port differs per
			// connection; without it, the same failure is one reason.
			k.msg = localPortRe.ReplaceAllString(k.msg, "$1:*->")
		}
	}
	f[k]++
}

var localPortRe = regexp.MustCompile(`(\S+?):\d+->`)

// top returns the MaxFailureReasons most frequent reasons, ties in key order.
func (f failureReasons) top() []FailureReason {
	keys := make([]failureKey, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case f[a] != f[b]:
			return f[a] > f[b]
		case a.status != b.status:
			return a.status < b.status
		case a.http != b.http:
			return a.http < b.http
		case a.errType != b.errType:
			return a.errType < b.errType
		}
		return a.msg < b.msg
	})
	out := make([]FailureReason, 0, min(len(keys), MaxFailureReasons))
	for _, k := range keys[:min(len(keys), MaxFailureReasons)] {
		fr := FailureReason{Status: k.status, Count: f[k]}
		if k.hasHTTP {
			fr.HTTPStatus = i64Ptr(k.http)
		}
		if k.hasType {
			fr.ErrorType = strPtr(k.errType)
		}
		if k.hasMsg {
			fr.ErrorMessage = strPtr(k.msg)
		}
		out = append(out, fr)
	}
	return out
}

// SLOInfo names the policy the report judged by: its name, digest (64 hex), source (flags,
// file or artifact) and the policy document.
type SLOInfo struct {
	Name   string         `json:"name"`
	Digest string         `json:"digest"`
	Source string         `json:"source"`
	Policy map[string]any `json:"policy"`
}

// Cache is a case's cache block, from its infer.cache_state record; an artifact without one
// reads as requested "unspecified", verified "unverified", run_kind null.
type Cache struct {
	Requested string               `json:"requested"`
	Reset     *artifact.CacheReset `json:"reset"`
	Verified  string               `json:"verified"`
	Reason    string               `json:"reason"`
	RunKind   *string              `json:"run_kind"`
}

// ServerCoverage says whether server telemetry observed a case's window.
type ServerCoverage struct {
	Status          string    `json:"status"`
	Reason          *string   `json:"reason"`
	CountedWindowNs *[2]int64 `json:"counted_window_ns"`
}

// Memory is a case's memory block: the highest client-local device memory and process RSS
// (bytes) sampled during the case (infer.system_sample records, observation_scope
// client_local — never a server claim), and server observations (empty until server
// telemetry is joined; coverage not_joined).
type Memory struct {
	ObservationScope    string         `json:"observation_scope"`
	PeakDeviceUsedBytes *int64         `json:"peak_device_used_bytes"`
	PeakProcessRSSBytes *int64         `json:"peak_process_rss_bytes"`
	ServerObservations  map[string]any `json:"server_observations"`
	ServerCoverage      ServerCoverage `json:"server_coverage"`
	// ServerMembers lists a server group's ranks (groups only; server_observations then
	// stays empty and values of different members are never added).
	ServerMembers []ServerMember `json:"server_members,omitempty"`
}

// CaseReport is one case of the version-2 report (stormlog.md §2.6). RequestCount counts its
// successful requests. SLO is present only when a policy was given.
type CaseReport struct {
	RequestCount int                 `json:"request_count"`
	Population   Population          `json:"population"`
	Intervals    Intervals           `json:"intervals"`
	Throughput   Throughput          `json:"throughput"`
	LatencyMs    map[string]*float64 `json:"latency_ms"`
	Latency      LatencyBlock        `json:"latency"`
	Streaming    Streaming           `json:"streaming"`
	Tokens       Tokens              `json:"tokens"`
	Lengths      Lengths             `json:"lengths"`
	Arrivals     Arrivals            `json:"arrivals"`
	Prompts      Prompts             `json:"prompts"`
	Cache        Cache               `json:"cache"`
	Memory       Memory              `json:"memory"`
	SLO          *Evaluation         `json:"slo,omitempty"`
}

// Report is the version-2 analysis report. Workload is the subset of the infer.workload
// record that identifies the traffic (nil without one); SLO is nil without a policy;
// Telemetry holds client_observation_scope, server_join, server_targets and vllm. Warnings
// are for stderr ("Warning: …"), not part of the JSON.
type Report struct {
	AnalysisVersion int                    `json:"analysis_version"`
	Summary         Summary                `json:"summary"`
	Workload        map[string]any         `json:"workload"`
	SLO             *SLOInfo               `json:"slo"`
	Telemetry       map[string]any         `json:"telemetry"`
	Cases           map[string]*CaseReport `json:"cases"`
	Warnings        []string               `json:"-"`
	// ScheduleKept says whether the load generator kept its schedule (scheduleKept); it is
	// for the live exporter, not part of the JSON.
	ScheduleKept bool        `json:"-"`
	vllm         *vllmResult // for the text renderer
}

// WriteJSON writes the report as pretty-printed JSON (two-space indent) with every object's
// keys sorted, and a trailing newline.
func WriteJSON(w io.Writer, r *Report) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("analyze: report: %w", err)
	}
	// Re-decode into maps: encoding/json writes map keys sorted, at every depth.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return fmt.Errorf("analyze: report: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return fmt.Errorf("analyze: report: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// ErrSLORecord marks an artifact whose infer.slo records cannot be used (more than one, or
// an invalid policy); it also matches artifact.ErrInvalidArtifact (exit 5) unless a policy
// from flags or a file overrides it.
var ErrSLORecord = fmt.Errorf("%w: unusable infer.slo record", artifact.ErrInvalidArtifact)

// Analyze computes the version-2 report of an artifact; see AnalyzeContext.
func Analyze(a *artifact.Artifact, opts Options) (*Report, error) {
	return AnalyzeContext(context.Background(), a, opts)
}

// AnalyzeContext computes the version-2 report over the artifact's measured requests
// (phase "measured"), case by case in case_id order, checking ctx between cases; it is
// AnalyzeInput(ctx, NewInput(a), opts). Errors: an artifact without an infer.session or
// infer.request v1 record (artifact.Validate), or with an unusable infer.slo record that no
// opts.Policy overrides (ErrSLORecord) — both match artifact.ErrInvalidArtifact — and ctx's
// error.
func AnalyzeContext(ctx context.Context, a *artifact.Artifact, opts Options) (*Report, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: no artifact", artifact.ErrInvalidArtifact)
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return AnalyzeInput(ctx, NewInput(a), opts)
}

// AnalyzeInput computes the version-2 report of a prepared artifact (NewInput, or ReadInput
// for a file streamed without keeping its decoded requests), case by case in case_id order,
// checking ctx between cases. It first sets the server-evidence fields of every request from
// opts.Server (joined by x_request_id; cleared without one). Errors: an input without an
// infer.session or infer.request v1 record (Input.Validate), or with an unusable infer.slo
// record that no opts.Policy overrides (ErrSLORecord) — both match
// artifact.ErrInvalidArtifact — and ctx's error.
func AnalyzeInput(ctx context.Context, in *Input, opts Options) (*Report, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	a := in.Artifact
	rule := opts.Rule
	if rule == (Rule{}) {
		rule = DefaultRule
	}
	if err := rule.Validate(); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	rep := &Report{AnalysisVersion: AnalysisVersion, Cases: map[string]*CaseReport{}, ScheduleKept: scheduleKept(in)}
	policy, source, err := choosePolicy(a, opts, rep)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		rep.SLO = &SLOInfo{Name: policy.Name, Digest: policy.Digest(), Source: source, Policy: policy.Document()}
	}
	rep.Workload = workloadSummary(a.Workload)
	if ids := sessionIDs(a.Sessions); len(ids) > 1 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the artifact holds %d sessions (%s): their cases are analysed together, and the workload and status shown are the first and last session's", len(ids), strings.Join(ids, ", ")))
	}
	rep.Telemetry = telemetry(a)
	vr, err := analyzeVLLM(in, opts.VLLMSpans)
	if err != nil {
		return nil, err
	}
	rep.vllm = vr
	rep.Telemetry["vllm"] = vr.block
	if opts.Server == nil && vr.server != nil {
		opts.Server = vr.server
	}

	sum := Summary{FailuresByStatus: map[string]int{}}
	reasons := failureReasons{}
	ids := make([]string, 0, len(in.Cases))
	for id, requests := range in.Cases {
		if len(requests) == 0 {
			continue
		}
		ids = append(ids, id)
		for i := range requests {
			r := &requests[i]
			joinServer(r, opts.Server)
			sum.TotalRequests++
			if r.Status == StatusOK {
				sum.SuccessfulRequests++
			} else {
				sum.FailedRequests++
				sum.FailuresByStatus[r.Status]++
				reasons.add(r)
			}
		}
	}
	sort.Strings(ids)
	sum.FailureReasons = reasons.top()
	sum.FailureRate = share(sum.FailedRequests, sum.TotalRequests)
	sum.CaseCount = len(ids)
	if n := len(a.Sessions); n > 0 {
		sum.SessionStatus = strPtr(a.Sessions[n-1].Status)
	}
	if final := a.FinalSession(); final != nil {
		sum.SessionStatus = strPtr(final.Status)
	}
	rep.Summary = sum

	windows := map[string]*artifact.PhaseWindow{}
	for i := range a.PhaseWindows {
		if w := &a.PhaseWindows[i]; w.Phase == artifact.PhaseMeasured {
			windows[w.CaseID] = w
		}
	}
	caches := map[string]*artifact.CacheState{}
	for i := range a.CacheStates {
		caches[a.CacheStates[i].CaseID] = &a.CacheStates[i]
	}
	samples := systemSamples(a.Others)
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := CaseInput{
			CaseID:           id,
			Requests:         in.Cases[id],
			Window:           windows[id],
			WorkloadRecorded: a.Workload != nil,
			Scheduler:        opts.Scheduler,
			ServerSource:     opts.Server != nil,
		}
		if a.Workload != nil {
			c.Seed = a.Workload.Seed
			c.Measurement = &Measurement{RequestCount: a.Workload.Measurement.RequestCount, DurationSeconds: a.Workload.Measurement.DurationSeconds}
			for k := range a.Workload.Cases {
				if wc := &a.Workload.Cases[k]; wc.CaseID == id {
					c.Arrival = fromArrival(wc.Arrival)
				}
			}
		}
		rep.Cases[id] = caseReport(c, rule, policy, source, caches[id], samples, opts.Server != nil && len(opts.Server.Spans) > 0)
	}
	if err := applyServerTelemetry(rep, in, opts.ServerTelemetry); err != nil {
		return nil, err
	}
	return rep, nil
}

func caseReport(in CaseInput, rule Rule, policy *Policy, source string, cache *artifact.CacheState, samples []sample, withServer bool) *CaseReport {
	pop, iv := Populate(in)
	c := &CaseReport{
		RequestCount: pop.Successful,
		Population:   pop,
		Intervals:    iv,
		Throughput:   ThroughputOf(in.Requests, iv.Rate),
		LatencyMs:    LegacyLatency(in.Requests),
		Latency:      LatencyOf(in.Requests, rule, withServer),
		Streaming:    StreamingOf(in.Requests),
		Arrivals:     ArrivalsOf(in.Requests, in.Window),
		Prompts:      PromptsOf(in.Requests, in.Window),
		Cache:        cacheBlock(cache),
		Memory:       memoryBlock(in.Requests, iv, samples),
	}
	c.Tokens, c.Lengths = TokensOf(in.Requests)
	if policy != nil {
		c.SLO = Evaluate(policy, source, in.Requests, iv.Rate, &pop)
		c.SLO.RealizedOfferedRatePerSecond = iv.RealizedOfferedRatePerSecond
	}
	return c
}

// choosePolicy applies the precedence flags/file > artifact > none, adding a warning when a
// given policy replaces (or sets aside) the artifact's.
func choosePolicy(a *artifact.Artifact, opts Options, rep *Report) (*Policy, string, error) {
	recorded, recErr := artifactPolicy(a.SLOs)
	if opts.Policy != nil {
		source := opts.PolicySource
		if source == "" {
			source = SourceFlags
		}
		switch {
		case recErr != nil:
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the %s policy %s replaces the artifact's infer.slo record, which could not be used (%v)", source, opts.Policy.Name, recErr))
		case recorded != nil:
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the %s policy %s replaces the artifact's recorded policy %s (digest %s)", source, opts.Policy.Name, recorded.Name, recorded.Digest()[:12]))
		}
		return opts.Policy, source, nil
	}
	if recErr != nil {
		return nil, "", recErr
	}
	if recorded != nil {
		if d := a.SLOs[0].Digest; d != "" && d != recorded.Digest() {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the artifact's infer.slo digest %s does not match its policy (%s)", d, recorded.Digest()))
		}
		return recorded, SourceArtifact, nil
	}
	return nil, "", nil
}

func artifactPolicy(records []artifact.SLORecord) (*Policy, error) {
	switch len(records) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%w: the artifact holds %d infer.slo records; expected one", ErrSLORecord, len(records))
	}
	if len(records[0].SLO) == 0 {
		return nil, fmt.Errorf("%w: the artifact's infer.slo record has no policy", ErrSLORecord)
	}
	p, err := ParsePolicy(records[0].SLO)
	if err != nil {
		return nil, fmt.Errorf("%w: the artifact's infer.slo record: %v", ErrSLORecord, err)
	}
	return p, nil
}

// joinServer sets the request's server-evidence fields from server by x_request_id (a
// dropped request was never sent, so it joins nothing); without evidence they are cleared.
func joinServer(r *Request, server *ServerEvidence) {
	r.Span, r.SpanMissingReason, r.ServerAdmitted = nil, "", false
	if server == nil || r.XRequestID == nil || r.Status == StatusDropped {
		return
	}
	id := *r.XRequestID
	if attrs, ok := server.Spans[id]; ok {
		r.Span = attrs
		r.ServerAdmitted = true
	}
	if reason, ok := server.Quarantined[id]; ok {
		r.Span = nil
		r.SpanMissingReason = reason
		r.ServerAdmitted = true
	}
	if server.Admitted[id] {
		r.ServerAdmitted = true
	}
}

func fromArrival(a artifact.ArrivalSpec) *ArrivalSpec {
	out := &ArrivalSpec{Mode: a.Mode, RatePerSecond: a.RatePerSecond, BurstSize: a.BurstSize, BurstIntervalSeconds: a.BurstIntervalSeconds}
	if a.Trace != nil {
		out.TraceArrivals = i64Ptr(a.Trace.Arrivals)
	}
	return out
}

// workloadSummary is the report's workload block: the record's fields that identify the
// traffic (workload_digest, seed, generator, prompts, warmup, decoding, tokenizer,
// chat_template), or nil without a workload record.
func workloadSummary(w *artifact.Workload) map[string]any {
	if w == nil {
		return nil
	}
	data, err := json.Marshal(w)
	if err != nil {
		return nil
	}
	var all map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&all) != nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range []string{"workload_digest", "seed", "generator", "prompts", "warmup", "decoding", "tokenizer", "chat_template"} {
		out[k] = all[k]
	}
	return out
}

// telemetry is the report's telemetry block. Server telemetry and vLLM telemetry are joined
// by their own analyses; without them the block says so.
func telemetry(a *artifact.Artifact) map[string]any {
	vllm := map[string]any{"status": "absent"}
	n := 0
	for i := range a.Others {
		switch a.Others[i].Kind.EventType {
		case artifact.EventVLLMScrape, artifact.EventVLLMSpan:
			n++
		}
	}
	if n > 0 {
		vllm = map[string]any{"status": "not_analyzed", "records": n}
	}
	return map[string]any{
		"client_observation_scope": "client_local",
		"server_join":              map[string]any{"status": "not_configured", "reason": nil},
		"server_targets":           []any{},
		"vllm":                     vllm,
	}
}

func cacheBlock(c *artifact.CacheState) Cache {
	if c == nil {
		return Cache{Requested: "unspecified", Verified: "unverified", Reason: "the artifact does not record a cache state"}
	}
	out := Cache{Requested: c.Requested, Reset: c.Reset, Verified: c.Verified, Reason: c.Reason}
	if c.RunKind != "" {
		out.RunKind = strPtr(c.RunKind)
	}
	return out
}

// sample is one client-local infer.system_sample reading.
type sample struct {
	at              int64
	deviceUsed, rss *int64
}

// systemSamples decodes the artifact's infer.system_sample records; a malformed one is
// skipped (client-local telemetry is best effort).
func systemSamples(others []artifact.Raw) []sample {
	var out []sample
	for i := range others {
		if others[i].Kind.EventType != artifact.EventSystemSample {
			continue
		}
		var s struct {
			TimestampNs     *int64 `json:"timestamp_ns"`
			DeviceUsedBytes *int64 `json:"device_used_bytes"`
			ProcessRSSBytes *int64 `json:"process_rss_bytes"`
		}
		if json.Unmarshal(others[i].JSON, &s) != nil || s.TimestampNs == nil {
			continue
		}
		out = append(out, sample{at: *s.TimestampNs, deviceUsed: s.DeviceUsedBytes, rss: s.ProcessRSSBytes})
	}
	return out
}

// memoryBlock takes the peaks of the samples inside the case: its measured span, or without
// one the span of its successful requests.
func memoryBlock(requests []Request, iv Intervals, samples []sample) Memory {
	m := Memory{
		ObservationScope:   "client_local",
		ServerObservations: map[string]any{},
		ServerCoverage:     ServerCoverage{Status: "not_joined", Reason: strPtr("no server telemetry was supplied")},
	}
	var lo, hi int64
	found := false
	if iv.MeasuredSpan != nil {
		lo, hi, found = iv.MeasuredSpan.StartedAtNs, iv.MeasuredSpan.EndedAtNs, true
	} else {
		lo, hi, found = startEndSpan(requests, true)
	}
	if !found {
		return m
	}
	for _, s := range samples {
		if s.at < lo || s.at > hi {
			continue
		}
		if s.deviceUsed != nil && (m.PeakDeviceUsedBytes == nil || *s.deviceUsed > *m.PeakDeviceUsedBytes) {
			m.PeakDeviceUsedBytes = i64Ptr(*s.deviceUsed)
		}
		if s.rss != nil && (m.PeakProcessRSSBytes == nil || *s.rss > *m.PeakProcessRSSBytes) {
			m.PeakProcessRSSBytes = i64Ptr(*s.rss)
		}
	}
	return m
}

// errNoReport guards RenderText against a nil report.
var errNoReport = errors.New("analyze: no report")

// sessionIDs lists the distinct session ids of the infer.session records, in file order.
func sessionIDs(sessions []artifact.Session) []string {
	var ids []string
	seen := map[string]bool{}
	for _, s := range sessions {
		if !seen[s.SessionID] {
			seen[s.SessionID] = true
			ids = append(ids, s.SessionID)
		}
	}
	return ids
}
