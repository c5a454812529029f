package receiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// ServeHTTP handles POST /v1/traces (see Receiver for the answers). An
// HTTP/2 request with a gRPC content type is handed to the receiver's gRPC
// service.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
		r.c.grpcOnHTTP.Add(1)
		r.grpc.ServeHTTP(w, req)
		return
	}
	if !r.route(w, req) {
		return
	}
	r.c.httpRequests.Add(1)
	format, gz, ref := r.media(req.Header)
	if ref == nil {
		ref = r.admitHTTP(req.Context(), req.ContentLength, gz)
	}
	if ref != nil {
		if answers[ref.outcome].retryable {
			r.leaveUnread(w, req)
		}
		r.writeRefusal(w, format, ref)
		return
	}
	defer r.leave()
	if ref := r.exportHTTP(w, req, format, gz); ref != nil {
		r.writeRefusal(w, format, ref)
	}
}

// A body refused retryably before it was read is read and discarded, so that
// the exporter's retry reuses the connection, when its Content-Length is at
// most maxDrainBytes (64 KiB), or at most maxLargeDrainBytes (4 MiB, above
// any vLLM batch: a 512-span export is about 300 kB) while fewer than
// maxLargeDrains such large bodies are being drained at once. Otherwise
// (a flood: many large refusals at once; or a body of unknown length) it is
// left unread and the answer closes the connection (Connection: close):
// reading every refused body under a flood took a third of the receiver's
// core at 10× its capacity, which the consumer needs, while one exporter
// refused now and then keeps its connection and gets a clean 429/503.
const (
	maxDrainBytes      = 64 << 10
	maxLargeDrainBytes = 4 << 20
	maxLargeDrains     = 2
)

// leaveUnread settles the unread body of a request refused retryably before
// it was read: drained as the constants above say; otherwise, on HTTP/1.x,
// the answer closes the connection without reading it (counted in
// Stats.ClosedUnread). HTTP/2 needs neither: its server resets the
// request's stream.
func (r *Receiver) leaveUnread(w http.ResponseWriter, req *http.Request) {
	n := req.ContentLength
	if n >= 0 && n <= maxDrainBytes {
		_, _ = io.CopyN(io.Discard, req.Body, maxDrainBytes)
		return
	}
	if n >= 0 && n <= maxLargeDrainBytes {
		select {
		case r.drains <- struct{}{}:
			_, _ = io.CopyN(io.Discard, req.Body, maxLargeDrainBytes)
			<-r.drains
			return
		default:
		}
	}
	if req.ProtoMajor == 1 {
		r.c.closedUnread.Add(1)
		w.Header().Set("Connection", "close")
	}
}

