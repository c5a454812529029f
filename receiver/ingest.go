package receiver

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Refusal causes of the queue.
var (
	errQueueFull = errors.New("span queue full")
	errStopped   = errors.New("the receiver is stopping")
)

// checkStopping refuses every export once Shutdown or Close has begun.
func (r *Receiver) checkStopping() *refusal {
	if r.stopping.Load() {
		return r.refuse(outcomeStopping, "")
	}
	return nil
}

// enter admits one export to be read and decoded, on either transport:
// refused early when the queue is near full (expect is the queue charge the
// body implies, 0 when unknown; see queue.admit), or when
// MaxConcurrentExports exports are already in flight. An admitted export
// holds a slot until leave.
func (r *Receiver) enter(expect int64) *refusal {
	return r.refusedUnless(r.tryEnter(expect))
}

// tryEnter is enter without counting: outcomeAccepted when admitted (a
// slot taken), else outcomeQueueFull or outcomeBusy and the message.
func (r *Receiver) tryEnter(expect int64) (outcome, string) {
	if err := r.q.admit(expect); err != nil {
		return outcomeQueueFull, err.Error()
	}
	select {
	case r.slots <- struct{}{}:
		return outcomeAccepted, ""
	default:
		return outcomeBusy, fmt.Sprintf("%d exports are already being decoded; retry later", cap(r.slots))
	}
}

// leave releases the slot of an export enter admitted, and wakes an export
// waiting for room.
func (r *Receiver) leave() {
	<-r.slots
	r.waits.notify()
}

// decodeExport pre-scans an export body (scanProtoExport or
// scanJSONExport), charges its decode cost on res, and only then converts
// it into records (see accept): a protobuf body straight from its wire
// bytes where convertProto vouches for it, else decoded with pdata and
// converted (convertTraces), each span stamped received now and its clock
// domain named after peer when its resource has no host.name. A body over
// the element or nesting limits, or whose cost could never fit the memory
// limiter, is refused for good (outcomeTooComplex); one the limiter cannot
// hold now, retryably (outcomeMemory); a malformed one is outcomeBadRequest.
func (r *Receiver) decodeExport(body []byte, format bodyFormat, res *reservation, source, peer string) (conversion, *refusal) {
	lim := scanLimits{maxElements: r.opts.MaxExportElements, maxDepth: r.opts.MaxValueDepth}
	var counts exportCounts
	var err error
	if format == formatJSON {
		counts, err = scanJSONExport(body, lim)
	} else {
		counts, err = scanProtoExport(body, lim)
	}
	switch {
	case errors.Is(err, errOverLimit):
		return conversion{}, r.refuse(outcomeTooComplex, err.Error())
	case err != nil && format == formatJSON:
		return conversion{}, r.refuse(outcomeBadRequest, "invalid JSON: "+truncate(err.Error(), 200))
	case err != nil:
		return conversion{}, r.refuse(outcomeBadRequest, "undecodable OTLP protobuf export: "+truncate(err.Error(), 200))
	}
	if err := res.growTo(decodeCost(len(body), &counts)); err != nil {
		var me *memoryError
		if errors.As(err, &me) && !me.never {
			return conversion{}, r.refuse(outcomeMemory, err.Error())
		}
		return conversion{}, r.refuse(outcomeTooComplex, err.Error())
	}
	now := r.opts.Now().UnixNano()
	o := convertOptions{
		sessionID: r.opts.SessionID, runID: r.opts.RunID, source: source,
		receivedAtNS: &now, peer: peer, strict: true,
	}
	if format == formatProtobuf {
		if conv, ok := convertProto(body, o, counts.Spans); ok {
			r.c.exportsDirect.Add(1)
			return conv, nil
		}
	}
	ereq := ptraceotlp.NewExportRequest()
	if format == formatJSON {
		err = decodeJSONExport(ereq, body)
	} else {
		err = ereq.UnmarshalProto(body)
	}
	if err != nil {
		return conversion{}, r.refuse(outcomeBadRequest, "undecodable OTLP "+format.String()+" export: "+truncate(err.Error(), 200))
	}
	return convertTraces(ereq.Traces(), o), nil
}

// SpanFilter is an optional interface of Options.Sink. WantsSpans reports
// whether the sink can use any span now (false: the daemon with no run
// attached, where no span can be routed anywhere). While it reports false,
// a protobuf export (OTLP/HTTP or gRPC) the receiver can prove decodable
// with every span valid by one walk of its wire bytes (skipScanProto) is
// accepted on that walk alone — not decoded, converted or queued — and its
// spans are handed to SkipSpans as a count instead of one by one to Write;
// any other export takes the full path. The choice is made when the export
// arrives. SkipSpans is called from the receiver's handlers: concurrently
// with Write and with itself.
type SpanFilter interface {
	WantsSpans() bool
	SkipSpans(n int)
}

// skipUnwanted accepts a protobuf export whose spans the sink does not want
// (see SpanFilter) on its wire walk alone, counting its spans as accepted
// on path (the per-transport counter), delivered and skipped, and reports
// whether it did. An export the walk cannot vouch for (false) takes the
// full path.
func (r *Receiver) skipUnwanted(body []byte, path *atomic.Int64) bool {
	f, ok := r.opts.Sink.(SpanFilter)
	if !ok || f.WantsSpans() || r.stopping.Load() {
		return false
	}
	n, ok := skipScanProto(body, scanLimits{maxElements: r.opts.MaxExportElements, maxDepth: r.opts.MaxValueDepth})
	if !ok {
		return false
	}
	f.SkipSpans(n)
	r.c.exportsAccepted.Add(1)
	path.Add(int64(n))
	r.c.spansDelivered.Add(int64(n))
	r.c.spansSkipped.Add(int64(n))
	return true
}

// accept queues the records of one export (decodeExport's). wireBytes
// sizes the queue charge: 3 bytes per wire byte plus 256 per span. It
// refuses an export that does not fit the queue whole (outcomeQueueFull)
// and any once the queue is closed (outcomeStopping); no span count is
// limited.
func (r *Receiver) accept(conv conversion, wireBytes int) (conversion, *refusal) {
	if len(conv.records) > 0 {
		size := 3*int64(wireBytes) + 256*int64(len(conv.records))
		if err := r.q.push(conv.records, size); err != nil {
			if errors.Is(err, errQueueFull) {
				return conversion{}, r.refuse(outcomeQueueFull, err.Error())
			}
			return conversion{}, r.refuse(outcomeStopping, err.Error())
		}
	}
	r.c.exportsAccepted.Add(1)
	if conv.rejected > 0 {
		r.c.spansRejected.Add(int64(conv.rejected))
		r.c.partialSucc.Add(1)
	}
	return conv, nil
}

// exportResponse is the ExportTraceServiceResponse of an accepted export:
// empty, or with partial_success (rejected_spans and the first reason) when
// spans were rejected.
func exportResponse(conv conversion) ptraceotlp.ExportResponse {
	resp := ptraceotlp.NewExportResponse()
	if conv.rejected > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(conv.rejected))
		msg := conv.reason
		if conv.rejected > 1 {
			msg = fmt.Sprintf("%d spans rejected; first: %s", conv.rejected, conv.reason)
		}
		ps.SetErrorMessage(msg)
	}
	return resp
}

// outcome is outcomePartial when spans were rejected, else outcomeAccepted.
func (c *conversion) outcome() outcome {
	if c.rejected > 0 {
		return outcomePartial
	}
	return outcomeAccepted
}

// peerHost returns the host of a "host:port" address.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
