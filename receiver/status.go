package receiver

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// outcome is how the receiver answered one export, on either transport.
type outcome uint8

const (
	// outcomeAccepted: every span queued (200 / OK).
	outcomeAccepted outcome = iota
	// outcomePartial: the valid spans queued, the invalid ones rejected
	// (200 / OK with partial_success).
	outcomePartial
	// outcomeUnsupportedMedia: a Content-Type or Content-Encoding the
	// receiver does not read (HTTP only).
	outcomeUnsupportedMedia
	// outcomeTooLarge: a body over MaxBodyBytes, by its Content-Length or
	// after decompression (HTTP only: gRPC enforces its own message limit, and
	// answers RESOURCE_EXHAUSTED, the code this one carries too).
	outcomeTooLarge
	// outcomeTooComplex: an export over MaxExportElements elements or
	// MaxValueDepth nesting levels by its pre-scan, or one whose decode cost
	// is over MemoryLimitBytes even with no other export in flight: an
	// element bomb, never a batch of real spans. Permanent (413, and
	// ResourceExhausted without RetryInfo, which OTLP clients do not retry).
	outcomeTooComplex
	// outcomeMemory: the memory limiter cannot hold the export now (other
	// exports hold it): retryable.
	outcomeMemory
	// outcomeBusy: MaxConcurrentExports exports already in flight.
	outcomeBusy
	// outcomeQueueFull: the export does not fit the queue (or the queue is
	// near full before the body is read).
	outcomeQueueFull
	// outcomeStopping: Shutdown or Close has begun.
	outcomeStopping
	// outcomeTimeout: the body did not arrive within ReadTimeout (HTTP only).
	outcomeTimeout
	// outcomeBadRequest: an unreadable or undecodable body (HTTP only).
	outcomeBadRequest
)

// answer is what one outcome is answered with on each transport.
type answer struct {
	// httpStatus is the OTLP/HTTP status code.
	httpStatus int
	// grpcCode is the gRPC status code, and the code of the HTTP error
	// body's google.rpc.Status.
	grpcCode codes.Code
	// retryable answers carry Options.RetryAfter: the Retry-After header
	// (whole seconds, rounded up) over HTTP, a RetryInfo detail over gRPC.
	retryable bool
	// message is the fixed message of the outcome; "" when each refusal
	// carries its own (the limit or the error it met).
	message string
}

// answers maps every outcome to its answer on both transports. Retryable
// means the exporter should send the same export again later; the others
// are final for that export.
var answers = [...]answer{
	outcomeAccepted:         {httpStatus: http.StatusOK, grpcCode: codes.OK},
	outcomePartial:          {httpStatus: http.StatusOK, grpcCode: codes.OK},
	outcomeUnsupportedMedia: {httpStatus: http.StatusUnsupportedMediaType, grpcCode: codes.InvalidArgument},
	outcomeTooLarge:         {httpStatus: http.StatusRequestEntityTooLarge, grpcCode: codes.ResourceExhausted},
	outcomeTooComplex:       {httpStatus: http.StatusRequestEntityTooLarge, grpcCode: codes.ResourceExhausted},
	outcomeMemory:           {httpStatus: http.StatusTooManyRequests, grpcCode: codes.ResourceExhausted, retryable: true},
	outcomeBusy:             {httpStatus: http.StatusTooManyRequests, grpcCode: codes.ResourceExhausted, retryable: true},
	outcomeQueueFull:        {httpStatus: http.StatusServiceUnavailable, grpcCode: codes.Unavailable, retryable: true},
	outcomeStopping:         {httpStatus: http.StatusServiceUnavailable, grpcCode: codes.Unavailable, retryable: true, message: errStopped.Error()},
	outcomeTimeout:          {httpStatus: http.StatusRequestTimeout, grpcCode: codes.DeadlineExceeded, message: "the body did not arrive in time"},
	outcomeBadRequest:       {httpStatus: http.StatusBadRequest, grpcCode: codes.InvalidArgument},
}

// refusal is an export the receiver did not accept: its outcome and the
// message of the answer.
type refusal struct {
	outcome outcome
	msg     string
}

func (e *refusal) Error() string { return e.msg }

// refuse counts a refusal of outcome o and returns it. detail is the
// message, used where the outcome has no fixed one.
func (r *Receiver) refuse(o outcome, detail string) *refusal {
	r.c.refused(o)
	if m := answers[o].message; m != "" {
		detail = m
	}
	return &refusal{outcome: o, msg: detail}
}

// refused counts one refusal in the counter of its outcome.
func (c *counters) refused(o outcome) {
	switch o {
	case outcomeUnsupportedMedia:
		c.unsupportedMedia.Add(1)
	case outcomeTooLarge:
		c.tooLarge.Add(1)
	case outcomeTooComplex:
		c.tooComplex.Add(1)
	case outcomeBusy:
		c.busy.Add(1)
	case outcomeMemory:
		c.memoryBusy.Add(1)
	case outcomeQueueFull:
		c.queueFull.Add(1)
	case outcomeStopping:
		c.afterStop.Add(1)
	case outcomeTimeout:
		c.timeouts.Add(1)
	case outcomeBadRequest:
		c.badRequests.Add(1)
	}
}

// retryAfter is the delay a refusal advertises: Options.RetryAfter for a
// retryable outcome, else 0 (none).
func (r *Receiver) retryAfter(o outcome) time.Duration {
	if answers[o].retryable {
		return r.opts.RetryAfter
	}
	return 0
}

// writeRefusal answers a refused OTLP/HTTP export.
func (r *Receiver) writeRefusal(w http.ResponseWriter, format bodyFormat, ref *refusal) {
	a := answers[ref.outcome]
	writeStatus(w, format, a.httpStatus, a.grpcCode, ref.msg, r.retryAfter(ref.outcome))
}

// grpcError is the gRPC status error of a refused export: with a RetryInfo
// detail when the outcome is retryable.
func (r *Receiver) grpcError(ref *refusal) error {
	code := answers[ref.outcome].grpcCode
	if delay := r.retryAfter(ref.outcome); delay > 0 {
		return retryStatus(code, ref.msg, delay)
	}
	return status.Error(code, ref.msg)
}

// retryStatus is a gRPC status with a RetryInfo detail (OTLP/gRPC
// throttling: the client waits RetryDelay before retrying).
func retryStatus(code codes.Code, msg string, delay time.Duration) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = d
	}
	return st.Err()
}

// writeStatus answers an error with a google.rpc.Status body in the
// request's format, and Retry-After (whole seconds, rounded up) when
// retry > 0.
func writeStatus(w http.ResponseWriter, format bodyFormat, httpCode int, code codes.Code, msg string, retry time.Duration) {
	st := &spb.Status{Code: int32(code), Message: msg}
	var body []byte
	var err error
	if format == formatJSON {
		body, err = protojson.Marshal(st)
	} else {
		body, err = proto.Marshal(st)
	}
	if err != nil {
		body = nil
	}
	h := w.Header()
	if retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Type", format.contentType())
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(httpCode)
	_, _ = w.Write(body)
}
