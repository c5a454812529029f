package analyze

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// ShardClockBoundNS is the clock uncertainty a merged report accepts without a warning: 1 ms
// (the order of the schedule-kept dispatch-lag bound). Beyond it, intended times of two shards
// cannot be compared to better than their uncertainties.
const ShardClockBoundNS = 1_000_000

// ShardAudit is one shard's self-audit in a merged report: who it was, whether it closed its
// session, what it recorded, its dispatch lag, and its clock offset to the coordinator.
type ShardAudit struct {
	Shard     int64  `json:"shard"`
	Path      string `json:"path"`
	SessionID string `json:"session_id"`
	// Status is the closing infer.session's status, or "not_closed" when the shard wrote none
	// (it stopped mid-run: killed, or its host lost).
	Status string `json:"status"`
	// RequestRecords counts its infer.request records (every phase); MeasuredRequests,
	// FailedRequests and DroppedRequests its measured ones (failed: any status but ok).
	RequestRecords   int `json:"request_records"`
	MeasuredRequests int `json:"measured_requests"`
	FailedRequests   int `json:"failed_requests"`
	DroppedRequests  int `json:"dropped_requests"`
	// DispatchLag* are the p50, p99 and maximum dispatch lag (sent − intended, ms) of its
	// measured open-loop requests that were sent; null without any.
	DispatchLagP50MS *float64 `json:"dispatch_lag_p50_ms"`
	DispatchLagP99MS *float64 `json:"dispatch_lag_p99_ms"`
	DispatchLagMaxMS *float64 `json:"dispatch_lag_max_ms"`
	// ClockOffsetNS and ClockUncertaintyNS are from its infer.clock_alignment record
	// (ShardClockMethod); null without one.
	ClockOffsetNS      *int64 `json:"clock_offset_ns"`
	ClockUncertaintyNS *int64 `json:"clock_uncertainty_ns"`
	// CPUUtilization is the highest client CPU utilisation of its measured phases (their
	// client_health: (user + system CPU) / (wall × CPUs)); null without client health.
	// ClientLimitedCases are the cases its own self-audit (ClientAuditOf over its requests
	// and window) finds client-limited on this shard, [] when none.
	CPUUtilization     *float64 `json:"cpu_utilization"`
	ClientLimitedCases []string `json:"client_limited_cases"`
	// HostContendedCases are those of them its self-audit finds host-contended (other
	// processes kept its host busy: ClientAudit.HostContended), [] when none.
	HostContendedCases []string `json:"host_contended_cases"`
	// MissingWindows are the "case/phase" windows another shard wrote and this one did not.
	MissingWindows []string `json:"missing_windows"`
	// Truncated says its last line was cut short (and ignored).
	Truncated bool `json:"truncated"`

	// measured holds its measured windows by case (for the start skew across shards).
	measured map[string]*artifact.PhaseWindow
}

// ShardsReport is a merged report's shards block: the run, the shard count, each shard's
// audit, the slowest shard (highest p99 dispatch lag; null without open-loop lags) and one
// line per problem (a shard that did not close, a missing window, a clock beyond
// ShardClockBoundNS), [] when none.
type ShardsReport struct {
	RunID          string       `json:"run_id"`
	WorkloadDigest string       `json:"workload_digest"`
	Shards         int          `json:"shards"`
	PerShard       []ShardAudit `json:"per_shard"`
	SlowestShard   *int64       `json:"slowest_shard"`
	Problems       []string     `json:"problems"`
}

// auditShards is each shard's self-audit, shards ordered by index.
func auditShards(shards []*Input) []ShardAudit {
	all := map[string]bool{}
	for _, s := range shards {
		for _, w := range s.Artifact.PhaseWindows {
			all[w.CaseID+"/"+w.Phase] = true
		}
	}
	out := make([]ShardAudit, len(shards))
	for k, s := range shards {
		a := s.Artifact
		au := ShardAudit{Shard: int64(k), Path: nameOf(s), Status: "not_closed", RequestRecords: s.RequestRecords,
			MissingWindows: []string{}, Truncated: a.Truncated != nil}
		if len(a.Sessions) > 0 {
			au.SessionID = a.Sessions[0].SessionID
		}
		if f := a.FinalSession(); f != nil {
			au.Status = f.Status
		}
		var lags []float64
		for _, list := range s.Cases {
			for i := range list {
				r := &list[i]
				au.MeasuredRequests++
				if r.Status != StatusOK {
					au.FailedRequests++
				}
				if r.Status == StatusDropped {
					au.DroppedRequests++
				} else if r.ArrivalMode != ModeClosed && r.DispatchLagMS != nil && !math.IsNaN(*r.DispatchLagMS) && !math.IsInf(*r.DispatchLagMS, 0) {
					lags = append(lags, *r.DispatchLagMS)
				}
			}
		}
		if len(lags) > 0 {
			sort.Float64s(lags)
			p50, _ := Quantile(lags, 0.5)
			p99, _ := Quantile(lags, 0.99)
			au.DispatchLagP50MS, au.DispatchLagP99MS, au.DispatchLagMaxMS = &p50, &p99, &lags[len(lags)-1]
		}
		for _, c := range a.ClockAlignments {
			if m, _ := c.Metadata["method"].(string); m == artifact.ClockMethodShardCoordinator {
				au.ClockOffsetNS, au.ClockUncertaintyNS = artifact.Ptr(c.OffsetNS), artifact.Ptr(c.UncertaintyNS)
			}
		}
		au.selfAudit(s)
		have := map[string]bool{}
		au.measured = map[string]*artifact.PhaseWindow{}
		for i, w := range a.PhaseWindows {
			have[w.CaseID+"/"+w.Phase] = true
			if _, dup := au.measured[w.CaseID]; w.Phase == artifact.PhaseMeasured && !dup {
				au.measured[w.CaseID] = &a.PhaseWindows[i]
			}
		}
		for key := range all {
			if !have[key] {
				au.MissingWindows = append(au.MissingWindows, key)
			}
		}
		sort.Strings(au.MissingWindows)
		out[k] = au
	}
	return out
}

