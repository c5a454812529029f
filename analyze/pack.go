package analyze

import (
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// packer copies the fields of decoded requests into shared blocks, so that a million
// requests are a few thousand allocations instead of tens of millions: strings are appended
// to a strings.Builder (its String() views never change as it grows within its capacity),
// numbers and chunk gaps to fixed-size slices that are never reallocated.
//
// Equal values are shared as well: low-cardinality strings have one copy (the value of an
// enumerated field is the constant itself), pointers to equal repetitive strings (internPtr)
// are one pointer, and a pointer to a bool or to a small integer (token counts, HTTP statuses,
// in-flight counts: 0 to smallInts−1) points into one table for the whole process. Packed
// records are therefore read, never written through. Values outside the Go heap (constants, the
// table) are also the cheapest for the garbage collector to mark, which keeps a million-request
// view about as cheap to collect as the smaller view the analysis had before it held the whole
// record.
type packer struct {
	text   strings.Builder
	ints   []int64
	floats []float64
	ns     []int32 // packed chunk gaps (packGaps)
	strs   []string
	names  map[string]string
	ptrs   map[string]*string // the shared pointers of internPtr
	// keepGaps: request leaves chunk gaps as float64 (ReadInputRecords)
	keepGaps bool
	// recent holds the value each internAt slot returned last
	recent [internSlots]string
}

const (
	textBlock   = 1 << 20
	intBlock    = 8 << 10
	floatBlock  = 64 << 10
	stringBlock = 4 << 10
	smallInts   = 8192
	maxNames    = 1 << 16
)

// smallIntTable holds the integers 0…smallInts−1 that every packed pointer to one of them
// shares.
var smallIntTable = func() (t [smallInts]int64) {
	for i := range t {
		t[i] = int64(i)
	}
	return t
}()

// boolTable holds false and true, shared by every packed pointer to a bool.
var boolTable = [2]bool{false, true}

// enumerated are the values of the record's enumerated fields: statuses, phases, arrival
// and prompt modes, token sources and finish reasons.
var enumerated = [...]string{
	artifact.RequestOK, artifact.RequestTimeout, artifact.RequestRejected, artifact.RequestUnreachable,
	artifact.RequestDeliveryUnknown, artifact.RequestError, artifact.RequestDropped, artifact.RequestCancelled,
	artifact.PhaseMeasured, artifact.PhaseWarmup,
	ModeClosed, ModeFixedRate, ModePoisson, ModeBurst, ModeReplay,
	"repeat", "unique", "shared-prefix",
	artifact.TokenSourceServerUsage, "tiktoken", "estimated",
	"stop", "length", "abort",
}

// knownStrings maps each enumerated value to itself, knownPtrs to its one pointer.
var knownStrings, knownPtrs = func() (map[string]string, map[string]*string) {
	strs, ptrs := map[string]string{}, map[string]*string{}
	for i, s := range enumerated {
		strs[s], ptrs[s] = s, &enumerated[i]
	}
	return strs, ptrs
}()

// intern returns one shared copy of a low-cardinality string.
func (p *packer) intern(s string) string {
	if v, ok := knownStrings[s]; ok {
		return v
	}
	if v, ok := p.names[s]; ok {
		return v
	}
	if p.names == nil {
		p.names = map[string]string{}
	}
	v := p.str(s)
	if len(p.names) < maxNames {
		p.names[v] = v
	}
	return v
}

// The internAt slots: one per interned field of a record.
const (
	slotSession = iota
	slotCase
	slotPhase
	slotEndpoint
	slotModel
	slotStatus
	slotPromptSource
	slotOutputSource
	slotArrival
	slotPromptMode
	internSlots
)

// internAt is intern, remembering the value per slot (a field of the record): consecutive
// records mostly repeat a field's value, and comparing with the last one is cheaper than the
// two map look-ups of intern. The value returned is one intern returned for s.
func (p *packer) internAt(slot int, s string) string {
	if v := p.recent[slot]; v == s {
		return v
	}
	v := p.intern(s)
	p.recent[slot] = v
	return v
}

// internPtr is strPtr for repetitive values (finish reasons, error types and messages
// repeat across requests): requests with equal values share one pointer, as they share one
// copy of the text.
func (p *packer) internPtr(s *string) *string {
	if s == nil {
		return nil
	}
	if v, ok := knownPtrs[*s]; ok {
		return v
	}
	if v, ok := p.ptrs[*s]; ok {
		return v
	}
	if p.ptrs == nil {
		p.ptrs = map[string]*string{}
	}
	if len(p.strs) == cap(p.strs) {
		p.strs = make([]string, 0, stringBlock)
	}
	p.strs = append(p.strs, p.intern(*s))
	v := &p.strs[len(p.strs)-1]
	if len(p.ptrs) < maxNames {
		p.ptrs[*v] = v
	}
	return v
}

// str copies s into the current text block.
func (p *packer) str(s string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > textBlock/4 {
		return strings.Clone(s)
	}
	if p.text.Cap()-p.text.Len() < len(s) {
		p.text = strings.Builder{}
		p.text.Grow(textBlock)
	}
	start := p.text.Len()
	p.text.WriteString(s)
	return p.text.String()[start:]
}

func (p *packer) strPtr(s *string) *string {
	if s == nil {
		return nil
	}
	if len(p.strs) == cap(p.strs) {
		p.strs = make([]string, 0, stringBlock)
	}
	p.strs = append(p.strs, p.str(*s))
	return &p.strs[len(p.strs)-1]
}

func (p *packer) i64(v *int64) *int64 {
	if v == nil {
		return nil
	}
	if n := *v; n >= 0 && n < smallInts {
		return &smallIntTable[n]
	}
	if len(p.ints) == cap(p.ints) {
		p.ints = make([]int64, 0, intBlock)
	}
	p.ints = append(p.ints, *v)
	return &p.ints[len(p.ints)-1]
}

func (p *packer) boolPtr(v *bool) *bool {
	if v == nil {
		return nil
	}
	if *v {
		return &boolTable[1]
	}
	return &boolTable[0]
}

func (p *packer) f64(v *float64) *float64 {
	if v == nil {
		return nil
	}
	if len(p.floats) == cap(p.floats) {
		p.floats = make([]float64, 0, floatBlock)
	}
	p.floats = append(p.floats, *v)
	return &p.floats[len(p.floats)-1]
}

// gaps copies a chunk-gap list; the result's capacity is its length, so appending to it
// never writes into a neighbour's gaps.
func (p *packer) gaps(v []float64) []float64 {
	if len(v) == 0 {
		if v == nil {
			return nil
		}
		return []float64{}
	}
	if len(v) > floatBlock/8 {
		return append([]float64(nil), v...)
	}
	if cap(p.floats)-len(p.floats) < len(v) {
		p.floats = make([]float64, 0, floatBlock)
	}
	start := len(p.floats)
	p.floats = append(p.floats, v...)
	return p.floats[start:len(p.floats):len(p.floats)]
}

// record copies r with every string, pointer and slice packed into p's blocks (nothing of r
// is retained); the copy equals r field for field. Low-cardinality strings (session, case,
// phase, endpoint, model, status, sources, modes, finish reasons, errors and the server's
// error types and codes) share one copy,
// TimestampNS shares StartedAtNS when they are equal (as inferprobe writes them), and
// RequestID shares the tail of XRequestID when that is "…-<request_id>".
func (p *packer) record(r *artifact.Request) artifact.Request {
	out := artifact.Request{
		SessionID:           p.internAt(slotSession, r.SessionID),
		CaseID:              p.internAt(slotCase, r.CaseID),
		Phase:               p.internAt(slotPhase, r.Phase),
		StartedAtNS:         p.i64(r.StartedAtNS),
		EndedAtNS:           p.i64(r.EndedAtNS),
		Endpoint:            p.internAt(slotEndpoint, r.Endpoint),
		Model:               p.internAt(slotModel, r.Model),
		Concurrency:         p.i64(r.Concurrency),
		MaxInFlight:         p.i64(r.MaxInFlight),
		TargetInputTokens:   r.TargetInputTokens,
		TargetOutputTokens:  r.TargetOutputTokens,
		Stream:              r.Stream,
		Status:              p.internAt(slotStatus, r.Status),
		E2ELatencyMS:        p.f64(r.E2ELatencyMS),
		TTFTMS:              p.f64(r.TTFTMS),
		FirstChunkLatencyMS: p.f64(r.FirstChunkLatencyMS),
		ChunkInterarrivalMS: p.gaps(r.ChunkInterarrivalMS),
		PromptTokens:        p.i64(r.PromptTokens),
		PromptTokenSource:   p.internAt(slotPromptSource, r.PromptTokenSource),
		PromptTokenExact:    r.PromptTokenExact,
		OutputTokens:        p.i64(r.OutputTokens),
		OutputTokenSource:   p.internAt(slotOutputSource, r.OutputTokenSource),
		OutputTokenExact:    r.OutputTokenExact,
		TotalTokens:         p.i64(r.TotalTokens),
		FinishReason:        p.internPtr(r.FinishReason),
		ErrorType:           p.internPtr(r.ErrorType),
		ErrorMessage:        p.internPtr(r.ErrorMessage),
		HTTPStatus:          p.i64(r.HTTPStatus),
		ArrivalMode:         p.internAt(slotArrival, r.ArrivalMode),
		RequestIndex:        p.i64(r.RequestIndex),
		IntendedAtNS:        p.i64(r.IntendedAtNS),
		DispatchLagMS:       p.f64(r.DispatchLagMS),
		HeldForSlot:         p.boolPtr(r.HeldForSlot),
		InFlightAtDispatch:  p.i64(r.InFlightAtDispatch),
		PromptMode:          p.internAt(slotPromptMode, r.PromptMode),
		PromptID:            p.strPtr(r.PromptID),
		PrefixGroup:         p.i64(r.PrefixGroup),
		SharedPrefixTokens:  p.i64(r.SharedPrefixTokens),
		PromptDigest:        p.strPtr(r.PromptDigest),
		XRequestID:          p.strPtr(r.XRequestID),
		TraceID:             p.strPtr(r.TraceID),
		FirstAnswerMS:       p.f64(r.FirstAnswerMS),
		ServerErrorType:     p.internPtr(r.ServerErrorType),
		ServerErrorCode:     p.internPtr(r.ServerErrorCode),
		Shard:               p.i64(r.Shard),
	}
	if r.TimestampNS != nil && out.StartedAtNS != nil && *r.TimestampNS == *out.StartedAtNS {
		out.TimestampNS = out.StartedAtNS
	} else {
		out.TimestampNS = p.i64(r.TimestampNS)
	}
	if x := out.XRequestID; x != nil && len(*x) > len(r.RequestID) && strings.HasSuffix(*x, r.RequestID) {
		out.RequestID = (*x)[len(*x)-len(r.RequestID):]
	} else {
		out.RequestID = p.str(r.RequestID)
	}
	return out
}

// request is the analysis view of r: record's copy, with its chunk gaps packed as whole
// nanoseconds (ChunkInterarrivalMS nil) when packGaps can. r is left as it was.
func (p *packer) request(r *artifact.Request) Request {
	if p.keepGaps {
		return Request{Request: p.record(r)}
	}
	first, n, ok := p.packGaps(r.ChunkInterarrivalMS)
	if !ok {
		return Request{Request: p.record(r)}
	}
	gaps := r.ChunkInterarrivalMS
	r.ChunkInterarrivalMS = nil
	out := Request{Request: p.record(r), gapCount: n, gapNS: first}
	r.ChunkInterarrivalMS = gaps
	return out
}

// joinKeys is join.RequestOf(r) with its strings copied into p's blocks; ok is false for a
// request never sent.
func (p *packer) joinKeys(r *artifact.Request) (join.Request, bool) {
	jr, ok := join.RequestOf(r)
	jr.XRequestID, jr.TraceID = p.str(jr.XRequestID), p.str(jr.TraceID)
	return jr, ok
}