// route answers a request for another path (404) or with another method
// than POST (405, with Allow) in plain text, and reports whether the
// request is an export to handle.
func (r *Receiver) route(w http.ResponseWriter, req *http.Request) bool {
	if req.URL.Path != TracesPath {
		r.c.notFound.Add(1)
		http.Error(w, "404 not found: OTLP traces are posted to "+TracesPath, http.StatusNotFound)
		return false
	}
	if req.Method != http.MethodPost {
		r.c.methodNotAllowed.Add(1)
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "405 method not allowed: use POST", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

// media reads the body's format and whether it is gzip-compressed from the
// Content-Type and Content-Encoding headers, refusing (outcomeUnsupportedMedia)
// any other type or encoding. format is the encoding to answer in, even
// with a refusal.
func (r *Receiver) media(h http.Header) (format bodyFormat, gz bool, ref *refusal) {
	format, ok := mediaFormat(h.Get("Content-Type"))
	if !ok {
		return format, false, r.refuse(outcomeUnsupportedMedia,
			fmt.Sprintf("unsupported Content-Type %q: use application/x-protobuf or application/json", truncate(h.Get("Content-Type"), 80)))
	}
	gz, ok = contentEncoding(h.Get("Content-Encoding"))
	if !ok {
		return format, false, r.refuse(outcomeUnsupportedMedia,
			fmt.Sprintf("unsupported Content-Encoding %q: use gzip or none", truncate(h.Get("Content-Encoding"), 80)))
	}
	return format, gz, nil
}

// admitHTTP decides, before the body is read, whether an export is read at
// all: refused while stopping, when its Content-Length (-1 when unknown)
// is over the wire limit, and as enterWaiting decides (the queue charge of
// an uncompressed body of known length is 3 bytes per byte): without room
// it waits, its body unread, at most AdmissionWait while ctx lasts. An
// admitted export holds a slot until leave.
func (r *Receiver) admitHTTP(ctx context.Context, contentLength int64, gz bool) *refusal {
	if ref := r.checkStopping(); ref != nil {
		return ref
	}
	max := r.opts.MaxBodyBytes
	if contentLength > wireLimit(max, gz) {
		return r.refuse(outcomeTooLarge, fmt.Sprintf("body of %d bytes is over the %d-byte limit", contentLength, max))
	}
	var expect int64 // the queue charge the body implies, when its length is known
	if !gz && contentLength > 0 {
		expect = 3 * contentLength
	}
	return r.enterWaiting(ctx, expect)
}

// exportHTTP reads an admitted export's body (charged on the memory
// limiter as it grows), pre-scans, decodes and accepts it, and answers 200
// with the ExportTraceServiceResponse in the request's format; a refusal is
// returned unanswered. The charge is released when it returns.
func (r *Receiver) exportHTTP(w http.ResponseWriter, req *http.Request, format bodyFormat, gz bool) *refusal {
	res := reservation{l: &r.mem}
	defer res.release()
	max := r.opts.MaxBodyBytes
	hint := int64(0)
	if !gz && req.ContentLength > 0 {
		hint = req.ContentLength
	}
	bp := getBuffer()
	defer putBuffer(bp)
	body, err := readBody(w, req.Body, gz, max, wireLimit(max, gz), hint, &res, *bp)
	*bp = body[:0]
	if n := int64(cap(body)); n > maxPooledBuffer {
		defer func() { *bp = nil; res.retire(n) }() // garbage once answered: not pooled
	}
	if err != nil {
		return r.bodyRefusal(err, max)
	}
	if format == formatProtobuf && r.skipUnwanted(body, &r.c.spansHTTPProtobuf) {
		writeExportResponse(w, format, conversion{})
		return nil
	}
	conv, ref := r.decodeExport(body, format, &res, artifact.SpanSourceHTTP, peerHost(req.RemoteAddr))
	if ref != nil {
		return ref
	}
	conv, ref = r.accept(conv, len(body))
	if ref != nil {
		return ref
	}
	if format == formatJSON {
		r.c.spansHTTPJSON.Add(int64(len(conv.records)))
	} else {
		r.c.spansHTTPProtobuf.Add(int64(len(conv.records)))
	}
	writeExportResponse(w, format, conv)
	return nil
}

// bodyRefusal is the refusal of a body readBody could not read.
func (r *Receiver) bodyRefusal(err error, max int64) *refusal {
	var me *memoryError
	switch {
	case errors.As(err, &me):
		return r.refuse(outcomeMemory, me.Error())
	case errors.Is(err, errTooLarge):
		return r.refuse(outcomeTooLarge, fmt.Sprintf("body is over the %d-byte limit (after decompression)", max))
	case errors.Is(err, errTimeout):
		return r.refuse(outcomeTimeout, "")
	default:
		return r.refuse(outcomeBadRequest, err.Error())
	}
}

// writeExportResponse answers an accepted export with its
// ExportTraceServiceResponse in the request's format.
func writeExportResponse(w http.ResponseWriter, format bodyFormat, conv conversion) {
	resp := exportResponse(conv)
	var out []byte
	var err error
	if format == formatJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil { // cannot happen for a response message
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", format.contentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(answers[conv.outcome()].httpStatus)
	_, _ = w.Write(out)
}

// bodyFormat is the encoding of an OTLP/HTTP body.
type bodyFormat int

const (
	formatProtobuf bodyFormat = iota
	formatJSON
)

func (f bodyFormat) String() string {
	if f == formatJSON {
		return "JSON"
	}
	return "protobuf"
}

func (f bodyFormat) contentType() string {
	if f == formatJSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// mediaFormat reads a Content-Type: application/x-protobuf (or
// application/protobuf) and application/json, with any parameters. For an
// unsupported type it returns the format to answer in (JSON when the type
// mentions json) and false.
func mediaFormat(ct string) (bodyFormat, bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		mt = ""
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return formatProtobuf, true
	case "application/json":
		return formatJSON, true
	}
	if strings.Contains(strings.ToLower(ct), "json") {
		return formatJSON, false
	}
	return formatProtobuf, false
}

// contentEncoding accepts no encoding, identity and gzip.
func contentEncoding(ce string) (gz bool, ok bool) {
	switch strings.ToLower(strings.TrimSpace(ce)) {
	case "", "identity":
		return false, true
	case "gzip", "x-gzip":
		return true, true
	}
	return false, false
}

// wireLimit is the most body bytes read off the wire: the limit itself, or
// for gzip a little more (deflate's worst case expands stored data by
// 5 bytes per 64 KiB block, plus headers).
func wireLimit(max int64, gz bool) int64 {
	if !gz {
		return max
	}
	return max + max/1024 + 1<<16
}

var (
	errTooLarge = errors.New("body over the limit")
	errTimeout  = errors.New("body read timed out")
)

var gzipReaders sync.Pool

// readBody reads an HTTP body into buf (reused from its start): at most
// wireMax bytes off the wire, at most max bytes after decompression
// (errTooLarge beyond, without reading further: a gzip bomb is never
// inflated past max+1 bytes). hint is the body's length when known (0
// otherwise). Every byte of the buffer's capacity is charged on res before
// it is allocated: a *memoryError when the limiter cannot hold it now.
func readBody(w http.ResponseWriter, rc io.ReadCloser, gz bool, max, wireMax, hint int64, res *reservation, buf []byte) ([]byte, error) {
	body := http.MaxBytesReader(w, rc, wireMax)
	var src io.Reader = body
	if gz {
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(body)
		} else {
			err = zr.Reset(body)
		}
		if err != nil {
			return buf[:0], readError(err, gz)
		}
		defer gzipReaders.Put(zr)
		src = zr
	}
	buf = buf[:0]
	if hint > 0 && int64(cap(buf)) < hint+1 {
		buf = nil // a buffer of the known length is allocated (and charged) below
	}
	if err := res.grow(int64(cap(buf))); err != nil {
		return buf, err
	}
	if hint > 0 && buf == nil {
		if err := res.grow(hint + 1); err != nil {
			return buf, err
		}
		buf = make([]byte, 0, hint+1)
	}
	buf, err := readCharged(src, buf, max, res)
	if err != nil && !errors.Is(err, errTooLarge) {
		var me *memoryError
		if !errors.As(err, &me) {
			err = readError(err, gz)
		}
	}
	return buf, err
}

// readCharged appends src to buf until EOF, at most limit+1 bytes
// (errTooLarge beyond), doubling the buffer (from 64 KiB) as it fills: each
// new buffer charged on res before it is allocated, and the outgrown one
// retired (garbage, charged until a collection) when it is of minRetired or
// more, else released.
func readCharged(src io.Reader, buf []byte, limit int64, res *reservation) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			want := min(max(2*cap(buf), 64<<10), int(limit)+1)
			if want <= cap(buf) {
				return buf, errTooLarge
			}
			if err := res.grow(int64(want)); err != nil {
				return buf, err
			}
			nb := make([]byte, len(buf), want)
			copy(nb, buf)
			old := int64(cap(buf))
			buf = nb
			if old >= minRetired {
				res.retire(old)
			} else {
				res.shrink(old) // small garbage: the collector's own pacing frees it
			}
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readError is the error of a failed body read: errTooLarge past the wire
// limit, errTimeout, or the error itself named as a gzip or read error.
func readError(err error, gz bool) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errTooLarge
	case isTimeout(err):
		return errTimeout
	case gz:
		return fmt.Errorf("invalid gzip body: %v", err)
	default:
		return fmt.Errorf("reading the body: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// decodeJSONExport decodes an OTLP JSON ExportTraceServiceRequest. The text
// must be one valid JSON object (pdata's decoder alone tolerates trailing
// garbage). Trace and span ids must be hex: base64 ids have the wrong length
// and are refused by pdata; 64-bit integers may be numbers or strings and
// are read exactly.
func decodeJSONExport(req ptraceotlp.ExportRequest, body []byte) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	if !json.Valid(trimmed) {
		return errors.New("invalid JSON")
	}
	return req.UnmarshalJSON(trimmed)
}

// buffers holds body buffers of at most maxPooledBuffer bytes for reuse.
var buffers sync.Pool

const maxPooledBuffer = 4 << 20

func getBuffer() *[]byte {
	if b, ok := buffers.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func putBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		buffers.Put(b)
	}
}
