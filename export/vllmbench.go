package export

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// VLLMBenchPercentiles are the percentiles of the vllm-bench export: the file of `vllm bench
// serve --save-result --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles
// 50,90,95,99`.
var VLLMBenchPercentiles = []int{50, 90, 95, 99}

// WriteVLLMBench writes, per case in the report's case order, the JSON object `vllm bench
// serve --save-result` writes for one benchmark, with vLLM's keys in its order, its units
// and its number forms (json.dump of Python: ", " and ": " separators, floats with a point),
// one object per line as --append-result joins them. How each figure is taken:
//
//   - date: the session start, UTC, %Y%m%d-%H%M%S; endpoint_type and backend "openai-chat"
//     (Chat Completions); label null; model_id the model; tokenizer_id the tokenizer
//     setting; num_prompts the offered requests;
//   - request_rate: the open loop's rate, "inf" for a closed loop (no rate); burstiness 1.0
//     for Poisson and closed loops, null for a fixed rate (vLLM's constant gaps are
//     burstiness infinity, which JSON cannot write); max_concurrency the closed loop's
//     workers or the open loop's in-flight cap;
//   - duration: the report's rate interval (s); completed: successful requests, failed: the
//     other offered ones (dropped included); tokens: prompt and output tokens of the
//     successful requests; the throughputs per second of the duration; request_goodput: the
//     SLO evaluation's lower-bound goodput, null without a policy;
//   - latencies and queue_times: every offered request's e2e and dispatch lag in seconds (0.0
//     without one, as vLLM's failed requests);
//   - max_output_tokens_per_s: the most streamed chunks in one whole second from the first
//     send (vLLM counts its inter-token gaps, which are chunk gaps, the same way);
//     max_concurrent_requests: the peak of successful requests in flight; rtfx 0.0;
//   - mean, median, std (population) and p50/p90/p95/p99 in ms of TTFT, TPOT (client.tpot:
//     server-reported output tokens), ITL (every chunk gap of every successful request,
//     pooled, as vLLM pools them — chunk-level, not token-level) and E2EL.
func WriteVLLMBench(w io.Writer, c *Collector, rep *analyze.Report) error {
	b := bufio.NewWriter(w)
	for i, id := range rep.CaseOrder {
		d, cr := c.cases[id], rep.Cases[id]
		if d == nil || cr == nil {
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		o := &pyObject{b: b}
		o.str("date", dateOf(c.run.startNS))
		o.str("endpoint_type", "openai-chat")
		o.str("backend", "openai-chat")
		o.null("label")
		o.str("model_id", c.run.model)
		o.str("tokenizer_id", c.run.tokenizer)
		o.int("num_prompts", int64(cr.Population.Offered))
		rate, burst, conc := c.arrival(id)
		if rate == nil {
			o.str("request_rate", "inf")
		} else {
			o.float("request_rate", *rate)
		}
		o.optFloat("burstiness", burst)
		o.optInt("max_concurrency", conc)
		dur := 0.0
		if cr.Throughput.IntervalSeconds != nil {
			dur = *cr.Throughput.IntervalSeconds
		}
		per := func(n float64) float64 {
			if dur <= 0 {
				return 0
			}
			return n / dur
		}
		o.float("duration", dur)
		o.int("completed", int64(d.completed))
		o.int("failed", int64(d.failed))
		o.int("total_input_tokens", d.totalInput)
		o.int("total_output_tokens", d.totalOutput)
		o.float("request_throughput", per(float64(d.completed)))
		var goodput *float64
		if cr.SLO != nil {
			goodput = cr.SLO.GoodputLowerRPS
		}
		o.optFloat("request_goodput", goodput)
		o.float("output_throughput", per(float64(d.totalOutput)))
		o.float("total_token_throughput", per(float64(d.totalInput+d.totalOutput)))
		o.floats("latencies", d.latencies)
		o.floats("queue_times", d.queue)
		o.float("max_output_tokens_per_s", d.maxChunksPerSecond)
		o.int("max_concurrent_requests", int64(d.maxConcurrent))
		o.float("rtfx", 0)
		for _, m := range []struct {
			name   string
			values []float64
		}{{"ttft", d.ttft}, {"tpot", d.tpot}, {"itl", d.itl}, {"e2el", d.e2e}} {
			s := statsOf(m.values)
			o.float("mean_"+m.name+"_ms", s.mean)
			o.float("median_"+m.name+"_ms", s.q(0.5))
			o.float("std_"+m.name+"_ms", s.std)
			for _, p := range VLLMBenchPercentiles {
				o.float(fmt.Sprintf("p%d_%s_ms", p, m.name), s.q(float64(p)/100))
			}
		}
		o.end()
	}
	b.WriteByte('\n')
	return b.Flush()
}

// arrival is a case's request rate (nil: a closed loop, "inf"), burstiness (nil for a fixed
// rate) and concurrency cap, from the workload record.
func (c *Collector) arrival(id string) (rate, burstiness *float64, concurrency *int64) {
	one := 1.0
	if c.run.workload == nil {
		return nil, &one, nil
	}
	for _, wc := range c.run.workload.Cases {
		if wc.CaseID != id {
			continue
		}
		switch wc.Arrival.Mode {
		case artifact.ArrivalClosed:
			return nil, &one, wc.Concurrency
		case "fixed-rate":
			return wc.Arrival.RatePerSecond, nil, wc.MaxInFlight
		case "poisson":
			return wc.Arrival.RatePerSecond, &one, wc.MaxInFlight
		}
		return nil, &one, wc.MaxInFlight
	}
	return nil, &one, nil
}

func dateOf(ns int64) string {
	if ns <= 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format("20060102-150405")
}

// pyObject writes one JSON object as Python's json.dump does by default: keys in the order
// given, ", " between members and ": " after keys, non-ASCII escaped, floats in repr form.
type pyObject struct {
	b *bufio.Writer
	n int
}

func (o *pyObject) key(k string) {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteString(", ")
	}
	o.n++
	o.b.WriteString(pyString(k))
	o.b.WriteString(": ")
}

