package compare

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/analyze"
)

// RenderText writes the comparison for a terminal: both runs, the warnings, then per case
// each metric's verdict (its rank test) and its quantiles' differences with their
// intervals, the shares, the rates side by side, and the gates last.
func RenderText(w io.Writer, r *Result) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "Base:      %s\n", sideLine(r.Base))
	fmt.Fprintf(b, "Candidate: %s\n", sideLine(r.Candidate))
	fmt.Fprintf(b, "Confidence %s: %d %s, Holm-adjusted (the chance of any false better or worse is at most %s)\n",
		pct(r.Confidence, 0), r.Family, analyze.Plural(r.Family, "test", "tests"), pct(1-r.Confidence, 0))
	for _, s := range r.Base.Warnings {
		fmt.Fprintf(b, "Warning (base): %s\n", s)
	}
	for _, s := range r.Candidate.Warnings {
		fmt.Fprintf(b, "Warning (candidate): %s\n", s)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(b, "Warning: %s\n", s)
	}
	for i := range r.Cases {
		writeCase(b, &r.Cases[i])
	}
	if len(r.Gates) > 0 {
		fmt.Fprintln(b)
		fmt.Fprintln(b, "Gates:")
		fired := 0
		for _, g := range r.Gates {
			fmt.Fprintf(b, "  %s\n", gateLine(g))
			if g.Outcome == GateFired {
				fired++
			}
		}
		if fired > 0 {
			fmt.Fprintf(b, "%d %s: a significant regression (exit 3)\n", fired, analyze.Plural(fired, "gate fired", "gates fired"))
		} else {
			fmt.Fprintln(b, "No gate fired")
		}
	}
	return b.Flush()
}

func sideLine(s *Side) string {
	parts := []string{strings.Join(s.Paths, ", ")}
	if s.Model != "" {
		parts = append(parts, "model "+s.Model)
	}
	if s.API != "" {
		parts = append(parts, s.API)
	}
	if s.Engine != nil {
		parts = append(parts, "engine "+*s.Engine)
	}
	if s.WorkloadDigest != "" {
		w := "workload " + short(s.WorkloadDigest)
		if s.Seed != nil {
			w += fmt.Sprintf(" (seed %d)", *s.Seed)
		}
		parts = append(parts, w)
	}
	if s.SLO != nil {
		parts = append(parts, fmt.Sprintf("SLO %s (%s)", s.SLO.Name, short(s.SLO.Digest)))
	}
	return strings.Join(parts, "; ")
}

