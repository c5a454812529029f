package analyze

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// RenderText writes the text report: a header (totals, failures by status, the most common
// failure reasons and how many more there are, failure rate, workload digest, memory scope,
// the session status when it did not complete, the records ignored as another session's, the
// SLO policy) and then, per case in the report's case order, one summary line (a percentile
// over fewer successful values than its sufficiency rule needs is marked "[insufficient
// n=N<NMIN]") and its optional lines: the rates line
// naming the interval used, an invalid cohort, arrivals (open loops, or closed loops with drops
// or failures, with the E2E-from-intended p95 for open loops), prompts (non-repeat modes),
// cache (cold or reset), memory (client-local peaks, server maxima once server telemetry is
// joined), the client's self-audit (clientLines) and the SLO line, e.g.
//
//	SLO cli: attainment 96.0%-98.5% of 200 offered, goodput 9.60-9.85 req/s, 5 unknown
func RenderText(w io.Writer, r *Report) error {
	if r == nil {
		return errNoReport
	}
	b := bufio.NewWriter(w)
	s := r.Summary
	fmt.Fprintln(b, "Inference Profile Analysis")
	fmt.Fprintln(b, strings.Repeat("-", 28))
	fmt.Fprintf(b, "Total requests: %d\n", s.TotalRequests)
	fmt.Fprintf(b, "Successful requests: %d\n", s.SuccessfulRequests)
	fmt.Fprintf(b, "Failed requests: %d%s\n", s.FailedRequests, failureBreakdown(s.FailuresByStatus))
	for _, fr := range s.FailureReasons {
		fmt.Fprintf(b, "  %d× %s\n", fr.Count, FailureReasonText(fr))
	}
	if s.FailureReasonsOmitted > 0 {
		fmt.Fprintf(b, "  … and %d more %s (%d %s)\n", s.FailureReasonsOmitted, Plural(s.FailureReasonsOmitted, "reason", "reasons"),
			s.FailedRequestsOmitted, Plural(s.FailedRequestsOmitted, "request", "requests"))
	}
	if s.FailureRate != nil {
		fmt.Fprintf(b, "Failure rate: %.2f%%\n", *s.FailureRate*100)
	} else {
		fmt.Fprintln(b, "Failure rate: -")
	}
	if d, ok := r.Workload["workload_digest"].(string); ok && d != "" {
		fmt.Fprintf(b, "Workload digest: %s (seed %v)\n", d, r.Workload["seed"])
	}
	fmt.Fprintln(b, "Memory observations: client-local")
	if line := serverJoinLine(r); line != "" {
		fmt.Fprintln(b, line)
	}
	if err := renderVLLMSummary(b, r); err != nil {
		return err
	}
	if line := sessionLine(s); line != "" {
		fmt.Fprintln(b, line)
	}
	renderShards(b, r.Shards)
	for _, ig := range r.IgnoredRecords {
		fmt.Fprintln(b, ig.Text())
	}
	if r.SLO != nil {
		fmt.Fprintf(b, "SLO policy: %s (digest %s, from %s)\n", r.SLO.Name, short(r.SLO.Digest), r.SLO.Source)
	}
	if len(r.Cases) > 0 {
		fmt.Fprintln(b)
		fmt.Fprintln(b, "Cases:")
		for _, id := range r.CaseOrder {
			for _, line := range caseLines(id, r.Cases[id]) {
				fmt.Fprintln(b, line)
			}
			if err := renderVLLMCase(b, r, id); err != nil {
				return err
			}
		}
	}
	return b.Flush()
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

func failureBreakdown(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, by[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// FailureReasonText is one reason as a line: status, HTTP status, error type with the
// server's error type and code in parentheses, and message (at most 200 bytes of it), e.g.
//
//	error, HTTP 200, stream_error (InternalServerError, code 500): error object in the stream: engine failure
func FailureReasonText(fr FailureReason) string {
	parts := []string{fr.Status}
	if fr.HTTPStatus != nil {
		parts = append(parts, fmt.Sprintf("HTTP %d", *fr.HTTPStatus))
	}
	var server []string
	if fr.ServerErrorType != nil && *fr.ServerErrorType != "" {
		server = append(server, oneLine(*fr.ServerErrorType))
	}
	if fr.ServerErrorCode != nil && *fr.ServerErrorCode != "" {
		server = append(server, "code "+oneLine(*fr.ServerErrorCode))
	}
	typ := ""
	if fr.ErrorType != nil {
		typ = *fr.ErrorType
	}
	if len(server) > 0 {
		typ = strings.TrimSpace(typ + " (" + strings.Join(server, ", ") + ")")
	}
	if typ != "" {
		parts = append(parts, typ)
	}
	line := strings.Join(parts, ", ")
	if fr.ErrorMessage != nil && *fr.ErrorMessage != "" {
		msg := oneLine(*fr.ErrorMessage)
		if len(msg) > 200 {
			msg = strings.ToValidUTF8(msg[:200], "") + "…"
		}
		line += ": " + msg
	}
	return line
}

// oneLine is a server-supplied string made safe for one line of a terminal: its words joined
// with single spaces, and every other control or format character (ESC, BEL, NUL, DEL, C1
// controls, bidirectional overrides, zero-width characters) written as a Go escape such as
// \x1b or \u202e, so a server's message can neither break the line nor drive the terminal.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unsafeRune(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r) // e.g. '\x1b'
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

func unsafeRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// num formats a nullable figure with two decimals, "-" when nil.
func num(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

var kindWords = map[string]string{
	KindScheduledWindow: "scheduled window",
	KindMeasuredSpan:    "measured span",
	KindRequestSpan:     "request span",
	KindDispatchWindow:  "dispatch window",
	KindDrain:           "drain",
}

func words(s string) string {
	if w, ok := kindWords[s]; ok {
		return w
	}
	return strings.ReplaceAll(s, "_", " ")
}

func caseLines(id string, c *CaseReport) []string {
	lines := []string{fmt.Sprintf("- %s: p50 E2E=%s ms%s, p95 E2E=%s ms%s, p50 TTFT=%s ms%s, output=%s tok/s, requests=%s req/s",
		id, num(c.LatencyMs["e2e_p50"]), c.insufficient(artifact.MetricE2E, "p50"),
		num(c.LatencyMs["e2e_p95"]), c.insufficient(artifact.MetricE2E, "p95"),
		num(c.LatencyMs["ttft_p50"]), c.insufficient(artifact.MetricTTFT, "p50"),
		num(c.Throughput.OutputTokensPerSecond), num(c.Throughput.RequestsPerSecond))}
	lines = append(lines, "  "+ratesLine(c.Intervals)+dispatchNote(c.Intervals, c.Client))
	if !c.Population.CohortValid {
		lines = append(lines, "  cohort invalid: "+strings.Join(c.Population.Issues, ", "))
	}
	lines = append(lines, arrivalLines(c)...)
	if p := c.Prompts; p.Mode != nil && *p.Mode != "repeat" {
		line := fmt.Sprintf("  prompts: %s, %d distinct, %d prefix groups", *p.Mode, p.DistinctPrompts, p.PrefixGroupsUsed)
		if p.SharedPrefixTokens.Min != nil {
			line += fmt.Sprintf(", shared prefix %d-%d tokens", *p.SharedPrefixTokens.Min, *p.SharedPrefixTokens.Max)
		}
		lines = append(lines, line)
	}
	if cache := c.Cache; cache.Requested == "cold" || cache.Reset != nil {
		kind := "null"
		if cache.RunKind != nil {
			kind = *cache.RunKind
		}
		lines = append(lines, fmt.Sprintf("  cache: %s requested, %s (%s); run kind %s", cache.Requested, cache.Verified, cache.Reason, kind))
	}
	if c.SLO != nil {
		lines = append(lines, "  "+SLOLine(c.SLO))
	}
	if line := memoryLine(c.Memory); line != "" {
		lines = append(lines, line)
	}
	lines = append(lines, clientLines(c.Client)...)
	if line := gpuLine(c.GPU); line != "" {
		lines = append(lines, line)
	}
	if cov := c.Memory.ServerCoverage; cov.Status != "not_joined" {
		line := "  server coverage: " + cov.Status
		if cov.Reason != nil {
			line += " (" + *cov.Reason + ")"
		}
		lines = append(lines, line)
	}
	if line := energyLine(c.Energy); line != "" {
		lines = append(lines, line)
	}
	if line := costLine(c.Cost); line != "" {
		lines = append(lines, line)
	}
	return lines
}

func ratesLine(iv Intervals) string {
	if iv.Rate == nil {
		reason := "unknown"
		if iv.RateReason != nil {
			reason = *iv.RateReason
		}
		return fmt.Sprintf("no rate interval (%s)", reason)
	}
	if iv.Rate.Seconds == nil {
		return fmt.Sprintf("no rates: the %s has no length", words(iv.Rate.Kind))
	}
	line := fmt.Sprintf("rates per %s of %.2f s (%s)", words(iv.Rate.Kind), *iv.Rate.Seconds, words(iv.Rate.NumeratorCohort))
	if iv.RateReason != nil {
		line += fmt.Sprintf(", %s", *iv.RateReason)
	}
	return line + drainNote(iv)
}

// drainNote warns, when the drain outlasts a rate interval that ends before the drain does
// (the scheduled window of an open loop), that the rates count requests finished during the
// drain but divide by the interval alone; "" otherwise.
func drainNote(iv Intervals) string {
	d, r := iv.Drain, iv.Rate
	if d == nil || d.Seconds == nil || r.EndedAtNs >= d.EndedAtNs || *d.Seconds <= *r.Seconds {
		return ""
	}
	return fmt.Sprintf("; drain %.2f s > window %.2f s: the rates count the requests that finished during the drain but divide by the window alone", *d.Seconds, *r.Seconds)
}

// dispatchNote warns, when the rate interval is an open loop's scheduled window and the
// client dispatched late (its dispatch lag a self-audit reason), under ClientRateFloor of
// the scheduled rate, and dropped nothing (drops lower the dispatch rate too, and then
// explain it: the requests they leave out are not in the rates),
// that the rates are the schedule's: the requests sent late still count, over the window
// alone, so the request rate reads as what was scheduled, not what reached the server; ""
// otherwise.
func dispatchNote(iv Intervals, a ClientAudit) string {
	if iv.Rate == nil || iv.Rate.Kind != KindScheduledWindow || a.AchievedOverScheduled == nil ||
		*a.AchievedOverScheduled >= ClientRateFloor || a.AchievedRatePerSecond == nil || !a.late() || a.Dropped > 0 {
		return ""
	}
	return fmt.Sprintf("; sends fell behind the schedule, dispatched at %.2f req/s (%.1f%% of the scheduled rate): the requests sent late count in the rates, which divide by the window alone, so they are the schedule's, not what reached the server",
		*a.AchievedRatePerSecond, 100**a.AchievedOverScheduled)
}

func arrivalLines(c *CaseReport) []string {
	a := c.Arrivals
	eventful := a.Dropped > 0 || len(a.Failed) > 0
	if a.Mode == ModeClosed && !eventful {
		return nil
	}
	parts := []string{a.Mode, fmt.Sprintf("offered %d", a.Offered), fmt.Sprintf("sent %d", a.Sent)}
	if a.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("dropped %d", a.Dropped))
	}
	if a.HeldForSlot > 0 {
		parts = append(parts, fmt.Sprintf("held for a slot %d", a.HeldForSlot))
	}
	statuses := make([]string, 0, len(a.Failed))
	for s := range a.Failed {
		statuses = append(statuses, s)
	}
	sort.Strings(statuses)
	for _, s := range statuses {
		parts = append(parts, fmt.Sprintf("%s %d", s, a.Failed[s]))
	}
	if a.PeakInFlight != nil {
		parts = append(parts, fmt.Sprintf("peak in flight %d", *a.PeakInFlight))
	}
	if a.DispatchLagMs.P95 != nil {
		parts = append(parts, fmt.Sprintf("dispatch lag p95 %.2f ms", *a.DispatchLagMs.P95))
	}
	if due := c.LatencyMs["e2e_from_intended_p95"]; a.Mode != ModeClosed && due != nil {
		parts = append(parts, fmt.Sprintf("E2E-from-intended p95 %.2f ms%s", *due, c.insufficient(artifact.MetricE2EFromIntended, "p95")))
	}
	return []string{"  arrivals: " + strings.Join(parts, ", ")}
}

// SLOLine is a case's SLO line of the text report: attainment as a range of percentages
// (one value when the bounds are equal) of the offered requests, goodput in req/s (a range
// likewise; "no rate interval" without one), and the unknown count when there are any; or
// "unmeasurable (<reason>)".
func SLOLine(e *Evaluation) string {
	head := "SLO " + e.SLOName + ": "
	if e.Status == EvaluationUnmeasurable {
		reason := ""
		if e.Reason != nil {
			reason = *e.Reason
		}
		return head + fmt.Sprintf("unmeasurable (%s) over %d offered", reason, e.Offered)
	}
	line := head + "attainment " + bounds(e.AttainmentLower, e.AttainmentUpper, func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }) +
		fmt.Sprintf(" of %d offered", e.Offered)
	if e.GoodputLowerRPS == nil {
		line += ", goodput - (no rate interval)"
	} else {
		line += ", goodput " + bounds(e.GoodputLowerRPS, e.GoodputUpperRPS, func(v float64) string { return fmt.Sprintf("%.2f", v) }) + " req/s"
	}
	if e.Unknown > 0 {
		line += fmt.Sprintf(", %d unknown", e.Unknown)
	}
	return line
}

func bounds(lo, hi *float64, f func(float64) string) string {
	if lo == nil || hi == nil {
		return "-"
	}
	a, b := f(*lo), f(*hi)
	if a == b {
		return a
	}
	return a + "-" + b
}

// serverJoinLine is the header's server join line, "" without server telemetry.
func serverJoinLine(r *Report) string {
	j, ok := r.Telemetry["server_join"].(join.ServerJoin)
	if !ok {
		return ""
	}
	line := "Server telemetry: " + j.Status
	switch {
	case j.Reason != nil:
		line += " (" + *j.Reason + ")"
	case j.ClockAlignmentEvidence != nil:
		line += fmt.Sprintf(" (clock evidence %s; cases observed %d, partial %d, empty %d)", *j.ClockAlignmentEvidence,
			j.CaseCoverage["observed"], j.CaseCoverage["partial"], j.CaseCoverage["empty"])
	}
	return line
}