func (o *pyObject) str(k, v string)       { o.key(k); o.b.WriteString(pyString(v)) }
func (o *pyObject) null(k string)         { o.key(k); o.b.WriteString("null") }
func (o *pyObject) int(k string, v int64) { o.key(k); o.b.WriteString(strconv.FormatInt(v, 10)) }
func (o *pyObject) float(k string, v float64) {
	o.key(k)
	o.b.WriteString(pyFloat(v))
}

func (o *pyObject) optFloat(k string, v *float64) {
	if v == nil {
		o.null(k)
		return
	}
	o.float(k, *v)
}

func (o *pyObject) optInt(k string, v *int64) {
	if v == nil {
		o.null(k)
		return
	}
	o.int(k, *v)
}

func (o *pyObject) floats(k string, vs []float64) {
	o.key(k)
	o.b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			o.b.WriteString(", ")
		}
		o.b.WriteString(pyFloat(v))
	}
	o.b.WriteByte(']')
}

func (o *pyObject) end() {
	if o.n == 0 {
		o.b.WriteByte('{')
	}
	o.b.WriteByte('}')
}

// pyFloat is Python's repr of a float: the shortest round-tripping digits, positional
// between 1e-4 and 1e16, else with an exponent ("1e-05"), always with a point or an
// exponent. Non-finite values (never produced here) are written as 0.0.
func pyFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0.0"
	}
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	a := math.Abs(v)
	if a < 1e-4 || a >= 1e16 {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		// Go writes "1e-05", Python too; a mantissa without a point stays without one.
		return s
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyString is a JSON string as Python's json.dump writes it (ensure_ascii): non-ASCII and
// control characters as \uXXXX escapes (surrogate pairs above U+FFFF).
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
