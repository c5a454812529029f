package analyze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// Input is an artifact prepared for analysis: every record except the infer.request v1
// ones as artifact.ReadFile keeps them (Artifact; its Requests is nil when the Input was
// read by ReadInput), and the measured requests already in the analysis view, by case id, in
// file order (Cases). RequestRecords counts the infer.request v1 records of every phase
// (warmup included), which is what "the artifact has no infer.request" is judged by.
//
// The server-evidence fields of the requests (Span, SpanMissingReason, ServerAdmitted) are
// (re)set by each AnalyzeInput call from its Options.Server.
type Input struct {
	Artifact       *artifact.Artifact
	Cases          map[string][]Request
	RequestRecords int
	// Warmup holds the join keys of the warmup requests that were sent, so that a span of a
	// warmup request is told apart from one of another run.
	Warmup []join.Request
}

// NewInput prepares a loaded artifact for analysis: it groups the measured requests of
// a.Requests by case (each record embedded as it is, its slices and pointers shared, not
// copied) and keeps the warmup requests' join keys.
func NewInput(a *artifact.Artifact) *Input {
	in := &Input{Artifact: a, Cases: map[string][]Request{}, RequestRecords: len(a.Requests)}
	for i := range a.Requests {
		r := &a.Requests[i]
		if r.Phase != artifact.PhaseMeasured {
			if jr, ok := join.RequestOf(r); ok {
				in.Warmup = append(in.Warmup, jr)
			}
			continue
		}
		in.Cases[r.CaseID] = append(in.Cases[r.CaseID], Request{Request: *r})
	}
	return in
}

// Validate checks what every analysis needs (artifact.Artifact.Validate's rules, stormlog.md
// §6): at least one infer.session v1 record and one infer.request v1 record. The error wraps
// artifact.ErrInvalidArtifact.
func (in *Input) Validate() error {
	if in == nil || in.Artifact == nil {
		return fmt.Errorf("%w: no artifact", artifact.ErrInvalidArtifact)
	}
	a := in.Artifact
	name := a.Path
	if name == "" {
		name = "artifact"
	}
	if len(a.Sessions) == 0 {
		return fmt.Errorf("%w: %s has no infer.session record", artifact.ErrInvalidArtifact, name)
	}
	if in.RequestRecords == 0 {
		if n := a.Stats.Kinds[artifact.KindRequestV2]; n > 0 {
			return fmt.Errorf("%w: %s has no infer.request v1 record (only %d correlation-model infer.request v2 records)", artifact.ErrInvalidArtifact, name, n)
		}
		return fmt.Errorf("%w: %s has no infer.request record", artifact.ErrInvalidArtifact, name)
	}
	return nil
}

// presizeBudget bounds how many requests ReadInput reserves room for up front, from the
// workload's declared request count, so that a record claiming huge counts cannot make it
// allocate more than a real run's worth (320 bytes per request).
const presizeBudget = 2_000_000

// ReadInput streams the artifact at path straight into the analysis view: each measured
// infer.request v1 record is converted as it is read and the decoded record dropped, so
// memory grows with the analysis view only (about 0.7 KB per request with 16 chunk gaps)
// instead of holding every artifact.Request as well. Strings, numbers and chunk gaps of the
// requests are packed into shared blocks; repeated low-cardinality strings (session, case,
// status, sources, modes) share one copy. Warmup requests are counted, not kept. Every other
// record is kept as artifact.ReadFileContext keeps it, and a truncated last line is reported
// in Artifact.Truncated, not as an error.
//
// The file is cut into blocks of whole lines that several goroutines decode with
// artifact.Read (one per CPU, at most 8) while one goroutine merges their records in file
// order, so the result — records, Stats, line numbers in errors, truncation — is what one
// sequential artifact.Read of the file gives. ctx is checked between blocks.
//
// Errors: a missing or unreadable file and every read error wrap artifact.ErrInvalidArtifact
// (a missing file also fs.ErrNotExist), with the path and the 1-based line of a bad line;
// ctx's error is returned as is. ReadInput does not call Validate.
func ReadInput(ctx context.Context, path string) (*Input, error) {
	return readInput(ctx, path, readOptions{})
}

// readOptions tune readInput; zero values mean the defaults.
type readOptions struct {
	blockBytes   int // bytes per block before cutting at a newline (4 MiB)
	workers      int // decoding goroutines (GOMAXPROCS, at most 8)
	maxLineBytes int // artifact.Reader.MaxLineBytes (artifact.MaxLineBytes)
}

// block is a run of whole lines (the last block may end without a newline).
type block struct {
	data  []byte
	final bool
	err   error // a read error met after the previous block
	res   chan blockResult
}

