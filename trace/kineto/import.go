package kineto

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/inferprobe/inferprobe/artifact"
)

// Defaults of Options.
const (
	DefaultMaxBytes             = 4 << 30  // a file over 4 GiB on disk is registered, not parsed
	DefaultMaxDecompressedBytes = 64 << 30 // a stream that inflates past 64 GiB is refused
	DefaultMaxEventBytes        = 64 << 20 // one trace event (or top-level value) over 64 MiB is refused
)

// Detail levels of the activity refs (Options.Detail).
const (
	DetailLaunch = "launch" // one record per (launch, device, activity kind)
	DetailKernel = "kernel" // one record per GPU activity
)

// ErrDecompressedLimit is wrapped by the error of a stream that inflates past
// Options.MaxDecompressedBytes (a gzip bomb, or a trace too large to read).
var ErrDecompressedLimit = errors.New("decompressed size limit reached")

// Options configure an import. Context is the template of every record's context (run and
// session ids, producer, clock domain of the server host); its Rank is set per file.
// Imported lists files already in the artifact: a file with the same path, size and
// SHA-256 is skipped (Status "already_imported").
type Options struct {
	Detail               string
	MaxBytes             int64
	MaxDecompressedBytes int64
	MaxEventBytes        int
	Context              artifact.Context
	Imported             []FileKey
}

// FileKey identifies one trace file: its absolute path, size in bytes and SHA-256 (hex).
type FileKey struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Content identifies the trace's JSON whatever its file: "<decompressed bytes>:<CRC-32C
	// of them, 8 hex>" — the same trace under another name or compression has the same
	// Content. Empty for a file not parsed.
	Content string `json:"content,omitempty"`
}

// File statuses (Summary.Status).
const (
	StatusImported        = "imported"
	StatusOverMaxBytes    = "over_max_bytes"   // registered, not parsed
	StatusAlreadyImported = "already_imported" // skipped: the artifact holds this file already
)

// Summary is what one trace file gave. Steps counts the iterations found (0 with
// StepsResolved false: the trace has no iteration annotation, its activities are all
// unresolved); Activities the GPU activities (kernels, memcpy, memset), Linked those tied
// to a step and Unresolved the others by reason; Launches the CPU launches with GPU
// activities, GraphLaunches the CUDA-graph ones among them; ActivityRefs the records
// written. SHA256 is empty for a file over MaxBytes (not read).
type Summary struct {
	FileKey
	AttachmentID string `json:"trace_attachment_id"`
	Status       string `json:"status"`
	// SameAs is the imported file whose content this one repeats (already_imported by
	// content; "" otherwise).
	SameAs            string           `json:"same_as,omitempty"`
	Rank              *int64           `json:"rank"`
	BaseTimeNS        *int64           `json:"base_time_ns"`
	DecompressedBytes int64            `json:"decompressed_bytes"`
	Events            int64            `json:"events"`
	Steps             int64            `json:"steps"`
	StepsResolved     bool             `json:"steps_resolved"`
	Activities        int64            `json:"activities"`
	Linked            int64            `json:"linked"`
	Unresolved        map[string]int64 `json:"unresolved"`
	Launches          int64            `json:"launches"`
	GraphLaunches     int64            `json:"graph_launches"`
	ActivityRefs      int64            `json:"activity_refs"`
}

