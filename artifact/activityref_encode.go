package artifact

import (
	"strconv"
	"sync/atomic"
)

// contextCache holds the encoding of the last Context encoded by appendContext: the records
// of one trace import share one Context value (same pointers), so it is encoded once.
type contextCache struct {
	ctx  Context
	json []byte
}

var lastContext atomic.Pointer[contextCache]

// appendContext appends the JSON of c (as encoding/json writes it).
func appendContext(b []byte, c Context) ([]byte, error) {
	if last := lastContext.Load(); last != nil && last.ctx == c {
		return append(b, last.json...), nil
	}
	j, err := encodeJSON(c)
	if err != nil {
		return nil, err
	}
	lastContext.Store(&contextCache{ctx: c, json: j})
	return append(b, j...), nil
}

func appendOptInt(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *v, 10)
}

// encodeActivityRef writes the record by hand, byte for byte what withKind and
// encoding/json write for it (TestActivityRefEncoding compares them): an import writes
// one per launch, millions for a large trace.
func encodeActivityRef(a *ActivityRef) ([]byte, error) {
	size := 2048 // a launch-detail record is ~1.2 KB: one allocation, room for the newline
	if a.Metadata.Name != nil {
		size += len(*a.Metadata.Name)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"event_type":"infer.activity_ref","schema_version":`...)
	b = strconv.AppendInt(b, ActivityRefSchemaVersion, 10)
	b = append(b, `,"context":`...)
	b, err := appendContext(b, a.Context)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"event_id":`...)
	b = appendString(b, a.EventID)
	b = append(b, `,"metadata":`...)
	b = appendActivityMetadata(b, &a.Metadata)
	b = append(b, `,"activity_ref":`...)
	b = appendString(b, a.ActivityRef)
	b = append(b, `,"activity_kind":`...)
	b = appendString(b, a.ActivityKind)
	b = append(b, `,"activity_domain":`...)
	b = appendString(b, a.ActivityDomain)
	b = append(b, `,"attribution_status":`...)
	b = appendString(b, a.AttributionStatus)
	b = append(b, `,"iteration_ref":`...)
	if a.IterationRef == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"producer_id":`...)
		b = appendString(b, a.IterationRef.ProducerID)
		b = append(b, `,"id":`...)
		b = appendString(b, a.IterationRef.ID)
		b = append(b, '}')
	}
	b = append(b, `,"correlation_scope":`...)
	b = appendString(b, a.CorrelationScope)
	b = append(b, `,"trace_attachment_id":`...)
	b = appendString(b, a.TraceAttachmentID)
	for _, f := range [...]struct {
		key string
		v   *int64
	}{{`,"runtime_correlation_id":`, a.RuntimeCorrelationID}, {`,"cuda_correlation_id":`, a.CUDACorrelationID},
		{`,"device_id":`, a.DeviceID}, {`,"stream_id":`, a.StreamID}, {`,"graph_id":`, a.GraphID}} {
		b = append(b, f.key...)
		b = appendOptInt(b, f.v)
	}
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, a.StartNS, 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, a.EndNS, 10)
	return append(b, '}'), nil
}

// appendActivityMetadata appends an activity ref's metadata object.
func appendActivityMetadata(b []byte, m *ActivityMetadata) []byte {
	b = append(b, `{"intervals":`...)
	if m.Intervals == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, iv := range m.Intervals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, iv[0], 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, iv[1], 10)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	b = append(b, `,"busy_ns":`...)
	b = strconv.AppendInt(b, m.BusyNS, 10)
	b = append(b, `,"summed_duration_ns":`...)
	b = strconv.AppendInt(b, m.SummedDurationNS, 10)
	b = append(b, `,"activities":`...)
	b = strconv.AppendInt(b, m.Activities, 10)
	if m.Name != nil {
		b = append(b, `,"name":`...)
		b = appendString(b, *m.Name)
	}
	b = append(b, `,"launch_name":`...)
	b = appendStringPtr(b, m.LaunchName)
	b = append(b, `,"unresolved_reason":`...)
	b = appendStringPtr(b, m.UnresolvedReason)
	return append(b, '}')
}
