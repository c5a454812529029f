// Package run is the pipeline of one run: every verb that sends load (profile, each probe
// run of serve, demo) runs its workload through it, so a run's lifecycle exists once.
//
// Given a validated workload, a target and a set of sinks, a Pipeline opens the artifact,
// writes the run's head records (infer.session running, infer.artifact, infer.workload,
// infer.slo), starts the producers — the load generator, the vLLM /metrics scraper, the
// OTLP span receiver (its own, or spans another receiver routes to the run), the
// client-local sampler — and hands every record they emit to one fan-out: the artifact
// writer first, then the other sinks (the live exporter, tables). After the last phase it
// keeps receiving spans for the drain time, writes each component's infer.capabilities and
// the closing infer.session, closes the artifact, analyses it as `inferprobe analyze`
// would, hands the sinks the run's judgement (artifact.RunJudgement) and closes them.
//
// The pipeline prints nothing: warnings go to Spec.Warn and the outcome comes back as a
// Result, which the command renders and maps to an exit code.
package run

import (
	"context"
	"errors"
	"time"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/scrape/prom"
	"github.com/inferprobe/inferprobe/trace"
	"github.com/inferprobe/inferprobe/trace/kineto"
)

// Spec is one run. Workload must have been completed by loadgen.Config.Defaults and passed
// Validate (loadgen.Workload.Config does both); everything else is
// optional unless it says otherwise.
type Spec struct {
	// Workload is the traffic to send (endpoint, model, API key, cases, phases).
	Workload *loadgen.Config
	// Tokenizer sizes prompts and counts tokens when the server reports no usage;
	// TokenizerName ("auto", "tiktoken", "none") is recorded in the session config.
	Tokenizer     prompt.Tokenizer
	TokenizerName string
	// Output is the artifact path (required; parent directories are created, an existing
	// file is replaced with a warning).
	Output string
	// Version is inferprobe's version (infer.artifact's source_version).
	Version string
	// SLO is the policy recorded as infer.slo and judged by the analysis; nil: none.
	SLO *SLO
	// Metrics configures the vLLM /metrics scraper (URL, interval, timeout, endpoint, API key;
	// the pipeline sets the session, run and clock domain); nil: no scrapes.
	Metrics *prom.Config
	// Receiver starts a span receiver for the run (profile, demo); Spans attaches the run to
	// a receiver that outlives it (the daemon). At most one of them.
	Receiver *Receiver
	Spans    SpanFeed
	// SpansDrain is how long to keep receiving spans after the last phase (servers batch
	// their spans: vLLM exports about every 5 s). Skipped when the run's context ends.
	SpansDrain time.Duration
	// SystemSampler is the client-local sampler ("auto", "psutil", "nvidia-smi"; "" or "none"
	// for none) and SampleEvery its interval.
	SystemSampler string
	SampleEvery   time.Duration
	// Sinks receive every record after the artifact writer, the transient ones included, and
	// are closed at the end of the run — also when the artifact cannot be opened (they then
	// receive only a RunJudgement with outcome failed).
	Sinks []artifact.Sink
	// Trace opens a profiler trace window around one phase of each case (trace.Options: the
	// control base, the phase, the maximum duration, the trace directory); the pipeline sets
	// its SessionID, RunID and Sink, and a nil Warn is Spec.Warn. nil: no windows. A bad
	// Trace fails the run before anything is sent.
	Trace *trace.Options
	// TraceImport configures the import of the windows' trace files at the end of the run
	// (Detail, MaxBytes, MaxDecompressedBytes; zero values are the importer's defaults; the
	// pipeline sets Context). Skip leaves the files unread.
	TraceImport TraceImport
	// Hooks observe the load generator (the terminal's progress line). Their PhaseStart and
	// PhaseEnd are the pipeline's own (the scraper's and the trace windows') and are ignored here; a nil Warn is
	// Spec.Warn.
	Hooks loadgen.Hooks
	// Warn receives every condition the user should know about; nil discards them.
	Warn func(msg string)
	// AnalysisTimeout bounds the analysis of the closed artifact; 0: no bound.
	AnalysisTimeout time.Duration
	// StartGate, when set (a shard of a sharded run with a coordinator: shard.Gate.Wait),
	// runs after the head records and the telemetry start, just before the load generator's
	// first phase, with the fan-out (for its infer.clock_alignment), the artifact's context
	// and the workload digest. An error ends the run before anything is sent: the artifact is
	// closed with an incomplete session naming it.
	StartGate func(ctx context.Context, sink artifact.Sink, head artifact.Context, workloadDigest string) error
}

