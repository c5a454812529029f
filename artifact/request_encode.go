package artifact

import (
	"math"
	"strconv"
)

// requestLineHead is what every infer.request v1 line starts with.
const requestLineHead = `{"event_type":"infer.request","schema_version":1`

// appendRequestLine appends r's line — byte for byte what encoding/json (with HTML
// escaping off) writes for Request after the event_type and schema_version — with no
// reflection. It returns false, having appended an unspecified part, when a float is NaN
// or infinite: encoding/json refuses those, and the caller takes its path for the error.
func appendRequestLine(b []byte, r *Request) ([]byte, bool) {
	b = append(b, requestLineHead...)
	b = appendRequestIdentity(b, r)
	b, ok := appendRequestTiming(b, r)
	b, ok2 := appendRequestOutcome(b, r)
	return append(b, '}'), ok && ok2
}

// appendRequestIdentity, appendRequestTiming and appendRequestOutcome write the line's
// fields in three parts, none inlined, so that the deepest frame of this encoding — on
// every send goroutine, at the end of its life — is the largest part's rather than the sum
// of them (a frame that crosses the stack's end makes it grow: a copy of the whole stack).
//
//go:noinline
func appendRequestIdentity(b []byte, r *Request) []byte {
	b = append(b, `,"session_id":`...)
	b = appendStdString(b, r.SessionID)
	b = append(b, `,"request_id":`...)
	b = appendStdString(b, r.RequestID)
	b = append(b, `,"case_id":`...)
	b = appendStdString(b, r.CaseID)
	b = append(b, `,"phase":`...)
	b = appendStdString(b, r.Phase)
	b = append(b, `,"timestamp_ns":`...)
	b = appendIntPtr(b, r.TimestampNS)
	b = append(b, `,"started_at_ns":`...)
	b = appendIntPtr(b, r.StartedAtNS)
	b = append(b, `,"ended_at_ns":`...)
	b = appendIntPtr(b, r.EndedAtNS)
	b = append(b, `,"endpoint":`...)
	b = appendStdString(b, r.Endpoint)
	b = append(b, `,"model":`...)
	b = appendStdString(b, r.Model)
	b = append(b, `,"concurrency":`...)
	b = appendIntPtr(b, r.Concurrency)
	b = append(b, `,"max_in_flight":`...)
	b = appendIntPtr(b, r.MaxInFlight)
	b = append(b, `,"target_input_tokens":`...)
	b = strconv.AppendInt(b, r.TargetInputTokens, 10)
	b = append(b, `,"target_output_tokens":`...)
	b = strconv.AppendInt(b, r.TargetOutputTokens, 10)
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, r.Stream)
	b = append(b, `,"status":`...)
	b = appendStdString(b, r.Status)
	return b
}

//go:noinline
func appendRequestTiming(b []byte, r *Request) ([]byte, bool) {
	ok := true
	b = append(b, `,"e2e_latency_ms":`...)
	b = appendStdFloatPtr(b, r.E2ELatencyMS, &ok)
	b = append(b, `,"ttft_ms":`...)
	b = appendStdFloatPtr(b, r.TTFTMS, &ok)
	b = append(b, `,"first_chunk_latency_ms":`...)
	b = appendStdFloatPtr(b, r.FirstChunkLatencyMS, &ok)
	b = append(b, `,"chunk_interarrival_ms":[`...)
	for i, f := range r.ChunkInterarrivalMS {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStdFloat(b, f, &ok)
	}
	b = append(b, `],"prompt_tokens":`...)
	b = appendIntPtr(b, r.PromptTokens)
	b = append(b, `,"prompt_token_source":`...)
	b = appendStdString(b, r.PromptTokenSource)
	b = append(b, `,"prompt_token_exact":`...)
	b = strconv.AppendBool(b, r.PromptTokenExact)
	b = append(b, `,"output_tokens":`...)
	b = appendIntPtr(b, r.OutputTokens)
	b = append(b, `,"output_token_source":`...)
	b = appendStdString(b, r.OutputTokenSource)
	b = append(b, `,"output_token_exact":`...)
	b = strconv.AppendBool(b, r.OutputTokenExact)
	b = append(b, `,"total_tokens":`...)
	b = appendIntPtr(b, r.TotalTokens)
	return b, ok
}

//go:noinline
func appendRequestOutcome(b []byte, r *Request) ([]byte, bool) {
	ok := true
	b = append(b, `,"finish_reason":`...)
	b = appendStdStringPtr(b, r.FinishReason)
	b = append(b, `,"error_type":`...)
	b = appendStdStringPtr(b, r.ErrorType)
	b = append(b, `,"error_message":`...)
	b = appendStdStringPtr(b, r.ErrorMessage)
	b = append(b, `,"http_status":`...)
	b = appendIntPtr(b, r.HTTPStatus)
	b = append(b, `,"arrival_mode":`...)
	b = appendStdString(b, r.ArrivalMode)
	b = append(b, `,"request_index":`...)
	b = appendIntPtr(b, r.RequestIndex)
	b = append(b, `,"intended_at_ns":`...)
	b = appendIntPtr(b, r.IntendedAtNS)
	b = append(b, `,"dispatch_lag_ms":`...)
	b = appendStdFloatPtr(b, r.DispatchLagMS, &ok)
	b = append(b, `,"held_for_slot":`...)
	if r.HeldForSlot == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendBool(b, *r.HeldForSlot)
	}
	b = append(b, `,"in_flight_at_dispatch":`...)
	b = appendIntPtr(b, r.InFlightAtDispatch)
	b = append(b, `,"prompt_mode":`...)
	b = appendStdString(b, r.PromptMode)
	b = append(b, `,"prompt_id":`...)
	b = appendStdStringPtr(b, r.PromptID)
	b = append(b, `,"prefix_group":`...)
	b = appendIntPtr(b, r.PrefixGroup)
	b = append(b, `,"shared_prefix_tokens":`...)
	b = appendIntPtr(b, r.SharedPrefixTokens)
	b = append(b, `,"prompt_digest":`...)
	b = appendStdStringPtr(b, r.PromptDigest)
	b = append(b, `,"x_request_id":`...)
	b = appendStdStringPtr(b, r.XRequestID)
	b = append(b, `,"trace_id":`...)
	b = appendStdStringPtr(b, r.TraceID)
	b = append(b, `,"first_answer_ms":`...)
	b = appendStdFloatPtr(b, r.FirstAnswerMS, &ok)
	b = append(b, `,"server_error_type":`...)
	b = appendStdStringPtr(b, r.ServerErrorType)
	b = append(b, `,"server_error_code":`...)
	b = appendStdStringPtr(b, r.ServerErrorCode)
	if r.Shard != nil {
		b = append(b, `,"shard":`...)
		b = strconv.AppendInt(b, *r.Shard, 10)
	}
	return b, ok
}

func appendStdStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendStdString(b, *s)
}

func appendStdFloatPtr(b []byte, f *float64, ok *bool) []byte {
	if f == nil {
		return append(b, "null"...)
	}
	return appendStdFloat(b, *f, ok)
}

// appendStdFloat writes f as encoding/json writes a float64 (appendFiniteFloat); a NaN or
// infinite f sets *ok to false.
func appendStdFloat(b []byte, f float64, ok *bool) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		*ok = false
		return b
	}
	return appendFiniteFloat(b, f)
}

// appendFiniteFloat writes a finite f as encoding/json writes a float64: the shortest digits
// that read back as f, in exponent form (a one-digit negative exponent as "e-7", not "e-07")
// outside [1e-6, 1e21), with no decimal point added to a whole number.
func appendFiniteFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}
