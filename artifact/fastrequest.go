package artifact

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// decodeRequestFast decodes an infer.request v1 line into r without
// reflection, with a handful of allocations instead of one per field. It
// handles exactly the JSON that MarshalLine writes (and any whitespace,
// order, duplicates and escapes), and gives up — returning false, leaving r
// in an unspecified state — on anything else: an unknown or differently
// cased key, a value of an unexpected type, an integer spelled as a float,
// a number out of range, invalid UTF-8, invalid JSON. The caller then
// decodes the line with encoding/json, which produces the result or the
// error. When it returns true, r equals what json.Unmarshal produces
// (FuzzRequestFastPath checks this).
func decodeRequestFast(data []byte, r *Request) bool {
	return decodeRequestFastIn(data, r, nil)
}

// decodeRequestFastIn is decodeRequestFast with the strings, pointer
// targets and chunk gaps of r carved from sc's reused memory when sc is not
// nil (r is then valid until sc decodes the next line), else allocated.
func decodeRequestFastIn(data []byte, r *Request, sc *requestScratch) bool {
	var d *reqDecoder
	if sc != nil {
		d = &sc.dec // reused: its arrays are overwritten, never read before written
		d.pos, d.sc = 0, sc
		d.strBuf = sc.text[:0]
		d.ints, d.floats, d.bools = sc.ints[:0], sc.floats[:0], sc.bools[:0]
	} else {
		d = new(reqDecoder)
		d.strBuf = d.bufArr[:0]
	}
	d.data = data
	d.refs = d.refsArr[:0]
	d.ws()
	if !d.consume('{') {
		return false
	}
	d.ws()
	if d.consume('}') {
		return d.end(r)
	}
	for {
		d.ws()
		key, ok := d.key()
		if !ok {
			return false
		}
		d.ws()
		if !d.consume(':') {
			return false
		}
		d.ws()
		if !d.field(r, key) {
			return false
		}
		d.ws()
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return d.end(r)
		}
		return false
	}
}

type strRef struct {
	dst        *string
	pdst       **string
	start, end int
	null       bool
}

type reqDecoder struct {
	refsArr [24]strRef // backing arrays on the decoder's (stack) frame
	bufArr  [512]byte
	data    []byte
	pos     int
	strBuf  []byte
	refs    []strRef
	ints    []int64
	floats  []float64
	bools   []bool
	sc      *requestScratch // reused memory for the result; nil: allocate
}

// field decodes the value of key into its Request field. It gives up on an
// unknown or differently cased key (encoding/json decides) and on a value
// the fast path does not take. The keys are split in two alphabetical
// halves, so each key still costs one switch.
func (d *reqDecoder) field(r *Request, key []byte) bool {
	if len(key) > 0 && key[0] < 'p' {
		return d.fieldAToO(r, key)
	}
	return d.fieldPToZ(r, key)
}

// fieldAToO decodes the fields whose keys start with a to o.
func (d *reqDecoder) fieldAToO(r *Request, key []byte) bool {
	switch string(key) {
	case "arrival_mode":
		return d.str(&r.ArrivalMode)
	case "case_id":
		return d.str(&r.CaseID)
	case "chunk_interarrival_ms":
		return d.floatSlice(&r.ChunkInterarrivalMS)
	case "concurrency":
		return d.intPtr(&r.Concurrency)
	case "dispatch_lag_ms":
		return d.floatPtr(&r.DispatchLagMS)
	case "e2e_latency_ms":
		return d.floatPtr(&r.E2ELatencyMS)
	case "ended_at_ns":
		return d.intPtr(&r.EndedAtNS)
	case "endpoint":
		return d.str(&r.Endpoint)
	case "error_message":
		return d.strPtr(&r.ErrorMessage)
	case "error_type":
		return d.strPtr(&r.ErrorType)
	case "event_type": // read by the reader already: its JSON type is checked
		_, _, ok := d.stringToken()
		return ok
	case "finish_reason":
		return d.strPtr(&r.FinishReason)
	case "first_answer_ms":
		return d.floatPtr(&r.FirstAnswerMS)
	case "first_chunk_latency_ms":
		return d.floatPtr(&r.FirstChunkLatencyMS)
	case "held_for_slot":
		return d.boolPtr(&r.HeldForSlot)
	case "http_status":
		return d.intPtr(&r.HTTPStatus)
	case "in_flight_at_dispatch":
		return d.intPtr(&r.InFlightAtDispatch)
	case "intended_at_ns":
		return d.intPtr(&r.IntendedAtNS)
	case "max_in_flight":
		return d.intPtr(&r.MaxInFlight)
	case "model":
		return d.str(&r.Model)
	case "output_token_exact":
		return d.boolean(&r.OutputTokenExact)
	case "output_token_source":
		return d.str(&r.OutputTokenSource)
	case "output_tokens":
		return d.intPtr(&r.OutputTokens)
	}
	return false // unknown or differently cased: encoding/json decides
}