// selfAudit sets the shard's CPU utilisation and client-limited cases from its measured
// windows and requests.
func (au *ShardAudit) selfAudit(s *Input) {
	au.ClientLimitedCases, au.HostContendedCases = []string{}, []string{}
	for i := range s.Artifact.PhaseWindows {
		w := &s.Artifact.PhaseWindows[i]
		if w.Phase != artifact.PhaseMeasured {
			continue
		}
		c := ClientAuditOf(s.Cases[w.CaseID], w)
		if u := c.CPUUtilization; u != nil && (au.CPUUtilization == nil || *u > *au.CPUUtilization) {
			au.CPUUtilization = u
		}
		if c.ClientLimited {
			au.ClientLimitedCases = append(au.ClientLimitedCases, w.CaseID)
		}
		if c.HostContended {
			au.HostContendedCases = append(au.HostContendedCases, w.CaseID)
		}
	}
	sort.Strings(au.ClientLimitedCases)
	sort.Strings(au.HostContendedCases)
}

// shardsReport is the report's shards block of a merged input (nil for any other).
func shardsReport(in *Input) *ShardsReport {
	if in.Shards == nil {
		return nil
	}
	r := &ShardsReport{Shards: len(in.Shards), PerShard: in.Shards, Problems: []string{}}
	if w := in.Artifact.Workload; w != nil {
		r.WorkloadDigest = w.WorkloadDigest
	}
	if h := in.Artifact.Header; h != nil {
		r.RunID = h.Context.RunID
	}
	for i := range in.Shards {
		a := &in.Shards[i]
		if p := a.DispatchLagP99MS; p != nil && (r.SlowestShard == nil || *p > *in.Shards[*r.SlowestShard].DispatchLagP99MS) {
			r.SlowestShard = artifact.Ptr(a.Shard)
		}
		r.Problems = append(r.Problems, shardProblems(a)...)
	}
	r.Problems = append(r.Problems, startSkewProblems(in.Shards)...)
	return r
}

// startSkewProblems names each case whose shards' measured windows did not all overlap on
// their wall clocks: the latest start is at or after the earliest end (a window that was
// never closed counts as ending at its drain, or is left out). The shards then ran one
// after another (started without --coordinator, seconds or a whole window apart), and the
// merged window, which runs from the earliest start to the latest end, mixes schedules that
// never ran together: its rates and its concurrency are no single run's. Start differences
// within the windows' overlap (uncoordinated starts close together, or warm-up phases that
// drained at different times) are not named: every shard's load then ran at once.
func startSkewProblems(shards []ShardAudit) []string {
	cases := map[string]bool{}
	for i := range shards {
		for c := range shards[i].measured {
			cases[c] = true
		}
	}
	var out []string
	for _, c := range slices.Sorted(maps.Keys(cases)) {
		late, early, lateStart, earlyEnd := windowExtremes(shards, c)
		if late == nil || late == early || lateStart < earlyEnd {
			continue
		}
		var others []string // the other shards that also started after it had ended
		for i := range shards {
			if w := shards[i].measured[c]; &shards[i] != late && w != nil && w.StartedAtNS != nil && *w.StartedAtNS >= earlyEnd {
				others = append(others, fmt.Sprint(shards[i].Shard))
			}
		}
		also := ""
		if len(others) > 0 {
			also = fmt.Sprintf(" (%s %s also started after it had ended)", Plural(len(others), "shard", "shards"), strings.Join(others, ", "))
		}
		why := "the shards ran one after another"
		fix := "start the shards together, with --coordinator"
		if coordinated(shards) {
			why = "the shards started together, but their earlier phases (warm-up) drained further apart than the window lasts"
			fix = "lengthen the measured window"
		}
		out = append(out, fmt.Sprintf("%s/measured: shard %d started its window %.3f s after shard %d's had ended%s: %s, so the merged window, from the earliest start to the latest end, mixes schedules that never ran together and its rates are no single run's (%s)",
			c, late.Shard, float64(lateStart-earlyEnd)/1e9, early.Shard, also, why, fix))
	}
	return out
}