func writeCase(b *bufio.Writer, c *CaseResult) {
	fmt.Fprintf(b, "\nCase %s: %d and %d offered\n", c.CaseID, c.Offered[0], c.Offered[1])
	for _, m := range c.Metrics {
		fmt.Fprintf(b, "  %s\n", metricLine(m))
		for _, q := range m.Quantiles {
			fmt.Fprintf(b, "    %s\n", quantileLine(q))
		}
	}
	if c.Success != nil {
		fmt.Fprintf(b, "  %s\n", proportionLine("success", c.Success))
	}
	if c.Attainment != nil {
		fmt.Fprintf(b, "  %s\n", proportionLine("SLO attainment", c.Attainment))
	}
	if line := ratesLine(c.Rates); line != "" {
		fmt.Fprintf(b, "  rates (one measurement a run, no interval): %s\n", line)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
}

// metricLine: "client.ttft: 400 and 400 values, P(candidate larger) 0.91, p < 1e-16 (Holm
// < 1e-16): worse".
func metricLine(m MetricResult) string {
	head := fmt.Sprintf("%s: %d and %d values", m.Key, m.NBase, m.NCandidate)
	if m.Missing[0]+m.Missing[1] > 0 {
		head += fmt.Sprintf(" (%d and %d successful requests without one)", m.Missing[0], m.Missing[1])
	}
	if m.Rank == nil {
		return fmt.Sprintf("%s: %s (%s)", head, m.Verdict, m.Reason)
	}
	adj := ""
	if m.AdjustedP != nil {
		adj = fmt.Sprintf(" (Holm %s)", pval(*m.AdjustedP))
	}
	return fmt.Sprintf("%s, P(candidate larger) %.3f, p %s%s: %s", head, m.Rank.Effect, pval(m.Rank.P), adj, m.Verdict)
}

// quantileLine: "p50  12.1 → 17.2 ms, +5.10 ms [+4.91, +5.30], +42.1% [+40.0%, +44.2%]: worse".
func quantileLine(q QuantileDiff) string {
	head := fmt.Sprintf("%-5s %s → %s ms", q.Level, ms(q.BaseMs), ms(q.CandMs))
	if !q.Sufficient {
		return fmt.Sprintf("%s: %s (%d and %d values; %d each needed for its interval)", head, VerdictInsufficient, q.NBase, q.NCandidate, q.NMin)
	}
	line := fmt.Sprintf("%s, %s ms [%s, %s]", head, signed(q.DiffMs), signed(q.DiffLower), signed(q.DiffUpper))
	if q.Rel != nil && q.RelLower != nil {
		line += fmt.Sprintf(", %s [%s, %s]", signedPct(*q.Rel), signedPct(*q.RelLower), signedPct(*q.RelUpper))
	}
	return line + ": " + q.Verdict
}

func proportionLine(name string, d *ProportionDiff) string {
	share := func(b [2]float64) string {
		if b[0] == b[1] {
			return pct(b[0], 1)
		}
		return pct(b[0], 1) + "–" + pct(b[1], 1)
	}
	head := fmt.Sprintf("%s %s → %s", name, share(d.Base), share(d.Candidate))
	if d.Reason != "" {
		return fmt.Sprintf("%s: %s (%s)", head, d.Verdict, d.Reason)
	}
	return fmt.Sprintf("%s, %s [%s, %s] points: %s", head, points(d.Candidate[0]-d.Base[0]), points(d.Lower), points(d.Upper), d.Verdict)
}

func ratesLine(r Rates) string {
	var parts []string
	add := func(name string, p Pair, unit string, f func(float64) string) {
		if p.Base == nil && p.Candidate == nil {
			return
		}
		s := fmt.Sprintf("%s %s → %s%s", name, opt(p.Base, f), opt(p.Candidate, f), unit)
		if p.Relative != nil {
			s += " (" + signedPct(*p.Relative) + ")"
		}
		parts = append(parts, s)
	}
	add("output", r.OutputTokensPerSecond, " tok/s", sig)
	add("requests", r.RequestsPerSecond, " /s", sig)
	add("goodput", r.GoodputRPS, " /s", sig)
	add("energy", r.JoulesPerOutputToken, " J/output token", sig)
	add("cost", r.USDPerMillionOutput, " $/M output tokens", sig)
	return strings.Join(parts, "; ")
}

func gateLine(g GateResult) string {
	head := fmt.Sprintf("%s, case %s", g.Gate.Spec, g.CaseID)
	change := func(v *float64) string {
		switch {
		case v == nil:
			return "?"
		case g.Gate.Metric == GateAttainment || g.Gate.Metric == GateSuccess:
			return points(*v)
		case g.Gate.Relative:
			return signedPct(*v)
		}
		return signed(v) + " ms"
	}
	if g.Change != nil {
		head += ": " + change(g.Change)
		if g.Lower != nil && g.Upper != nil {
			head += fmt.Sprintf(" [%s, %s]", change(g.Lower), change(g.Upper))
		}
	}
	if g.PValue == nil {
		return fmt.Sprintf("%s: %s (%s)", head, g.Outcome, g.Reason)
	}
	adj := ""
	if g.AdjustedP != nil {
		adj = fmt.Sprintf(", Holm %s", pval(*g.AdjustedP))
	}
	outcome := g.Outcome
	if outcome == GateFired {
		outcome = strings.ToUpper(outcome)
	}
	return fmt.Sprintf("%s; p %s%s: %s", head, pval(*g.PValue), adj, outcome)
}

// WriteJSON writes the result as pretty-printed JSON with sorted keys (analyze.WriteJSON's
// form) and a trailing newline.
func WriteJSON(w io.Writer, r *Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(tree)
}

// sig writes v with three significant digits (no exponent at report magnitudes).
func sig(v float64) string {
	a := math.Abs(v)
	switch {
	case a < 1e-9: // rounding noise of a difference of equal values
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', min(2-int(math.Floor(math.Log10(a))), 12), 64)
}

func ms(v *float64) string { return opt(v, sig) }

func opt(v *float64, f func(float64) string) string {
	if v == nil {
		return "–"
	}
	return f(*v)
}

func signed(v *float64) string {
	if v == nil {
		return "?"
	}
	if *v >= 0 {
		return "+" + sig(*v)
	}
	return sig(*v)
}

func signedPct(v float64) string {
	v = math.Round(v*1000)/1000 + 0 // + 0: no negative zero
	s := strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
	if v >= 0 {
		return "+" + s
	}
	return s
}

func pct(v float64, decimals int) string {
	return strconv.FormatFloat(v*100, 'f', decimals, 64) + "%"
}

func points(v float64) string {
	v = math.Round(v*1000)/1000 + 0 // + 0: no negative zero
	s := strconv.FormatFloat(v*100, 'f', 1, 64)
	if v >= 0 {
		return "+" + s
	}
	return s
}

func pval(p float64) string {
	switch {
	case p <= 1e-16:
		return "< 1e-16"
	case p < 0.001:
		return strconv.FormatFloat(p, 'e', 1, 64)
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}
