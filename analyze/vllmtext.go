package analyze

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// SpanCounts is what the summary line says about spans when the span join
// supplies it.
type SpanCounts struct {
	Total, Joined int
}

// RenderVLLMText writes the text report's vLLM lines: the
// summary lines, then for each case in id order a "case <id>:" line and its
// case lines. Nothing is written for an absent block.
func RenderVLLMText(w io.Writer, b *VLLMBlock) error {
	if b == nil || b.Status != VLLMCollected {
		return nil
	}
	if err := RenderVLLMSummary(w, b, nil); err != nil {
		return err
	}
	ids := make([]string, 0, len(b.Cases))
	for id := range b.Cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, err := fmt.Fprintf(w, "case %s:\n", id); err != nil {
			return err
		}
		if err := RenderVLLMCase(w, b.Cases[id]); err != nil {
			return err
		}
	}
	return nil
}

// RenderVLLMSummary writes the run-wide lines:
//
//	vLLM telemetry: 4 scrapes ok, 0 failed; 1 engine (engine="0"); engine-aggregate, no per-request attribution
//	vLLM telemetry: the server restarted 1 time during the run
//	vLLM telemetry: retired series: vllm:gpu_cache_usage_perc (now vllm:kv_cache_usage_perc)
//	vLLM telemetry: removed series: …
//	vLLM telemetry: unknown series: …
//
// spans (optional) adds "spans N (M joined)" to the first line.
func RenderVLLMSummary(w io.Writer, b *VLLMBlock, spans *SpanCounts) error {
	if b == nil || b.Status != VLLMCollected || b.Engine == nil {
		return nil
	}
	e := b.Engine
	engines := enginesText(e.Engines)
	if e.Scrapes.OK == 0 {
		engines = "no series read"
	}
	line := fmt.Sprintf("vLLM telemetry: %d scrapes ok, %d failed; %s; ", e.Scrapes.OK, e.Scrapes.Failed, engines)
	if spans != nil {
		line += fmt.Sprintf("spans %d (%d joined); ", spans.Total, spans.Joined)
	}
	lines := []string{line + "engine-aggregate, no per-request attribution"}
	if n := len(e.Epochs) - 1; n > 0 {
		lines = append(lines, fmt.Sprintf("vLLM telemetry: the server restarted %d %s during the run", n, Plural(n, "time", "times")))
	}
	if len(e.DeprecatedSeries) > 0 {
		names := make([]string, len(e.DeprecatedSeries))
		for i, n := range e.DeprecatedSeries {
			names[i] = n
			if s := e.DeprecatedSuccessors[n]; s != "" {
				names[i] += " (now " + s + ")"
			}
		}
		lines = append(lines, "vLLM telemetry: retired series: "+oneLine(strings.Join(names, ", ")))
	}
	if len(e.RemovedSeries) > 0 {
		lines = append(lines, "vLLM telemetry: removed series: "+oneLine(strings.Join(e.RemovedSeries, ", ")))
	}
	if len(e.UnknownSeries) > 0 {
		lines = append(lines, "vLLM telemetry: unknown series: "+oneLine(strings.Join(e.UnknownSeries, ", ")))
	}
	return writeLines(w, lines)
}

// RenderVLLMCase writes a case's lines, indented by two spaces:
//
//	vllm: unresolved (engine_restart)
//	vllm engine 0: waiting max 3 mean 1.20; running max 8; preemptions 0; kv usage max 4.2% (4,504 of 107,233 blocks); prefix hits 0 of 16,384 tokens; queue time mean 8.11 ms over 32 requests; 1,260.31 prompt and 315.08 generated tok/s over 13.00 s (incl. drain)
//	vllm engine 0: unresolved fields: counter_reset (generation_tokens, prompt_tokens)
//
// "n/a" stands for a value that is unresolved or absent.
func RenderVLLMCase(w io.Writer, c *VLLMCaseBlock) error {
	if c == nil {
		return nil
	}
	var lines []string
	if c.State == StateUnresolved {
		lines = append(lines, fmt.Sprintf("  vllm: unresolved (%s)", strings.Join(c.Reasons, ", ")))
	}
	for _, id := range engineOrder(c.Engines) {
		eb := c.Engines[id]
		lines = append(lines, fmt.Sprintf("  vllm engine %s: %s", id, engineLine(eb)))
		if len(eb.Unresolved) > 0 {
			var parts []string
			for _, r := range sortedReasonKeys(eb.Unresolved) {
				parts = append(parts, fmt.Sprintf("%s (%s)", r, strings.Join(eb.Unresolved[r], ", ")))
			}
			lines = append(lines, fmt.Sprintf("  vllm engine %s: unresolved fields: %s", id, strings.Join(parts, "; ")))
		}
	}
	return writeLines(w, lines)
}

// enginesText names the engines the scrapes saw by their engine label: `1 engine
// (engine="0")`, `2 engines (engine="0", "1")`, or "no engine label on the vllm: series"
// (a server that exports none).
func enginesText(engines []string) string {
	if len(engines) == 0 {
		return "no engine label on the vllm: series"
	}
	labels := make([]string, len(engines))
	for i, e := range engines {
		labels[i] = strconv.Quote(e)
	}
	return fmt.Sprintf("%d %s (engine=%s)", len(engines), Plural(len(engines), "engine", "engines"), strings.Join(labels, ", "))
}

