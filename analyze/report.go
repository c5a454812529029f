package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
)

// AnalysisVersion is the report's analysis_version; a consumer must check it first. Version 2
// divides every rate by the case's rate interval (throughput.interval_seconds, interval_kind,
// numerator_cohort; the version-1 key throughput.duration_seconds is gone). Version 3 renames
// cases.*.request_count (which counted successes) to successful_requests and
// arrivals.offered_rate_per_second to intended_arrival_rate_per_second, and adds case_order,
// summary.failure_reasons_omitted, summary.failed_requests_omitted and summary.session_closed.
// Version 4 adds each case's client block (the self-audit: ClientAudit) and gpu block (GPU),
// and the report's client_limited and client_limited_cases. Version 5 adds each case's energy
// block (GPU energy from the server telemetry's energy counter, joules per output token and
// per request) and cost block (null without a cost rate).
const AnalysisVersion = 5

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
	VLLMSpans []artifact.Span
	// ServerTelemetry, when set with samples, is joined to the case windows
	// (telemetry.server_join, server_targets, memory.server_*, energy; see ServerTelemetry).
	ServerTelemetry *ServerTelemetry
	// Cost, when set, prices each case's tokens (the cost block; see Cost).
	Cost *CostRate
	// Inspect, when set, is called once with the analysed input and its report, after every
	// case was computed and the server evidence joined to the requests (Request.Span), before
	// AnalyzeInput returns: a caller that needs per-request values (compare, pareto) reads
	// them here instead of keeping the Input, whose memory is the analysis's largest part.
	// It must not keep in or modify it.
	Inspect func(in *Input, rep *Report)
}

// SLOInfo names the policy the report judged by: its name, digest (64 hex), source (flags,
// file or artifact) and the policy document.
type SLOInfo struct {
	Name   string         `json:"name"`
	Digest string         `json:"digest"`
	Source string         `json:"source"`
	Policy map[string]any `json:"policy"`
}

// Report is the analysis report (AnalysisVersion). Workload is the subset of the infer.workload
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
	// CaseOrder lists the cases in the order the workload gave them (infer.workload), then
	// any case the workload does not name, by id; the text report follows it.
	CaseOrder []string `json:"case_order"`
	// IgnoredRecords are the records the analysis left out, by session id (Input.Ignored);
	// [] when none.
	IgnoredRecords []IgnoredRecords `json:"ignored_records"`
	// ClientLimited is true when any case's self-audit found the load generator, not the
	// server, shaped its numbers (CaseReport.Client); ClientLimitedCases names them in
	// case order ([] when none).
	ClientLimited      bool     `json:"client_limited"`
	ClientLimitedCases []string `json:"client_limited_cases"`
	// Shards is the shards block of a merged sharded run (MergeShards); omitted otherwise.
	Shards   *ShardsReport `json:"shards,omitempty"`
	Warnings []string      `json:"-"`
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

// Analyze computes the report of an artifact; see AnalyzeContext.
func Analyze(a *artifact.Artifact, opts Options) (*Report, error) {
	return AnalyzeContext(context.Background(), a, opts)
}

// AnalyzeContext computes the report over the artifact's measured requests
// (phase "measured"), case by case in the report's case order, checking ctx between cases; it is
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

