package tables

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"

	"github.com/inferprobe/inferprobe/artifact"
)

// TimelineMaxRequests is the most requests timeline.json draws (the first sent); the others
// are counted in the manifest (TimelineEntry.LeftOut), so that a long run's trace still loads.
const TimelineMaxRequests = 2000

// Timeline processes: every request's client and server threads are in requestsPID; engine
// k (sorted ids) is enginePIDBase+k, with its scraped gauges as counters and its imported
// steps as X events on thread engineStepsTID.
const (
	requestsPID    = 1
	enginePIDBase  = 10
	engineStepsTID = 1
)

// TimelineEntry describes timeline.json: Requests drawn, LeftOut (sent requests beyond
// TimelineMaxRequests), ServerSpans drawn, Engines with counters, the clock rule and the
// engine steps' state.
type TimelineEntry struct {
	File        string `json:"file"`
	Requests    int    `json:"requests"`
	LeftOut     int    `json:"left_out"`
	ServerSpans int    `json:"server_spans"`
	Engines     int    `json:"engines"`
	// TimeZeroUnixNS is the instant ts 0 stands for (the earliest event).
	TimeZeroUnixNS int64  `json:"time_zero_unix_ns"`
	Clocks         string `json:"clocks"`
	Steps          string `json:"steps"`
}

const timelineClocks = "ts in microseconds since time_zero_unix_ns; client events and scrapes on the client's wall clock, " +
	"server spans on the exporter's wall clock (their clock_domain), unadjusted: a clock offset between hosts shifts them"

// event is one trace event with absolute times (Unix ns); ph is X, i, C or M.
type event struct {
	name, ph   string
	atNS, durN int64
	pid, tid   int
	args       map[string]any
}

// writeTimeline writes timeline.json (Chrome trace event format, JSON object form): per
// drawn request a client thread (the request as an X event from send to end, "to first
// byte" and "first byte to first token" X events, instants at the first byte, the first
// token and each later content chunk) and beside it a server thread with the joined span
// (package join's result) and its queue, prefill and decode laid end to end, ending at the
// span's end; per engine a process with its scraped gauges as counters (ph C) and its
// imported steps (ph X, engineStepsTID); metadata (ph M) names every process and thread. Errors: writing the file.
func (o *output) writeTimeline(dir string) (TimelineEntry, error) {
	e := TimelineEntry{File: TimelineFile, Clocks: timelineClocks, Steps: o.stepsText()}
	sent := make([]*artifact.Request, 0, len(o.reqs))
	for _, r := range o.reqs {
		if r.StartedAtNS != nil {
			sent = append(sent, r)
		}
	}
	slices.SortStableFunc(sent, func(a, b *artifact.Request) int { return cmp.Compare(*a.StartedAtNS, *b.StartedAtNS) })
	if len(sent) > TimelineMaxRequests {
		e.LeftOut, sent = len(sent)-TimelineMaxRequests, sent[:TimelineMaxRequests]
	}
	e.Requests = len(sent)
	evs := []event{meta("process_name", requestsPID, 0, "requests (client, and the joined vLLM span)")}
	spans := o.spansOf(sent)
	for i, r := range sent {
		client, server := 2*i+1, 2*i+2
		evs = append(evs, meta("thread_name", requestsPID, client, r.RequestID+" client"))
		evs = append(evs, clientEvents(r, client)...)
		if s := spans[r]; s != nil {
			if se := serverEvents(s, server); len(se) > 0 {
				e.ServerSpans++
				evs = append(evs, meta("thread_name", requestsPID, server, r.RequestID+" server (vLLM span)"))
				evs = append(evs, se...)
			}
		}
	}
	engineEvs, n := o.engineEvents()
	evs, e.Engines = append(evs, engineEvs...), n
	e.TimeZeroUnixNS = timeZero(evs)
	return e, writeTrace(filepath.Join(dir, TimelineFile), inRange(evs, e.TimeZeroUnixNS), e.TimeZeroUnixNS)
}

// maxOffsetMS bounds a latency or chunk offset drawn (about 11.6 days): a larger one, from a
// corrupt record, is not drawn.
const maxOffsetMS = 1e12

// inRange drops the events whose time from zero, or whose end, does not fit in an int64 of
// nanoseconds (records whose times lie centuries apart), so that every ts and dur written is
// non-negative.
func inRange(evs []event, zero int64) []event {
	out := evs[:0]
	for _, e := range evs {
		if e.ph == "M" || (e.atNS-zero >= 0 && e.durN >= 0 && e.atNS-zero+e.durN >= 0) {
			out = append(out, e)
		}
	}
	return out
}

// meta is a ph M event naming a process (process_name) or thread (thread_name).
func meta(kind string, pid, tid int, name string) event {
	return event{name: kind, ph: "M", pid: pid, tid: tid, args: map[string]any{"name": name}}
}