// SLO is a policy with where it came from (analyze.SourceFlags or analyze.SourceFile).
type SLO struct {
	Policy *analyze.Policy
	Source string
}

// Receiver is the span receiver a run starts for itself: OTLP/HTTP and OTLP/gRPC listen
// addresses (HOST:PORT; "" leaves one off). A listener that cannot bind is a warning, not an
// error: the run goes on, and the receiver's capability record says what was unavailable.
type Receiver struct {
	HTTPListen, GRPCListen string
}

// SpanFeed is a span receiver that outlives the run (the daemon's) and routes the spans of
// each run to it.
type SpanFeed interface {
	// Addrs are the receiver's listen addresses, recorded in the session config.
	Addrs() (httpListen, grpcListen string)
	// Attach starts routing the spans of run runID into spans (the pipeline stamps the run's
	// session and run ids on them). It returns a sink of the run's own records, through which
	// the feed learns what it routes by (trace ids), and detach, which stops the routing and
	// returns once no span is being delivered.
	Attach(runID string, spans artifact.Sink) (records artifact.Sink, detach func())
	// Capabilities is the receiver's infer.capabilities record for the run's artifact.
	Capabilities(ctx artifact.Context) artifact.Capabilities
}

// TraceImport is Spec.TraceImport.
type TraceImport struct {
	Options kineto.Options
	Skip    bool
	// DeviceUUIDs names the GPU of each rank (--trace-device-uuid RANK=UUID): stamped as
	// context.device_uuid on the rank's imported records.
	DeviceUUIDs map[int64]string
}

// Result is what a run produced.
type Result struct {
	// Path is the artifact ("" when it could not be opened); RunID and SessionID name the run.
	Path, RunID, SessionID string
	// Status is the closing session's status (artifact.StatusCompleted, StatusInterrupted,
	// StatusIncomplete), or artifact.RunFailed when the artifact could not be opened.
	Status string
	// Interrupted is true when the run's context ended it (Ctrl+C, a hard stop) or Stop did.
	Interrupted bool
	// Err is why the run is incomplete or failed (nil for a completed or interrupted run):
	// a load generator or sink error, a telemetry error, an error writing the artifact. It
	// wraps ErrOpen when the artifact could not be opened.
	Err error
	// Report is the analysis of the artifact (nil with ReportErr when it could not be made).
	// ReportErr wraps ErrReadBack when the closed artifact could not be read back and
	// analysed (unreadable, invalid, or holding another run's session); a command treats
	// that run as failed.
	Report    *analyze.Report
	ReportErr error
	// Stats are the measured-phase outcome counts per case.
	Stats []*loadgen.CaseStats
	// Judgement is what the sinks were given last.
	Judgement *artifact.RunJudgement
}

// Succeeded reports whether a measured request of the run succeeded.
func (r *Result) Succeeded() bool {
	for _, s := range r.Stats {
		if s.ByStatus[client.OK] > 0 {
			return true
		}
	}
	return false
}

// ErrOpen is matched (errors.Is) by Result.Err when the artifact could not be opened: nothing
// was sent. The error is an *OpenError, which names the cause.
var ErrOpen = errors.New("cannot open the artifact")

// OpenError is Result.Err when the artifact at Path could not be opened; Err is the cause
// (e.g. "open /proc/x/a.jsonl: no such file or directory"). It matches ErrOpen and Err.
type OpenError struct {
	Path string
	Err  error
}

func (e *OpenError) Error() string   { return ErrOpen.Error() + ": " + e.Err.Error() }
func (e *OpenError) Unwrap() []error { return []error{ErrOpen, e.Err} }