// coordinated reports whether every shard recorded a clock alignment, as a shard started
// through a coordinator does.
func coordinated(shards []ShardAudit) bool {
	for i := range shards {
		if shards[i].ClockOffsetNS == nil {
			return false
		}
	}
	return len(shards) > 0
}

// windowExtremes finds, among the shards' measured windows of case c that have a start and
// an end (the window's end, else its drain), the one that started last and the one that
// ended first, with those instants (Unix ns); nil when none has both.
func windowExtremes(shards []ShardAudit, c string) (late, early *ShardAudit, lateStart, earlyEnd int64) {
	for i := range shards {
		w := shards[i].measured[c]
		if w == nil || w.StartedAtNS == nil {
			continue
		}
		end := w.WindowEndedAtNS
		if end == nil {
			end = w.DrainedAtNS
		}
		if end == nil {
			continue
		}
		if late == nil || *w.StartedAtNS > lateStart {
			late, lateStart = &shards[i], *w.StartedAtNS
		}
		if early == nil || *end < earlyEnd {
			early, earlyEnd = &shards[i], *end
		}
	}
	return late, early, lateStart, earlyEnd
}

// shardProblems are the lines naming what one shard lost or could not vouch for.
func shardProblems(a *ShardAudit) []string {
	var out []string
	cutClose := a.Status == "not_closed" && a.Truncated && len(a.MissingWindows) == 0
	if cutClose {
		out = append(out, fmt.Sprintf("shard %d (%s) has no closing infer.session record and its last line was cut short (most likely that record): every phase window it owed is here, so none of its %d %s is missing, but the merged session reads as not closed", a.Shard, a.Path, a.RequestRecords, Plural(a.RequestRecords, "request", "requests")))
	} else if a.Status == "not_closed" {
		out = append(out, fmt.Sprintf("shard %d (%s) has no closing infer.session record: it stopped mid-run after recording %d %s (%d measured); its unsent arrivals are missing from the merged run", a.Shard, a.Path, a.RequestRecords, Plural(a.RequestRecords, "request", "requests"), a.MeasuredRequests))
	} else if a.Status != artifact.StatusCompleted {
		out = append(out, fmt.Sprintf("shard %d (%s) ended %s", a.Shard, a.Path, a.Status))
	}
	if len(a.MissingWindows) > 0 {
		out = append(out, fmt.Sprintf("shard %d wrote no phase window for %s: those cases are phase_window_incomplete", a.Shard, strings.Join(a.MissingWindows, ", ")))
	}
	if a.Truncated && !cutClose {
		out = append(out, fmt.Sprintf("shard %d (%s): its last line was cut short and ignored", a.Shard, a.Path))
	}
	if u := a.ClockUncertaintyNS; u != nil && *u > ShardClockBoundNS {
		out = append(out, fmt.Sprintf("shard %d: clock uncertainty %.3f ms exceeds the %.3f ms bound; its intended times compare to the other shards' only within it", a.Shard, float64(*u)/1e6, float64(ShardClockBoundNS)/1e6))
	}
	return out
}

// renderShards writes the text report's shards block: one line for the run, one per shard
// (status, requests, failures, dispatch lag, clock), the slowest shard, and the problems.
func renderShards(b io.Writer, r *ShardsReport) {
	if r == nil {
		return
	}
	fmt.Fprintf(b, "Shards: %d of run %s merged (workload digest %s)\n", r.Shards, r.RunID, short(r.WorkloadDigest))
	for _, a := range r.PerShard {
		line := fmt.Sprintf("  shard %d: %s, %d %s (%d measured, %d failed, %d dropped)", a.Shard, a.Status, a.RequestRecords, Plural(a.RequestRecords, "request", "requests"), a.MeasuredRequests, a.FailedRequests, a.DroppedRequests)
		if a.DispatchLagP99MS != nil {
			line += fmt.Sprintf(", dispatch lag p50 %.3f ms p99 %.3f ms max %.3f ms", *a.DispatchLagP50MS, *a.DispatchLagP99MS, *a.DispatchLagMaxMS)
		}
		if a.CPUUtilization != nil {
			line += fmt.Sprintf(", client CPU %.0f%%", 100**a.CPUUtilization)
		}
		if len(a.ClientLimitedCases) > 0 {
			line += ", client-limited in " + strings.Join(a.ClientLimitedCases, ", ")
		}
		if len(a.HostContendedCases) > 0 {
			line += ", its host contended in " + strings.Join(a.HostContendedCases, ", ")
		}
		if a.ClockOffsetNS != nil {
			line += fmt.Sprintf(", clock offset %+.3f ms ± %.3f ms", float64(*a.ClockOffsetNS)/1e6, float64(*a.ClockUncertaintyNS)/1e6)
		}
		fmt.Fprintln(b, line)
	}
	if r.SlowestShard != nil {
		fmt.Fprintf(b, "  slowest shard: %d (highest p99 dispatch lag)\n", *r.SlowestShard)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(b, "  problem: %s\n", p)
	}
}