// spansOf finds each request's joined span record: join.Result.Joined holds the span's own
// attribute map, so the record is the span whose Attributes is that map.
func (o *output) spansOf(reqs []*artifact.Request) map[*artifact.Request]*artifact.Span {
	want := map[uintptr]*artifact.Request{}
	for _, r := range reqs {
		if r.XRequestID == nil {
			continue
		}
		if attrs, ok := o.t.join.Joined[*r.XRequestID]; ok && attrs != nil {
			want[reflect.ValueOf(attrs).Pointer()] = r
		}
	}
	out := map[*artifact.Request]*artifact.Span{}
	for _, s := range o.spans {
		if s.Attributes == nil {
			continue
		}
		if r, ok := want[reflect.ValueOf(s.Attributes).Pointer()]; ok {
			out[r] = s
		}
	}
	return out
}

// clientEvents are request r's client events on thread tid.
func clientEvents(r *artifact.Request, tid int) []event {
	send := *r.StartedAtNS
	args := map[string]any{"request_id": r.RequestID, "case_id": r.CaseID, "status": r.Status}
	if r.XRequestID != nil {
		args["x_request_id"] = *r.XRequestID
	}
	end := send
	if r.EndedAtNS != nil && *r.EndedAtNS > send {
		end = *r.EndedAtNS
	}
	evs := []event{{name: "request", ph: "X", atNS: send, durN: end - send, pid: requestsPID, tid: tid, args: args}}
	at := func(ms *float64) (int64, bool) {
		if ms == nil || !finite(*ms) || *ms < 0 || *ms > maxOffsetMS {
			return 0, false
		}
		return send + int64(*ms*1e6), true
	}
	fb, hasFB := at(r.FirstChunkLatencyMS)
	ft, hasFT := at(r.TTFTMS)
	if hasFB {
		evs = append(evs, event{name: "to first byte", ph: "X", atNS: send, durN: fb - send, pid: requestsPID, tid: tid},
			event{name: "first byte", ph: "i", atNS: fb, pid: requestsPID, tid: tid})
	}
	if hasFB && hasFT && ft >= fb {
		evs = append(evs, event{name: "first byte to first token", ph: "X", atNS: fb, durN: ft - fb, pid: requestsPID, tid: tid})
	}
	if hasFT {
		evs = append(evs, event{name: "first token (TTFT)", ph: "i", atNS: ft, pid: requestsPID, tid: tid})
		offMS := 0.0 // from the first token: a float64 of Unix ns has only 256 ns steps
		for k, gap := range r.ChunkInterarrivalMS {
			if !finite(gap) || gap < 0 || offMS+gap > maxOffsetMS {
				break
			}
			offMS += gap
			evs = append(evs, event{name: "chunk", ph: "i", atNS: ft + int64(math.Round(offMS*1e6)), pid: requestsPID, tid: tid,
				args: map[string]any{"chunk": k + 2, "gap_ms": gap}})
		}
	}
	return evs
}

// serverEvents are span s's events on thread tid: the span from its start to its end, and
// its queue, prefill and decode times (gen_ai.latency.*, seconds) laid end to end so that
// decode ends at the span's end. A span without both times gives none.
func serverEvents(s *artifact.Span, tid int) []event {
	if s.StartUnixNS == nil || s.EndUnixNS == nil || *s.EndUnixNS < *s.StartUnixNS {
		return nil
	}
	start, end := *s.StartUnixNS, *s.EndUnixNS
	args := map[string]any{"clock_domain": s.ClockDomain}
	if s.TraceID != nil {
		args["trace_id"] = *s.TraceID
	}
	evs := []event{{name: "vLLM llm_request span", ph: "X", atNS: start, durN: end - start, pid: requestsPID, tid: tid, args: args}}
	t := end
	var phases []event
	for _, ph := range []struct{ name, attr string }{{"decode", artifact.AttrTimeInModelDecode},
		{"prefill", artifact.AttrTimeInModelPrefill}, {"queue", artifact.AttrTimeInQueue}} {
		v, reason := artifact.SpanLatencySeconds(s.Attributes, ph.attr)
		if reason != "" || v > maxOffsetMS/1e3 {
			break
		}
		d := int64(v * 1e9)
		t -= d
		phases = append(phases, event{name: ph.name, ph: "X", atNS: t, durN: d, pid: requestsPID, tid: tid,
			args: map[string]any{ph.attr: v}})
	}
	slices.Reverse(phases)
	return append(evs, phases...)
}