// engineOrder sorts engine labels numerically where they are numbers.
func engineOrder(m map[string]*VLLMEngineBlock) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, errA := strconv.Atoi(ids[i])
		b, errB := strconv.Atoi(ids[j])
		if errA == nil && errB == nil {
			return a < b
		}
		if (errA == nil) != (errB == nil) {
			return errA == nil
		}
		return ids[i] < ids[j]
	})
	return ids
}

func sortedReasonKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func engineLine(eb *VLLMEngineBlock) string {
	waiting := gaugeStats(eb, "queue_depth")
	running := gaugeStats(eb, "running_requests")
	kv := eb.Derived.KVCache
	kvText := "kv usage max " + pct(kv.MaxUsageFraction)
	if kv.NumGPUBlocks != nil {
		kvText += fmt.Sprintf(" (%s of %s blocks)", intText(kv.MaxBlocksInUse), intText(kv.NumGPUBlocks))
	}
	r := eb.Derived.Rates
	p := eb.Derived.PrefixCache
	parts := []string{
		fmt.Sprintf("waiting max %s mean %s", vllmNum(waiting.Max), vllmNum(waiting.Mean)),
		fmt.Sprintf("running max %s", vllmNum(running.Max)),
		counterText(eb, "preemptions", func(v *float64) string { return "preemptions " + vllmNum(v) }),
		kvText,
		counterText(eb, "prefix_cache_hits", func(*float64) string {
			return fmt.Sprintf("prefix hits %s of %s tokens", vllmNum(p.Hits), vllmNum(p.Queries))
		}),
		queueText(eb.Histograms["queue_time"]),
		counterText(eb, "generation_tokens", func(*float64) string {
			return fmt.Sprintf("%s prompt and %s generated tok/s over %s s (incl. drain)", vllmNum(r.PromptTokensPerSecond), vllmNum(r.GenerationTokensPerSecond), fixed2(r.WindowSeconds))
		}),
	}
	return strings.Join(parts, "; ")
}

// fieldNames are the words the engine line uses for a field it cannot give.
var fieldNames = map[string]string{
	"preemptions":       "preemptions",
	"prefix_cache_hits": "prefix hits",
	"generation_tokens": "token rates",
	"queue_time":        "queue time",
}

// counterText renders a counter field with resolved, which gets the field's delta; a field
// the server did not export reads "<name> not exported", an unresolved one "<name>
// unresolved (<reasons>)" — never a sentence of "n/a".
func counterText(eb *VLLMEngineBlock, field string, resolved func(*float64) string) string {
	f := eb.Counters[field]
	switch {
	case f == nil:
		return fieldNames[field] + " not exported"
	case f.State != StateResolved:
		return fieldNames[field] + " unresolved (" + reasonsText(f.State, f.Reasons, counterLabelStates(f)) + ")"
	}
	return resolved(f.Delta)
}

// queueText is the engine line's queue-time part: the mean (ms) over the requests the
// histogram counted, or why there is none.
func queueText(h *HistogramField) string {
	switch {
	case h == nil:
		return fieldNames["queue_time"] + " not exported"
	case h.State != StateResolved:
		states := make([]string, 0, len(h.ByLabel))
		for _, d := range h.ByLabel {
			states = append(states, d.State)
		}
		return fieldNames["queue_time"] + " unresolved (" + reasonsText(h.State, h.Reasons, states) + ")"
	}
	var mean *float64
	if h.Mean != nil {
		mean = artifact.Ptr(*h.Mean * 1000)
	}
	c := h.Count
	return fmt.Sprintf("queue time mean %s ms over %s requests", vllmNum(mean), vllmNum(&c))
}

func counterLabelStates(f *CounterField) []string {
	states := make([]string, 0, len(f.ByLabel))
	for _, d := range f.ByLabel {
		states = append(states, d.State)
	}
	return states
}

// reasonsText names why a field is unresolved: its own reasons, else the distinct states of
// its label sets other than resolved, else its state; sorted, comma-separated.
func reasonsText(state string, reasons, labelStates []string) string {
	if len(reasons) > 0 {
		return strings.Join(reasons, ", ")
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range labelStates {
		if s != StateResolved && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return state
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// gaugeStats returns a gauge's statistics without extra labels.
func gaugeStats(eb *VLLMEngineBlock, field string) GaugeStats {
	if g := eb.Gauges[field]; g != nil {
		return g.Stats["_"]
	}
	return GaugeStats{}
}

// num formats a value: "n/a" when nil; integral values with thousands
// separators; others with two decimals below 1,000, else rounded with
// separators.
func vllmNum(v *float64) string {
	if v == nil || !finite(*v) {
		return "n/a"
	}
	x := *v
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return groupDigits(strconv.FormatInt(int64(x), 10))
	}
	if math.Abs(x) < 1000 {
		return fixed2(x)
	}
	if math.Abs(x) < 1e15 {
		return groupDigits(strconv.FormatInt(int64(math.Round(x)), 10))
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

func fixed2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func intText(v *int64) string {
	if v == nil {
		return "n/a"
	}
	return groupDigits(strconv.FormatInt(*v, 10))
}

func pct(v *float64) string {
	if v == nil || !finite(*v) {
		return "n/a"
	}
	return strconv.FormatFloat(*v*100, 'f', 1, 64) + "%"
}

// groupDigits inserts thousands separators into a decimal integer.
func groupDigits(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Plural is one when n is 1 and many otherwise: the noun after a count ("1 request", "3
// requests").
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func writeLines(w io.Writer, lines []string) error {
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}