// AnalyzeInput computes the report of a prepared artifact (NewInput, or ReadInput
// for a file streamed without keeping its decoded requests), case by case in the report's case order,
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
	rep := &Report{AnalysisVersion: AnalysisVersion, Cases: map[string]*CaseReport{}, ScheduleKept: scheduleKept(in),
		IgnoredRecords: nonNilIgnored(in.Ignored)}
	policy, source, err := choosePolicy(a, opts, rep)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		rep.SLO = &SLOInfo{Name: policy.Name, Digest: policy.Digest(), Source: source, Policy: policy.Document()}
	}
	rep.Workload = workloadSummary(a.Workload)
	rep.Shards = shardsReport(in)
	if rep.Shards != nil {
		rep.Warnings = append(rep.Warnings, rep.Shards.Problems...)
	} else if ids := sessionIDs(a.Sessions); len(ids) > 1 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the artifact holds %d sessions (%s): their cases are analysed together, and the workload and status shown are the first and last session's", len(ids), strings.Join(ids, ", ")))
	}
	rep.Warnings = append(rep.Warnings, unreadRequests(a.Stats.Kinds)...)
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

	var ids []string
	rep.Summary, ids = summarize(in, opts.Server)
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
	withSpans := opts.Server != nil && len(opts.Server.Spans) > 0
	rep.CaseOrder = caseOrder(a.Workload, ids)
	gpu := gpuInputOf(a, rule)
	reports, err := caseReports(ctx, rep.CaseOrder, func(id string) *CaseReport {
		c := caseReport(caseInput(in, id, windows[id], opts), rule, policy, source, caches[id], samples, withSpans)
		c.GPU = caseGPU(gpu, c)
		return c
	})
	if err != nil {
		return nil, err
	}
	for i, id := range rep.CaseOrder {
		rep.Cases[id] = reports[i]
		if reports[i].Client.ClientLimited {
			rep.ClientLimitedCases = append(rep.ClientLimitedCases, id)
		}
	}
	rep.ClientLimited = len(rep.ClientLimitedCases) > 0
	if rep.ClientLimitedCases == nil {
		rep.ClientLimitedCases = []string{}
	}
	if err := applyServerTelemetry(rep, in, opts.ServerTelemetry); err != nil {
		return nil, err
	}
	applyCost(rep, opts.Cost)
	if opts.Inspect != nil {
		opts.Inspect(in, rep)
	}
	return rep, nil
}

// caseReports computes report(id) for each of ids, up to GOMAXPROCS cases at a time (each
// case's blocks read its requests only), and returns them in the order of ids. ctx is checked
// before each case starts; its error is returned once the cases already started are done.
func caseReports(ctx context.Context, ids []string, report func(id string) *CaseReport) ([]*CaseReport, error) {
	out := make([]*CaseReport, len(ids))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			out[i] = report(id)
		}()
	}
	wg.Wait()
	return out, nil
}

// caseOrder orders ids (sorted) as the workload lists its cases, then the others by id.
func caseOrder(w *artifact.Workload, ids []string) []string {
	has := make(map[string]bool, len(ids))
	for _, id := range ids {
		has[id] = true
	}
	out := make([]string, 0, len(ids))
	if w != nil {
		for i := range w.Cases {
			if id := w.Cases[i].CaseID; has[id] {
				out = append(out, id)
				delete(has, id)
			}
		}
	}
	for _, id := range ids {
		if has[id] {
			out = append(out, id)
		}
	}
	return out
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
		case artifact.EventMetricsScrape, artifact.EventSpan:
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

// unreadRequests warns of infer.request records of a schema_version the analysis does not
// read (it reads v1 and keeps the correlation model's v2 aside; 0 is a missing version): the
// report is built from requests, so none may go uncounted silently. Sorted by version.
func unreadRequests(kinds map[artifact.Kind]int) []string {
	var out []string
	var versions []int64
	for k := range kinds {
		if k.EventType == artifact.EventRequest && k != artifact.KindRequest && k != artifact.KindRequestV2 {
			versions = append(versions, k.SchemaVersion)
		}
	}
	slices.Sort(versions)
	for _, v := range versions {
		n := kinds[artifact.Kind{EventType: artifact.EventRequest, SchemaVersion: v}]
		what := fmt.Sprintf("schema_version %d", v)
		if v == 0 {
			what = "no (or a zero) schema_version"
		}
		out = append(out, fmt.Sprintf("%d %s record(s) with %s not read: this analysis reads schema_version %d", n, artifact.EventRequest, what, artifact.RequestSchemaVersion))
	}
	return out
}