// engineEvents are each engine's process name, its gauges as counters (one C event per
// sample) and its imported steps (stepEvents) on thread engineStepsTID; an engine is a
// scraped engine label or a step's worker id (its rank: the same id). n is the number of
// engines.
func (o *output) engineEvents() (evs []event, n int) {
	ids := map[string]bool{}
	for g := range gauges {
		for _, id := range o.workers.workers(g) {
			ids[id] = true
		}
	}
	for _, id := range o.batches.workers {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	pids := map[string]int{}
	for k, id := range sorted {
		pid := enginePIDBase + k
		pids[id] = pid
		evs = append(evs, meta("process_name", pid, 0, "engine "+id+" (vLLM /metrics, imported steps)"))
		for g, ga := range gauges {
			for _, s := range o.workers[g][id] {
				evs = append(evs, event{name: ga.name, ph: "C", atNS: s.atNS, pid: pid, args: map[string]any{ga.name: s.value}})
			}
		}
	}
	return append(evs, o.stepEvents(pids)...), len(sorted)
}

// stepEvents are the imported steps as X events over their host interval (client clock),
// named by the step's annotation, with its requests, tokens and GPU busy time as args, on
// thread engineStepsTID of their engine's process.
func (o *output) stepEvents(pids map[string]int) []event {
	var evs []event
	named := map[int]bool{}
	for i := range o.batches.rows {
		b := &o.batches.rows[i]
		pid := pids[b.worker]
		if !named[pid] {
			named[pid] = true
			evs = append(evs, meta("thread_name", pid, engineStepsTID, "steps (imported trace, rank "+b.worker+")"))
		}
		args := map[string]any{"batch_id": b.id, "step_index": b.it.StepIndex, "trace_file": b.it.TraceFile,
			"gpu_busy_ns": b.it.GPUBusyNS, "batch_phase": b.phase()}
		for k, v := range map[string]*int64{"context_requests": b.it.ContextRequests, "context_tokens": b.it.ContextTokens,
			"generation_requests": b.it.GenRequests, "generation_tokens": b.it.GenTokens} {
			if v != nil {
				args[k] = *v
			}
		}
		name := b.it.Name
		if name == "" {
			name = "step " + strconv.FormatInt(b.it.StepIndex, 10)
		}
		evs = append(evs, event{name: name, ph: "X", atNS: b.startNS, durN: max(b.endNS-b.startNS, 0), pid: pid, tid: engineStepsTID, args: args})
	}
	return evs
}

// stepsText is the manifest's timeline steps: how many were drawn, or why none.
func (o *output) stepsText() string {
	bs := &o.batches
	if len(bs.rows) == 0 {
		return bs.why
	}
	return fmt.Sprintf("%d imported steps on %d engines, thread %d of each engine's process, host intervals placed on the client clock (%s, offset %d ns)",
		len(bs.rows), len(bs.workers), engineStepsTID, bs.clock.Source, bs.clock.OffsetNS)
}

// timeZero is the earliest time of an event that has one (metadata has none); 0 for none.
func timeZero(evs []event) int64 {
	first, ok := int64(0), false
	for _, e := range evs {
		if e.ph != "M" && (!ok || e.atNS < first) {
			first, ok = e.atNS, true
		}
	}
	return first
}

// writeTrace writes {"traceEvents":[…],"displayTimeUnit":"ms","otherData":{…}} with ts and
// dur in microseconds since zero (three decimals: nanoseconds).
func writeTrace(path string, evs []event, zero int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(`{"displayTimeUnit":"ms","otherData":{"time_zero_unix_ns":` + strconv.FormatInt(zero, 10) + `},"traceEvents":[`)
	for i, e := range evs {
		if i > 0 {
			w.WriteString(",\n")
		}
		if err := writeEvent(w, e, zero); err != nil {
			f.Close()
			return err
		}
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("tables: %w", err)
	}
	return f.Close()
}

// writeEvent writes one event's JSON object.
func writeEvent(w *bufio.Writer, e event, zero int64) error {
	name, err := json.Marshal(e.name)
	if err != nil {
		return fmt.Errorf("tables: timeline: %w", err)
	}
	fmt.Fprintf(w, `{"name":%s,"ph":"%s","pid":%d,"tid":%d`, name, e.ph, e.pid, e.tid)
	if e.ph != "M" {
		w.WriteString(`,"ts":` + micros(e.atNS-zero))
	}
	switch e.ph {
	case "X":
		w.WriteString(`,"dur":` + micros(e.durN))
	case "i":
		w.WriteString(`,"s":"t"`)
	}
	if len(e.args) > 0 {
		a, err := json.Marshal(e.args)
		if err != nil {
			return fmt.Errorf("tables: timeline: %w", err)
		}
		w.WriteString(`,"args":`)
		w.Write(a)
	}
	w.WriteString("}")
	return nil
}

// micros is ns as microseconds with three decimals.
func micros(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64)
}