// fieldPToZ decodes the fields whose keys start with p to z, and those of
// any other key (false).
func (d *reqDecoder) fieldPToZ(r *Request, key []byte) bool {
	switch string(key) {
	case "phase":
		return d.str(&r.Phase)
	case "prefix_group":
		return d.intPtr(&r.PrefixGroup)
	case "prompt_digest":
		return d.strPtr(&r.PromptDigest)
	case "prompt_id":
		return d.strPtr(&r.PromptID)
	case "prompt_mode":
		return d.str(&r.PromptMode)
	case "prompt_token_exact":
		return d.boolean(&r.PromptTokenExact)
	case "prompt_token_source":
		return d.str(&r.PromptTokenSource)
	case "prompt_tokens":
		return d.intPtr(&r.PromptTokens)
	case "request_id":
		return d.str(&r.RequestID)
	case "request_index":
		return d.intPtr(&r.RequestIndex)
	case "schema_version": // read by the reader already: its JSON type is checked
		_, ok := d.intLit()
		return ok
	case "server_error_code":
		return d.strPtr(&r.ServerErrorCode)
	case "server_error_type":
		return d.strPtr(&r.ServerErrorType)
	case "session_id":
		return d.str(&r.SessionID)
	case "shard":
		return d.intPtr(&r.Shard)
	case "shared_prefix_tokens":
		return d.intPtr(&r.SharedPrefixTokens)
	case "started_at_ns":
		return d.intPtr(&r.StartedAtNS)
	case "status":
		return d.str(&r.Status)
	case "stream":
		return d.boolean(&r.Stream)
	case "target_input_tokens":
		return d.integer(&r.TargetInputTokens)
	case "target_output_tokens":
		return d.integer(&r.TargetOutputTokens)
	case "timestamp_ns":
		return d.intPtr(&r.TimestampNS)
	case "total_tokens":
		return d.intPtr(&r.TotalTokens)
	case "trace_id":
		return d.strPtr(&r.TraceID)
	case "ttft_ms":
		return d.floatPtr(&r.TTFTMS)
	case "x_request_id":
		return d.strPtr(&r.XRequestID)
	}
	return false // unknown or differently cased: encoding/json decides
}

// end checks nothing follows the object and assigns the strings, all cut
// from one allocation.
func (d *reqDecoder) end(_ *Request) bool {
	d.ws()
	if d.pos != len(d.data) {
		return false
	}
	if len(d.refs) == 0 {
		return true
	}
	var all string
	var slab []string
	if d.sc != nil {
		d.sc.text = d.strBuf // keep a grown buffer for the next line
		all = unsafe.String(unsafe.SliceData(d.strBuf), len(d.strBuf))
		slab = d.sc.strs[:0]
	} else {
		all = string(d.strBuf)
	}
	for _, ref := range d.refs {
		if ref.dst != nil {
			*ref.dst = all[ref.start:ref.end]
			continue
		}
		if ref.null {
			*ref.pdst = nil
			continue
		}
		*ref.pdst = slabPtr(&slab, 9, all[ref.start:ref.end])
	}
	return true
}

// slabPtr returns a pointer to a copy of v, carved from *slab (made with
// room for n values on first use) while it has room, else allocated alone:
// the nullable fields of one record share a few allocations.
func slabPtr[T any](slab *[]T, n int, v T) *T {
	if *slab == nil {
		*slab = make([]T, 0, n)
	}
	if len(*slab) < cap(*slab) {
		*slab = append(*slab, v)
		return &(*slab)[len(*slab)-1]
	}
	return Ptr(v)
}

func (d *reqDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *reqDecoder) consume(c byte) bool {
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *reqDecoder) null() bool {
	if bytes.HasPrefix(d.data[d.pos:], []byte("null")) {
		d.pos += 4
		return true
	}
	return false
}

// key reads an object key without escapes or non-ASCII bytes.
func (d *reqDecoder) key() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			d.pos++
			return d.data[start : d.pos-1], true
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		d.pos++
	}
	return nil, false
}