func (o *Options) defaults() {
	if o.Detail == "" {
		o.Detail = DetailLaunch
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDecompressedBytes <= 0 {
		o.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
}

// ImportFile reads one Kineto trace (.json or .json.gz: gzip is recognised by its magic
// bytes) and hands its records to emit: the Iteration records, the ActivityRef records,
// then one Capabilities record (component ComponentTraceKineto) with the Summary. Nothing
// is emitted until the whole file has parsed, so a malformed file adds nothing. The
// memory it holds is the read buffer plus about 90 bytes per GPU activity and 45 per CPU launch (the
// events are unsorted: attribution needs them all), never the file's other bytes.
// Errors: the file cannot be read (wrapping the os error), *SyntaxError naming the
// decompressed byte offset, ErrDecompressedLimit, ctx's error, or emit's error as is.
func ImportFile(ctx context.Context, path string, opts Options, emit func(artifact.Record) error) (Summary, error) {
	opts.defaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	sum := Summary{FileKey: FileKey{Path: abs}, Unresolved: map[string]int64{}}
	st, err := os.Stat(path)
	if err != nil {
		return sum, err
	}
	sum.Bytes = st.Size()
	if sum.Bytes > opts.MaxBytes {
		sum.Status = StatusOverMaxBytes
		sum.AttachmentID = "kineto:" + filepath.Base(abs)
		return sum, emit(capabilities(opts, sum))
	}
	if previously(opts.Imported, sum.FileKey) {
		digest, err := fileSHA256(path)
		if err != nil {
			return sum, err
		}
		for _, k := range opts.Imported {
			if k.Path == abs && k.Bytes == sum.Bytes && k.SHA256 == digest {
				sum.SHA256, sum.Status = digest, StatusAlreadyImported
				return sum, nil
			}
		}
	}
	res, err := parseFile(ctx, path, opts, &sum)
	if err != nil {
		return sum, err
	}
	for _, k := range opts.Imported {
		if k.Content != "" && k.Content == sum.Content {
			sum.Status, sum.SameAs = StatusAlreadyImported, k.Path // the same trace, renamed or recompressed
			return sum, nil
		}
	}
	return sum, res.emitAll(opts, &sum, emit)
}

func previously(keys []FileKey, k FileKey) bool {
	for _, p := range keys {
		if p.Path == k.Path && p.Bytes == k.Bytes {
			return true
		}
	}
	return false
}

// parseFile reads the file into a collector and attributes its events.
func parseFile(ctx context.Context, path string, opts Options, sum *Summary) (*fileResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	in, closeIn, err := decompressed(io.TeeReader(f, h), opts.MaxDecompressedBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer closeIn()
	c := newCollector()
	n := 0
	info, err := readDoc(in, opts.MaxEventBytes, func(ev *event) error {
		if n++; n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return c.add(ev)
	})
	sum.DecompressedBytes = in.n
	sum.Content = fmt.Sprintf("%d:%08x", in.n, in.crc)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			se.File = path
			if in.over {
				return nil, fmt.Errorf("%s: %w (%d bytes)", path, ErrDecompressedLimit, opts.MaxDecompressedBytes)
			}
		}
		return nil, err
	}
	if _, err := io.Copy(h, f); err != nil { // the digest covers the whole file
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum.SHA256 = hex.EncodeToString(h.Sum(nil))
	sum.Events = info.events
	res := &fileResult{c: c, info: info, ctx: opts.Context, file: sum.Path}
	res.attach = "kineto:" + filepath.Base(sum.Path) + ":" + sum.SHA256[:16]
	sum.AttachmentID = res.attach
	switch {
	case info.hasRank:
		res.rank = artifact.Ptr(info.rank)
	case rankFromName(filepath.Base(path)) >= 0:
		res.rank = artifact.Ptr(rankFromName(filepath.Base(path)))
	}
	res.ctx.Rank = res.rank
	res.attribute()
	return res, nil
}

// emitAll writes the file's records and fills the rest of its summary.
func (r *fileResult) emitAll(opts Options, sum *Summary, emit func(artifact.Record) error) error {
	if err := r.iterations(emit); err != nil {
		return err
	}
	if err := r.activityRefs(opts.Detail == DetailKernel, emit); err != nil {
		return err
	}
	sum.Status = StatusImported
	sum.Rank = r.rank
	if r.info.hasBase {
		sum.BaseTimeNS = artifact.Ptr(r.info.baseTimeNS)
	}
	sum.Steps = int64(len(r.steps))
	sum.StepsResolved = len(r.steps) > 0
	sum.Activities = int64(r.c.acts.len())
	sum.Linked = r.linked
	sum.Unresolved = r.reasons
	sum.Launches, sum.GraphLaunches = r.launches, r.graphs
	sum.ActivityRefs = r.emitted
	return emit(capabilities(opts, *sum))
}

// Import imports each trace in turn (see ImportFile) into sink, stopping at the first
// error: the records of the files before it stay written, each file's complete with its
// Capabilities record; the failing file adds nothing.
func Import(ctx context.Context, paths []string, opts Options, sink artifact.Sink) ([]Summary, error) {
	var out []Summary
	for _, p := range paths {
		s, err := ImportFile(ctx, p, opts, sink.Write)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// countingReader counts the bytes read and fails once more than limit came through.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
	crc   uint32 // CRC-32C (Castagnoli) of the bytes returned
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		c.over = true
		return 0, fmt.Errorf("%w (%d bytes)", ErrDecompressedLimit, c.limit)
	}
	if rest := c.limit - c.n; int64(len(p)) > rest {
		p = p[:rest+1]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.over = true
		n -= int(c.n - c.limit)
		c.n = c.limit
		c.crc = crc32.Update(c.crc, castagnoli, p[:n])
		return n, fmt.Errorf("%w (%d bytes)", ErrDecompressedLimit, c.limit)
	}
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// decompressed returns the file's JSON stream: gunzipped when it starts with the gzip
// magic bytes, limited to limit bytes either way.
func decompressed(r io.Reader, limit int64) (*countingReader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("malformed gzip header: %w", err)
		}
		return &countingReader{r: zr, limit: limit}, func() { _ = zr.Close() }, nil
	}
	return &countingReader{r: br, limit: limit}, func() {}, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