// blockResult is a decoded block: its records in order, its read statistics (line numbers
// local to the block) and its error.
type blockResult struct {
	items []blockItem
	stats artifact.Stats
	err   error
}

// blockItem is one record of a block: an infer.request v1 (request; packed into req when
// measured, else its join keys in warmup when it was sent), or any other record (value, with
// raw for the kinds kept as JSON when repeated: infer.artifact and infer.workload).
type blockItem struct {
	value    artifact.Record
	raw      []byte
	kind     artifact.Kind
	request  bool
	measured bool
	sent     bool
	req      Request
	warmup   join.Request
}

func readInput(ctx context.Context, path string, o readOptions) (*Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	defer f.Close()
	return readFrom(ctx, f, path, o)
}

// readFrom is readInput over r; path names it in errors and Artifact.Path.
func readFrom(ctx context.Context, r io.Reader, path string, o readOptions) (*Input, error) {
	if o.blockBytes <= 0 {
		o.blockBytes = 4 << 20
	}
	if o.workers <= 0 {
		o.workers = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.maxLineBytes <= 0 {
		o.maxLineBytes = artifact.MaxLineBytes
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below, so it runs first): nothing outlives the file
	defer cancel()
	work := make(chan *block)
	order := make(chan *block, 2*o.workers)
	rc := newRecycler(o.workers + 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(work)
		splitBlocks(ctx, r, o, rc, work, order)
	}()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p packer
			rd := artifact.Reader{MaxLineBytes: o.maxLineBytes}
			for b := range work {
				if b.err != nil {
					b.res <- blockResult{err: b.err}
					continue
				}
				res := decodeBlock(rd, &p, b.data, rc.itemList())
				if res.err == nil {
					rc.release(b.data)
				}
				b.res <- res
			}
		}()
	}

	a := &artifact.Artifact{Path: path}
	in := &Input{Artifact: a, Cases: map[string][]Request{}}
	st := artifact.Stats{Kinds: map[artifact.Kind]int{}}
	budget := presizeBudget
	fail := func(err error) (*Input, error) {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for b := range order {
		var res blockResult
		select {
		case res = <-b.res:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		before := st.Lines
		if res.err != nil {
			var le *artifact.LineError
			if errors.As(res.err, &le) {
				return fail(&artifact.LineError{Line: le.Line + before, Field: le.Field, Err: le.Err})
			}
			if b.err != nil {
				// a read error of the file itself, after line `before`
				return fail(fmt.Errorf("%w: reading line %d: %w", artifact.ErrInvalidArtifact, before+1, res.err))
			}
			return fail(res.err)
		}
		for i := range res.items {
			it := &res.items[i]
			if it.request {
				in.RequestRecords++
				if !it.measured {
					if it.sent {
						in.Warmup = append(in.Warmup, it.warmup)
					}
					continue
				}
				id := it.req.CaseID
				list, seen := in.Cases[id]
				if !seen {
					if n := declaredCount(a.Workload, id); n > 0 && n <= budget {
						list = make([]Request, 0, n)
						budget -= n
					}
				}
				in.Cases[id] = append(list, it.req)
				continue
			}
			keep(a, it)
		}
		rc.releaseItems(res.items)
		st.Lines += res.stats.Lines
		st.Records += res.stats.Records
		st.BlankLines += res.stats.BlankLines
		for k, n := range res.stats.Kinds {
			st.Kinds[k] += n
		}
		if b.final {
			st.MissingFinalNewline = res.stats.MissingFinalNewline
			if t := res.stats.Truncated; t != nil {
				st.Truncated = &artifact.Truncation{Line: t.Line + before, Bytes: t.Bytes}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.Stats = st
	a.Truncated = st.Truncated
	return in, nil
}

// keep files a record other than an infer.request v1 the way artifact.ReadFileContext does.
func keep(a *artifact.Artifact, it *blockItem) {
	switch v := it.value.(type) {
	case *artifact.Session:
		a.Sessions = append(a.Sessions, *v)
	case *artifact.ArtifactHeader:
		if a.Header == nil {
			a.Header = v
		} else {
			a.Others = append(a.Others, artifact.Raw{Kind: it.kind, JSON: it.raw})
		}
	case *artifact.Workload:
		if a.Workload == nil {
			a.Workload = v
		} else {
			a.Others = append(a.Others, artifact.Raw{Kind: it.kind, JSON: it.raw})
		}
	case *artifact.SLORecord:
		a.SLOs = append(a.SLOs, *v)
	case *artifact.CacheState:
		a.CacheStates = append(a.CacheStates, *v)
	case *artifact.PhaseWindow:
		a.PhaseWindows = append(a.PhaseWindows, *v)
	case *artifact.Capabilities:
		a.Capabilities = append(a.Capabilities, *v)
	case *artifact.ClockAlignment:
		a.ClockAlignments = append(a.ClockAlignments, *v)
	case *artifact.Raw:
		a.Others = append(a.Others, *v)
	}
}

// decodeBlock reads one block with artifact.Reader, packing measured requests with p, into
// items (an empty list to append to).
func decodeBlock(rd artifact.Reader, p *packer, data []byte, items []blockItem) blockResult {
	st, err := rd.Read(bytes.NewReader(data), func(rec artifact.Line) error {
		switch v := rec.Value.(type) {
		case *artifact.Request:
			it := blockItem{request: true, measured: v.Phase == artifact.PhaseMeasured}
			if it.measured {
				it.req = Request{Request: p.record(v)}
			} else {
				it.warmup, it.sent = p.joinKeys(v)
			}
			items = append(items, it)
		case *artifact.ArtifactHeader, *artifact.Workload:
			items = append(items, blockItem{value: rec.Value, kind: rec.Kind, raw: bytes.Clone(rec.Raw)})
		default:
			items = append(items, blockItem{value: rec.Value, kind: rec.Kind})
		}
		return nil
	})
	return blockResult{items: items, stats: st, err: err}
}

// splitBlocks cuts the file into blocks that end at a newline (the final one at EOF) and
// hands each to the workers (work) and, in file order, to the merger (order). A line longer
// than the limit is handed over as it is, so that artifact.Read reports it; so is a read
// error. Block buffers come from rc; the partial line after a block's last newline is
// copied out before the block is handed over, so a recycled buffer is never read again. It
// stops when ctx ends.
func splitBlocks(ctx context.Context, r io.Reader, o readOptions, rc *recycler, work, order chan<- *block) {
	send := func(b *block) bool {
		b.res = make(chan blockResult, 1)
		select {
		case order <- b:
		case <-ctx.Done():
			return false
		}
		select {
		case work <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var carry []byte // the partial line after the last block handed over
	for {
		// a long line grows the buffer geometrically, not by one block at a time
		buf := append(rc.buffer(len(carry)+max(o.blockBytes, len(carry))), carry...)
		n, err := io.ReadFull(r, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			send(&block{data: buf, final: true})
			return
		case err != nil:
			// the complete lines before the error are still read, then the error
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				if !send(&block{data: buf[:i+1]}) {
					return
				}
			}
			send(&block{err: err, final: true})
			return
		}
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 {
			if len(buf) > o.maxLineBytes {
				// no newline within the limit: artifact.Read reports the line as too long
				send(&block{data: buf, final: true})
				return
			}
			carry = append(carry[:0], buf...)
			rc.release(buf)
			continue
		}
		carry = append(carry[:0], buf[i+1:]...)
		if !send(&block{data: buf[:i+1]}) {
			return
		}
	}
}

// recycler keeps the buffers of blocks already decoded (their bytes) and merged (their item
// lists) for the next blocks, so that reading a file allocates a few blocks' worth of them
// instead of the file's size again. Safe for concurrent use; at most free buffers of each
// kind are kept.
type recycler struct {
	data  chan []byte
	items chan []blockItem
}

func newRecycler(free int) *recycler {
	return &recycler{data: make(chan []byte, free), items: make(chan []blockItem, free)}
}

// buffer returns an empty byte slice with a capacity of at least n.
func (rc *recycler) buffer(n int) []byte {
	select {
	case b := <-rc.data:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

// release hands back a block's bytes once nothing reads them any more.
func (rc *recycler) release(b []byte) {
	select {
	case rc.data <- b[:0]:
	default:
	}
}

// itemList returns an empty item list.
func (rc *recycler) itemList() []blockItem {
	select {
	case l := <-rc.items:
		return l
	default:
		return nil
	}
}

// releaseItems hands back a merged block's item list, cleared so that it holds on to none
// of the records it carried.
func (rc *recycler) releaseItems(l []blockItem) {
	clear(l)
	select {
	case rc.items <- l[:0]:
	default:
	}
}

// declaredCount is the measured request count the workload declares for caseID (0 when it
// declares none, the case is unknown, or the count is out of range).
func declaredCount(w *artifact.Workload, caseID string) int {
	if w == nil || w.Measurement.RequestCount == nil {
		return 0
	}
	n := *w.Measurement.RequestCount
	if n <= 0 || n > presizeBudget {
		return 0
	}
	for i := range w.Cases {
		if w.Cases[i].CaseID == caseID {
			return int(n)
		}
	}
	return 0
}

// packer copies the fields of decoded requests into shared blocks, so that a million
// requests are a few thousand allocations instead of tens of millions: strings are appended
// to a strings.Builder (its String() views never change as it grows within its capacity),
// numbers and chunk gaps to fixed-size slices that are never reallocated. Pointers to equal
// small integers (token counts, HTTP statuses, in-flight counts: 0 to smallInts−1) and to
// equal repetitive strings (internPtr) share one value, as interned strings share one copy:
// packed records are read, never written through.
type packer struct {
	text   strings.Builder
	ints   []int64
	floats []float64
	bools  []bool
	strs   []string
	small  *[smallInts]int64 // the values 0…smallInts−1, shared by the pointers to them
	names  map[string]string
	ptrs   map[string]*string // the shared pointers of internPtr
}

const (
	textBlock   = 1 << 20
	intBlock    = 8 << 10
	floatBlock  = 64 << 10
	stringBlock = 4 << 10
	boolBlock   = 64 << 10
	smallInts   = 4096
	maxNames    = 1 << 16
)

// intern returns one shared copy of a low-cardinality string.
func (p *packer) intern(s string) string {
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

// internPtr is strPtr for repetitive values (finish reasons, error types and messages
// repeat across requests): requests with equal values share one pointer, as they share one
// copy of the text.
func (p *packer) internPtr(s *string) *string {
	if s == nil {
		return nil
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
		if p.small == nil {
			p.small = new([smallInts]int64)
			for i := range p.small {
				p.small[i] = int64(i)
			}
		}
		return &p.small[n]
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
	if len(p.bools) == cap(p.bools) {
		p.bools = make([]bool, 0, boolBlock)
	}
	p.bools = append(p.bools, *v)
	return &p.bools[len(p.bools)-1]
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
// phase, endpoint, model, status, sources, modes, finish reasons, errors) share one copy,
// TimestampNS shares StartedAtNS when they are equal (as inferprobe writes them), and
// RequestID shares the tail of XRequestID when that is "…-<request_id>".
func (p *packer) record(r *artifact.Request) artifact.Request {
	out := artifact.Request{
		SessionID:           p.intern(r.SessionID),
		CaseID:              p.intern(r.CaseID),
		Phase:               p.intern(r.Phase),
		StartedAtNS:         p.i64(r.StartedAtNS),
		EndedAtNS:           p.i64(r.EndedAtNS),
		Endpoint:            p.intern(r.Endpoint),
		Model:               p.intern(r.Model),
		Concurrency:         p.i64(r.Concurrency),
		MaxInFlight:         p.i64(r.MaxInFlight),
		TargetInputTokens:   r.TargetInputTokens,
		TargetOutputTokens:  r.TargetOutputTokens,
		Stream:              r.Stream,
		Status:              p.intern(r.Status),
		E2ELatencyMS:        p.f64(r.E2ELatencyMS),
		TTFTMS:              p.f64(r.TTFTMS),
		FirstChunkLatencyMS: p.f64(r.FirstChunkLatencyMS),
		ChunkInterarrivalMS: p.gaps(r.ChunkInterarrivalMS),
		PromptTokens:        p.i64(r.PromptTokens),
		PromptTokenSource:   p.intern(r.PromptTokenSource),
		PromptTokenExact:    r.PromptTokenExact,
		OutputTokens:        p.i64(r.OutputTokens),
		OutputTokenSource:   p.intern(r.OutputTokenSource),
		OutputTokenExact:    r.OutputTokenExact,
		TotalTokens:         p.i64(r.TotalTokens),
		FinishReason:        p.internPtr(r.FinishReason),
		ErrorType:           p.internPtr(r.ErrorType),
		ErrorMessage:        p.internPtr(r.ErrorMessage),
		HTTPStatus:          p.i64(r.HTTPStatus),
		ArrivalMode:         p.intern(r.ArrivalMode),
		RequestIndex:        p.i64(r.RequestIndex),
		IntendedAtNS:        p.i64(r.IntendedAtNS),
		DispatchLagMS:       p.f64(r.DispatchLagMS),
		HeldForSlot:         p.boolPtr(r.HeldForSlot),
		InFlightAtDispatch:  p.i64(r.InFlightAtDispatch),
		PromptMode:          p.intern(r.PromptMode),
		PromptID:            p.strPtr(r.PromptID),
		PrefixGroup:         p.i64(r.PrefixGroup),
		SharedPrefixTokens:  p.i64(r.SharedPrefixTokens),
		PromptDigest:        p.strPtr(r.PromptDigest),
		XRequestID:          p.strPtr(r.XRequestID),
		TraceID:             p.strPtr(r.TraceID),
		FirstAnswerMS:       p.f64(r.FirstAnswerMS),
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

// joinKeys is join.RequestOf(r) with its strings copied into p's blocks; ok is false for a
// request never sent.
func (p *packer) joinKeys(r *artifact.Request) (join.Request, bool) {
	jr, ok := join.RequestOf(r)
	jr.XRequestID, jr.TraceID = p.str(jr.XRequestID), p.str(jr.TraceID)
	return jr, ok
}
