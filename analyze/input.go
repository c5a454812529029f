package analyze

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
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
	// Ignored lists, by session id, the records of sessions that no infer.session record of
	// the artifact declares (ReasonOtherSession: lines spliced in from another run). Their
	// infer.request and infer.phase_window records are in none of the fields above, nor
	// counted in RequestRecords. Empty when there are none.
	Ignored []IgnoredRecords
	// Shards holds each shard's self-audit when the Input merges a sharded run's artifacts
	// (MergeShards); nil otherwise.
	Shards []ShardAudit
}

// NewInput prepares a loaded artifact for analysis: it groups the measured requests of
// a.Requests by case (each record embedded as it is, its slices and pointers shared, not
// copied) and keeps the warmup requests' join keys.
//
// Records of a session that no infer.session record declares are left out and listed in
// Ignored (excludeOtherSessions); a is not changed.
func NewInput(a *artifact.Artifact) *Input {
	in := &Input{Artifact: a, Cases: map[string][]Request{}, RequestRecords: len(a.Requests)}
	var warmupSessions []string
	for i := range a.Requests {
		r := &a.Requests[i]
		if r.Phase != artifact.PhaseMeasured {
			if jr, ok := join.RequestOf(r); ok {
				in.Warmup = append(in.Warmup, jr)
				warmupSessions = append(warmupSessions, r.SessionID)
			}
			continue
		}
		in.Cases[r.CaseID] = append(in.Cases[r.CaseID], Request{Request: *r})
	}
	in.excludeOtherSessions(requestSessions(a.Requests), warmupSessions)
	return in
}

// Validate checks what every analysis needs (artifact.Artifact.Validate's rules): at least
// one infer.session v1 record and one infer.request v1 record. The error wraps
// artifact.ErrInvalidArtifact.
func (in *Input) Validate() error {
	if in == nil || in.Artifact == nil {
		return fmt.Errorf("%w: no artifact", artifact.ErrInvalidArtifact)
	}
	return in.Artifact.ValidateRequests(in.RequestRecords, in.ignoredNote())
}

// presizeBudget bounds how many requests ReadInput reserves room for up front, from the
// workload's declared request count, so that a record claiming huge counts cannot make it
// allocate more than a real run's worth (a Request is 520 bytes).
const presizeBudget = 2_000_000

// ReadInput streams the artifact at path straight into the analysis view: each measured
// infer.request v1 record is copied into its Request as it is read and the decoded record
// dropped, so memory grows with the analysis view only (about 880 bytes per request with 16
// chunk gaps) instead of holding every decoded record as well. The copy equals the record
// (Request.Record); its strings, numbers and chunk gaps are packed into shared blocks, chunk
// gaps that are whole nanoseconds as int32 (ChunkInterarrivalMS nil then: read them with
// Request.ChunkGapsMS), and repeated values (low-cardinality strings, small integers) share
// one copy. Warmup requests are counted and
// only their join keys kept. Every other record is kept as artifact.ReadFileContext keeps it,
// and a truncated last line is reported in Artifact.Truncated, not as an error.
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

// ReadInputRecords is ReadInput for writers of the records themselves (tables.WriteInput):
// every request keeps its chunk gaps in ChunkInterarrivalMS (never packed as int32), so that
// Request.Record is the embedded record and costs no copy.
func ReadInputRecords(ctx context.Context, path string) (*Input, error) {
	return readInput(ctx, path, readOptions{keepGaps: true})
}

// readOptions tune readInput; zero values mean the defaults.
type readOptions struct {
	blockBytes   int  // bytes per block before cutting at a newline (4 MiB)
	workers      int  // decoding goroutines (GOMAXPROCS, at most 8)
	maxLineBytes int  // artifact.Reader.MaxLineBytes (artifact.MaxLineBytes)
	keepGaps     bool // chunk gaps stay float64 in ChunkInterarrivalMS (ReadInputRecords)
}

func readInput(ctx context.Context, path string, o readOptions) (*Input, error) {
	f, err := openContext(ctx, path)
	if ctx.Err() != nil && err == ctx.Err() {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	defer f.Close()
	return readFrom(ctx, f, path, o)
}

// readFrom is readInput over r; path names it in errors and Artifact.Path.
func readFrom(ctx context.Context, r io.Reader, path string, o readOptions) (*Input, error) {
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below, so it runs first): nothing outlives the file
	defer cancel()
	rc := newRecycler(2*o.workers + 4) // the blocks in flight: queued in order, decoding, merging
	order := startDecoding(ctx, &wg, r, o, rc)
	m := newMerger(path)
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
		if err := m.add(b, res); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rc.releaseItems(res.items)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return m.input(), nil
}

