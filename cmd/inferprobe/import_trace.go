package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
	"github.com/inferprobe/inferprobe/trace"
	"github.com/inferprobe/inferprobe/trace/kineto"
)

func init() { verbs = append(verbs, newImportTraceCmd) }

// ProducerImportTrace is the producer_id and source of the records import-trace appends.
const producerImportTrace = "inferprobe.import_trace"

// importMemoryLimit is the soft memory limit of an import (unless GOMEMLIMIT is set): the
// importer keeps about 90 bytes per GPU activity and 45 per CPU launch, so the collector stays well
// under it for a 1 GB trace and the garbage collector keeps the peak near it.
const importMemoryLimit = 224 << 20

// defaultServerClockDomain is the clock domain of imported trace times when neither the
// flag nor the artifact names the server's: a host name no client clock has, so that the
// times are never joined to the client's without an alignment.
const defaultServerClockDomain = "kineto-server/unix_epoch_ns"

type importTraceFlags struct {
	detail          string
	maxBytes        int64
	maxDecompressed int64
	clockDomain     string
}

func newImportTraceCmd() *cobra.Command {
	var f importTraceFlags
	cmd := &cobra.Command{
		Use:   "import-trace ARTIFACT TRACE...",
		Short: "Append the engine steps and GPU activity of Kineto profiler traces (.json, .json.gz) to an artifact",
		Long: `import-trace reads torch-profiler (Kineto) Chrome traces of the server's workers, streaming,
and appends to ARTIFACT: one infer.iteration record per engine step (vLLM's
execute_context_… annotation, SGLang's step[…], inferprobe.iteration/… or stormlog.iteration/…
ranges) with its GPU busy time (the union of kernel intervals), idle split into host-wait,
kernel-wait and other, memcpy and NCCL time; infer.activity_ref records tying each launch's
GPU work (--detail launch) or each kernel (--detail kernel) to its step, or unresolved with
the reason; and one infer.capabilities record per trace with its summary (event loss
unknown). A trace already imported into the run (same path, size and SHA-256, or the same content
under another name or compression) is skipped.
A trace larger than --trace-max-bytes is registered, not parsed.

Times are Unix ns of the server host (baseTimeNanoseconds + ts·1000) in --clock-domain,
by default the from_clock_domain of the artifact's infer.clock_alignment records when they
name one, else the domain of its server telemetry samples, else the domain of the profiler
its trace windows controlled (the client's own for a loopback control URL), else
` + defaultServerClockDomain + ` (never joined to the client's clock).

Each trace's records are written only once the whole file has parsed: a malformed or cut
trace adds nothing, and the traces before it stay imported.

Exit codes: 0 imported (or skipped); 5 a missing, unreadable or invalid artifact or trace
(a malformed trace's message names the byte offset); 2 bad flags; 1 the artifact cannot
be written (another run holds it); 130 interrupted.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.detail, "detail", kineto.DetailLaunch, "activity refs per launch (launch) or per kernel (kernel)")
	fl.Int64Var(&f.maxBytes, "trace-max-bytes", kineto.DefaultMaxBytes, "a trace file larger than this (bytes on disk) is registered, not parsed")
	fl.Int64Var(&f.maxDecompressed, "trace-max-decompressed-bytes", kineto.DefaultMaxDecompressedBytes, "stop reading a trace that inflates past this many bytes")
	fl.StringVar(&f.clockDomain, "clock-domain", "", "clock domain of the server host that wrote the traces ({host}/{boot_id}/unix_epoch_ns or {host}/unix_epoch_ns)")
	return cmd
}

func (f *importTraceFlags) check() error {
	if f.detail != kineto.DetailLaunch && f.detail != kineto.DetailKernel {
		return usageErrorf("--detail must be launch or kernel, not %q", f.detail)
	}
	if f.maxBytes <= 0 {
		return usageErrorf("--trace-max-bytes must be > 0, not %d", f.maxBytes)
	}
	if f.maxDecompressed <= 0 {
		return usageErrorf("--trace-max-decompressed-bytes must be > 0, not %d", f.maxDecompressed)
	}
	return nil
}

func (f *importTraceFlags) run(cmd *cobra.Command, path string, traces []string) error {
	if err := f.check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(importMemoryLimit))
	}
	a, err := scanArtifact(ctx, path)
	if err != nil {
		if ctx.Err() != nil {
			return withCode(exitInterrupted, err)
		}
		return withCode(exitBadInput, err)
	}
	if a.truncated != nil {
		return withCode(exitBadInput, fmt.Errorf("%s ends in a cut line (%s); nothing imported", path, a.truncated))
	}
	opts, err := f.options(a)
	if err != nil {
		return err
	}
	w, err := artifact.OpenAppend(path)
	if err != nil {
		if errors.Is(err, artifact.ErrInvalidArtifact) || errors.Is(err, fs.ErrNotExist) {
			return withCode(exitBadInput, err)
		}
		return withCode(exitUnexpected, err)
	}
	ierr := importAll(ctx, cmd, w, traces, opts)
	if cerr := w.Close(); cerr != nil && ierr == nil {
		ierr = withCode(exitUnexpected, cerr)
	}
	return ierr
}

// artifactView is what import-trace needs of the artifact it appends to.
type artifactView struct {
	path             string
	header           *artifact.ArtifactHeader
	sessionID        string // of the first infer.session record
	capabilities     []artifact.Capabilities
	alignmentDomains []string // from_clock_domain of each clock alignment
	telemetryDomains map[string]bool
	windowDomains    map[string]bool // trace.ServerClockDomain of each trace window's control URL
	truncated        *artifact.Truncation
}

// scanArtifact streams the artifact, keeping only its header, first session id,
// capabilities and clock domains: an artifact with imported traces holds millions of
// activity refs. Errors wrap artifact.ErrInvalidArtifact (or are ctx's).
func scanArtifact(ctx context.Context, path string) (*artifactView, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", artifact.ErrInvalidArtifact, err)
	}
	defer f.Close()
	v := &artifactView{path: path, telemetryDomains: map[string]bool{}, windowDomains: map[string]bool{}}
	st, err := artifact.Read(f, func(l artifact.Line) error {
		if l.Line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		switch r := l.Value.(type) {
		case *artifact.ArtifactHeader:
			if v.header == nil {
				v.header = r
			}
		case *artifact.Session:
			if v.sessionID == "" {
				v.sessionID = r.SessionID
			}
		case *artifact.Capabilities:
			v.capabilities = append(v.capabilities, *r)
		case *artifact.ClockAlignment:
			v.alignmentDomains = append(v.alignmentDomains, r.FromClockDomain)
		case *artifact.TelemetrySample:
			v.telemetryDomains[r.ClockDomain] = true
		case *artifact.Raw:
			if r.Kind.EventType == artifact.EventTraceWindow && v.header != nil {
				var w struct {
					ControlURL string `json:"control_url"`
				}
				if json.Unmarshal(r.JSON, &w) == nil && w.ControlURL != "" {
					v.windowDomains[trace.ServerClockDomain(w.ControlURL, join.ClientDomain(v.header))] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.truncated = st.Truncated
	return v, nil
}

// options builds the import options from the flags and the artifact: the run's ids, the
// server's clock domain, and the files the run imported already.
func (f *importTraceFlags) options(a *artifactView) (kineto.Options, error) {
	runID, sessionID := "", ""
	if a.header != nil {
		runID, sessionID = a.header.Context.RunID, a.header.Context.SessionID
	}
	if sessionID == "" {
		sessionID = a.sessionID
	}
	if runID == "" {
		runID = sessionID
	}
	if runID == "" {
		return kineto.Options{}, withCode(exitBadInput, fmt.Errorf("%w: %s has no infer.artifact or infer.session record to name its run", artifact.ErrInvalidArtifact, a.path))
	}
	domain := f.clockDomain
	if domain == "" {
		domain = serverClockDomain(a)
	}
	return kineto.Options{
		Detail: f.detail, MaxBytes: f.maxBytes, MaxDecompressedBytes: f.maxDecompressed,
		Context: artifact.Context{
			RunID: runID, SessionID: sessionID, ProducerID: producerImportTrace, Source: "kineto",
			SourceVersion: artifact.Ptr(version), ClockDomain: domain, ClockKind: "wall",
			CollectionMode: "imported", Provenance: "reported",
		},
		Imported: kineto.ImportedFiles(a.capabilities, runID),
	}, nil
}

// serverClockDomain is the artifact's one server clock domain: the from_clock_domain all
// its clock alignments share, else the one clock domain of its telemetry samples, else the
// one domain of its trace windows' profiler (the client's own for a loopback control URL, as
// profile's own import decides), else defaultServerClockDomain.
func serverClockDomain(a *artifactView) string {
	if n := len(a.alignmentDomains); n > 0 {
		same := true
		for _, d := range a.alignmentDomains[1:] {
			same = same && d == a.alignmentDomains[0]
		}
		if same {
			return a.alignmentDomains[0]
		}
	}
	if len(a.telemetryDomains) == 1 {
		for d := range a.telemetryDomains {
			return d
		}
	}
	if len(a.windowDomains) == 1 {
		for d := range a.windowDomains {
			return d
		}
	}
	return defaultServerClockDomain
}

// importAll imports the traces in order into w, printing one line per trace. A trace named
// twice is imported once.
func importAll(ctx context.Context, cmd *cobra.Command, w *artifact.Writer, traces []string, opts kineto.Options) error {
	out := cmd.OutOrStdout()
	emit := func(rec artifact.Record) error {
		if err := w.Write(rec); err != nil {
			return &writeError{err}
		}
		return nil
	}
	for _, p := range traces {
		sum, err := kineto.ImportFile(ctx, p, opts, emit)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return withCode(exitInterrupted, fmt.Errorf("interrupted importing %s: nothing of it was written", p))
			case errors.As(err, new(*writeError)):
				return withCode(exitUnexpected, err)
			}
			return withCode(exitBadInput, fmt.Errorf("%w (nothing of %s was written)", err, p))
		}
		if sum.Status == kineto.StatusImported {
			opts.Imported = append(opts.Imported, sum.FileKey)
		}
		fmt.Fprintln(out, sum.String())
	}
	return nil
}

// writeError marks an error of the artifact writer (exit 1), as against one of the trace
// (exit 5).
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }
