package capacity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// RenderText writes the search's text report: the outcome, the capacity with its bracket,
// the binding criterion and the boundary's shape, the budget spent, one line per probe (its
// value, decision, measured requests, stages and its tests' bounds), then the warnings.
// A quantile's bounds print in ms with two decimals, "[35.35, 36.18] ms ≤ 40 ms?"; an
// attainment's as percentages, "[91.2%, 97.9%] ≥ 95%?"; "∞" for a missing upper bound.
func RenderText(w io.Writer, r *artifact.Search) error {
	var b strings.Builder
	unit := "workers"
	if r.Over == artifact.OverRate {
		unit = "req/s"
	}
	fmt.Fprintf(&b, "Capacity search over %s, %s to %s %s, tolerance %s, confidence %s\n",
		r.Over, num(r.Min), num(r.Max), unit, num(r.Tolerance), num(r.Confidence))
	fmt.Fprintf(&b, "  status:     %s\n", r.Status)
	fmt.Fprintf(&b, "  capacity:   %s\n", opt(r.Capacity, unit))
	fmt.Fprintf(&b, "  bracket:    [%s, %s]\n", opt(r.BracketLower, ""), opt(r.BracketUpper, ""))
	binding := "none"
	if r.BindingCriterion != nil {
		binding = *r.BindingCriterion
	}
	fmt.Fprintf(&b, "  binding:    %s\n", binding)
	fmt.Fprintf(&b, "  boundary:   %s\n", r.Boundary)
	fmt.Fprintf(&b, "  spent:      %d probes, %d runs, %d measured requests\n", r.ProbesSpent, r.RunsSpent, r.RequestsSpent)
	fmt.Fprintf(&b, "Probes:\n")
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "  %2d  %-10s %-13s n=%-6d stages=%d", p.Index, num(p.Value), p.Decision, p.Requests, p.Stages)
		for _, t := range p.Tests {
			fmt.Fprintf(&b, "  %s %s %s", Test{Kind: t.Kind, Key: t.Key, Level: t.Level}.Name(), t.Decision, boundsText(t))
		}
		b.WriteByte('\n')
		if p.Reason != "" {
			fmt.Fprintf(&b, "      %s\n", p.Reason)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "Warning: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the infer.search record as indented JSON with a trailing newline.
func WriteJSON(w io.Writer, r *artifact.Search) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("capacity: report: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, line, "", "  "); err != nil {
		return fmt.Errorf("capacity: report: %w", err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// WriteRecord writes the infer.search record alone to the search artifact at path (one
// JSONL line; parent directories are created). Errors are artifact.NewWriter's and the
// write's.
func WriteRecord(path string, r *artifact.Search) error {
	w, err := artifact.NewWriter(path)
	if err != nil {
		return err
	}
	if err := w.Write(r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func opt(v *float64, unit string) string {
	if v == nil {
		return "none"
	}
	if unit == "" {
		return num(*v)
	}
	return num(*v) + " " + unit
}

// boundsText is a test's interval against its threshold, in the test's unit.
func boundsText(t artifact.SearchTest) string {
	f, unit, rel := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }, " ms", "≤"
	if t.Kind == artifact.TestAttainment {
		f = func(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }
		unit, rel = "", "≥"
	}
	lo, hi := "none", "∞"
	if t.Lower != nil {
		lo = f(*t.Lower)
	}
	if t.Upper != nil {
		hi = f(*t.Upper)
	}
	return fmt.Sprintf("[%s, %s]%s %s %s%s?", lo, hi, unit, rel, f(t.Threshold), unit)
}