// stringToken reads a JSON string and appends its value to strBuf,
// returning the value's span there.
func (d *reqDecoder) stringToken() (int, int, bool) {
	if !d.consume('"') {
		return 0, 0, false
	}
	start := d.pos
	plain := true
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			raw := d.data[start : d.pos-1]
			if plain {
				s := len(d.strBuf)
				d.strBuf = append(d.strBuf, raw...)
				return s, len(d.strBuf), true
			}
			// Escapes or non-ASCII: let encoding/json unquote it, with its
			// exact rules (U+FFFD for invalid UTF-8 and lone surrogates).
			var v string
			if err := json.Unmarshal(d.data[start-1:d.pos], &v); err != nil {
				return 0, 0, false
			}
			s := len(d.strBuf)
			d.strBuf = append(d.strBuf, v...)
			return s, len(d.strBuf), true
		case c == '\\':
			plain = false
			d.pos += 2 // the escaped byte cannot end the string
		case c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			plain = false
			d.pos++
		default:
			d.pos++
		}
	}
	return 0, 0, false
}

func (d *reqDecoder) str(dst *string) bool {
	if d.null() {
		return true // encoding/json leaves a non-pointer unchanged on null
	}
	s, e, ok := d.stringToken()
	if ok {
		d.refs = append(d.refs, strRef{dst: dst, start: s, end: e})
	}
	return ok
}

func (d *reqDecoder) strPtr(dst **string) bool {
	if d.null() {
		d.refs = append(d.refs, strRef{pdst: dst, null: true})
		return true
	}
	s, e, ok := d.stringToken()
	if ok {
		d.refs = append(d.refs, strRef{pdst: dst, start: s, end: e})
	}
	return ok
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// intLit reads an integer literal; a fraction or exponent gives up.
func (d *reqDecoder) intLit() (int64, bool) {
	start := d.pos
	neg := d.consume('-')
	if d.pos >= len(d.data) || !isDigit(d.data[d.pos]) {
		return 0, false
	}
	digits := d.pos
	if d.data[d.pos] == '0' {
		d.pos++
	} else {
		for d.pos < len(d.data) && isDigit(d.data[d.pos]) {
			d.pos++
		}
	}
	if d.pos < len(d.data) {
		if c := d.data[d.pos]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if d.pos-digits > 18 {
		n, err := strconv.ParseInt(string(d.data[start:d.pos]), 10, 64)
		return n, err == nil
	}
	var n int64
	for _, c := range d.data[digits:d.pos] {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func (d *reqDecoder) integer(dst *int64) bool {
	if d.null() {
		return true
	}
	n, ok := d.intLit()
	if ok {
		*dst = n
	}
	return ok
}

func (d *reqDecoder) intPtr(dst **int64) bool {
	if d.null() {
		*dst = nil
		return true
	}
	n, ok := d.intLit()
	if !ok {
		return false
	}
	*dst = slabPtr(&d.ints, 16, n)
	return true
}

// floatLit reads a number with JSON's grammar (see numberLen).
func (d *reqDecoder) floatLit() (float64, bool) {
	n := numberLen(d.data[d.pos:])
	if n == 0 {
		return 0, false
	}
	f, ok := parseJSONFloat(d.data[d.pos : d.pos+n])
	d.pos += n
	return f, ok
}

func (d *reqDecoder) floatPtr(dst **float64) bool {
	if d.null() {
		*dst = nil
		return true
	}
	f, ok := d.floatLit()
	if !ok {
		return false
	}
	*dst = slabPtr(&d.floats, 6, f)
	return true
}

func (d *reqDecoder) floatSlice(dst *[]float64) bool {
	if d.null() {
		*dst = nil
		return true
	}
	if !d.consume('[') {
		return false
	}
	end := bytes.IndexByte(d.data[d.pos:], ']')
	if end < 0 {
		return false
	}
	n := bytes.Count(d.data[d.pos:d.pos+end], []byte{','}) + 1
	var out []float64
	if d.sc != nil {
		if cap(d.sc.gaps) < n {
			d.sc.gaps = make([]float64, 0, n)
		}
		out = d.sc.gaps[:0]
	} else {
		out = make([]float64, 0, n)
	}
	d.ws()
	if d.consume(']') {
		*dst = out[:0:0]
		return true
	}
	for {
		d.ws()
		f, ok := d.floatLit()
		if !ok {
			return false
		}
		out = append(out, f)
		d.ws()
		if d.consume(',') {
			continue
		}
		if d.consume(']') {
			*dst = out
			return true
		}
		return false
	}
}

func (d *reqDecoder) boolLit() (bool, bool) {
	rest := d.data[d.pos:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		d.pos += 4
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		d.pos += 5
		return false, true
	}
	return false, false
}

func (d *reqDecoder) boolean(dst *bool) bool {
	if d.null() {
		return true
	}
	b, ok := d.boolLit()
	if ok {
		*dst = b
	}
	return ok
}

func (d *reqDecoder) boolPtr(dst **bool) bool {
	if d.null() {
		*dst = nil
		return true
	}
	b, ok := d.boolLit()
	if !ok {
		return false
	}
	*dst = slabPtr(&d.bools, 2, b)
	return true
}