// withDefaults fills the zero options with the defaults.
func (o readOptions) withDefaults() readOptions {
	if o.blockBytes <= 0 {
		o.blockBytes = 4 << 20
	}
	if o.workers <= 0 {
		o.workers = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.maxLineBytes <= 0 {
		o.maxLineBytes = artifact.MaxLineBytes
	}
	return o
}

// merger files decoded blocks, in file order, into one Input, as one sequential read of the
// file would: line numbers continue across blocks, and the truncation and missing final
// newline of the last block are the file's.
type merger struct {
	a      *artifact.Artifact
	in     *Input
	st     artifact.Stats
	budget int // requests that may still be reserved up front (presizeBudget)
	// sessions counts the request records by session id; warmupSessions is the session of
	// each of in.Warmup (excludeOtherSessions).
	sessions       sessionCounts
	warmupSessions []string
}

func newMerger(path string) *merger {
	a := &artifact.Artifact{Path: path}
	return &merger{
		a:        a,
		in:       &Input{Artifact: a, Cases: map[string][]Request{}},
		st:       artifact.Stats{Kinds: map[artifact.Kind]int{}},
		budget:   presizeBudget,
		sessions: sessionCounts{},
	}
}

// add files block b's result: its records in order (the lines before a bad one included, as
// a sequential read files them), then its error. Errors: a record's (keep) or the block's,
// the line number made file-wide; a read error of the file itself names the line after the
// last one read.
func (m *merger) add(b *block, res blockResult) error {
	before := m.st.Lines
	for i := range res.items {
		if err := m.item(&res.items[i]); err != nil {
			var le *artifact.LineError
			if errors.As(err, &le) {
				return &artifact.LineError{Line: le.Line + before, Field: le.Field, Err: le.Err}
			}
			return err
		}
	}
	if res.err != nil {
		var le *artifact.LineError
		if errors.As(res.err, &le) {
			return &artifact.LineError{Line: le.Line + before, Field: le.Field, Err: le.Err}
		}
		if b.err != nil {
			return fmt.Errorf("%w: reading line %d: %w", artifact.ErrInvalidArtifact, before+1, res.err)
		}
		return res.err
	}
	m.st.Lines += res.stats.Lines
	m.st.Records += res.stats.Records
	m.st.BlankLines += res.stats.BlankLines
	for k, n := range res.stats.Kinds {
		m.st.Kinds[k] += n
	}
	if b.final {
		m.st.MissingFinalNewline = res.stats.MissingFinalNewline
		if t := res.stats.Truncated; t != nil {
			m.st.Truncated = &artifact.Truncation{Line: t.Line + before, Bytes: t.Bytes}
		}
	}
	return nil
}

// item files one record: a measured request into its case (the case's list reserved up
// front for the workload's declared count, within the budget), a sent warmup request's join
// keys, anything else as artifact.ReadFileContext keeps it. The error is keep's.
func (m *merger) item(it *blockItem) error {
	if !it.request {
		return keep(m.a, it)
	}
	m.in.RequestRecords++
	m.sessions[it.session]++
	if !it.measured {
		if it.sent {
			m.in.Warmup = append(m.in.Warmup, it.warmup)
			m.warmupSessions = append(m.warmupSessions, it.session)
		}
		return nil
	}
	id := it.req.CaseID
	list, seen := m.in.Cases[id]
	if !seen {
		if n := declaredCount(m.a.Workload, id); n > 0 && n <= m.budget {
			list = make([]Request, 0, n)
			m.budget -= n
		}
	}
	m.in.Cases[id] = append(list, it.req)
	return nil
}

// input returns the merged Input with the read statistics.
func (m *merger) input() *Input {
	m.a.Stats = m.st
	m.a.Truncated = m.st.Truncated
	m.in.excludeOtherSessions(m.sessions, m.warmupSessions)
	return m.in
}

// keep files a record other than an infer.request v1 the way artifact.ReadFileContext does
// (span contexts into a.SpanContexts, v2 spans resolved against them). The error is a
// *artifact.LineError with the block's line number: a span naming an unknown context, or a
// context redefined with other content.
func keep(a *artifact.Artifact, it *blockItem) error {
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
	case *artifact.Iteration:
		a.Iterations = append(a.Iterations, *v) // activity refs are not kept: the report reads steps only
	case *artifact.SpanContext:
		return a.KeepSpanContext(v, it.line)
	case *artifact.Raw:
		return a.KeepRaw(v, it.line)
	}
	return nil
}

// declaredCount is the measured request count the workload declares for caseID (0 when it
// declares none, the case is unknown, or the count is out of range); a shard's artifact
// (workload shard block) declares its slice, ceil(count / shards).
func declaredCount(w *artifact.Workload, caseID string) int {
	if w == nil || w.Measurement.RequestCount == nil {
		return 0
	}
	n := *w.Measurement.RequestCount
	if n <= 0 || n > presizeBudget {
		return 0
	}
	if sh := w.Shard; sh != nil && sh.Shards > 1 {
		n = (n + sh.Shards - 1) / sh.Shards // a shard records its slice only
	}
	for i := range w.Cases {
		if w.Cases[i].CaseID == caseID {
			return int(n)
		}
	}
	return 0
}
