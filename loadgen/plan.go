// Package loadgen generates controlled traffic against an OpenAI-compatible Chat Completions
// endpoint and turns every request into an infer.request record.
//
// The package owns the workload plan (cases = the cartesian product of arrival settings ×
// input-token targets × output caps), the phases of a case (optional warmup, then the
// measured phase, each a window followed by a drain), dispatch against a schedule fixed before
// the phase starts, and outcome classification. Its sub-packages hold the parts: sse (the
// incremental event-stream parser), client (the HTTP/SSE client and outcome classes),
// schedule (arrival schedules and the pacer) and prompt (prompt building and token counts).
//
// The behavioural contract is stormlog's `infer profile`: flag meanings, case ids, record
// fields and drain rules follow it.
package loadgen

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// Overflow policies for open-loop arrivals when every in-flight slot is busy.
const (
	OverflowWait = "wait" // hold the arrival until a slot frees (or the drain deadline passes)
	OverflowDrop = "drop" // record the arrival as dropped and never send it
)

// Cache-state intents (recorded; a reset URL makes a cold start actually attempted).
const (
	CacheUnspecified = "unspecified"
	CacheCold        = "cold"
)

// MaxArrivals is the most arrivals one phase may schedule (warmup phases included).
const MaxArrivals = schedule.MaxArrivals

// MaxConcurrency bounds --concurrency and --max-in-flight: every in-flight request holds a
// connection, and near 10k connections a 2-core host runs out of ports and descriptors long
// before the server does.
const MaxConcurrency = 50_000

// MaxOutputTokens bounds --output-tokens (a cap far beyond any served context length).
const MaxOutputTokens = 1 << 24

// ReservedBodyFields are the request-body fields inferprobe sets itself; --extra-body may not
// override them (nor the output cap field named by MaxTokensField).
var ReservedBodyFields = []string{"model", "messages", "stream", "stream_options"}

// Config is a whole profile run. Durations are wall-clock; counts are per case. Defaults
// fills what is left unset, Validate checks every rule of the contract, Cases expands the
// matrix; Workload.Config builds one from profile's flags or a probe's workload mapping.
type Config struct {
	Endpoint string // full /v1/chat/completions URL (derived from --base-url when that was given)
	Model    string
	APIKey   string // sent as "Authorization: Bearer"; never recorded
	RunID    string

	Timeout        time.Duration // per-request client timeout (>0)
	DrainTimeout   time.Duration // drain deadline after the window end (>0; default Timeout)
	Stream         bool
	StreamUsage    bool   // sends stream_options.include_usage (streaming only)
	MaxTokensField string // "max_tokens" or "max_completion_tokens"
	ExtraBody      map[string]any
	Seed           int64 // of prompts, nonces and Poisson gaps
	// RunSeeded says Seed is the run's own (UseRunSeed): another run draws other prompts, so
	// no warning says that prompts repeat across runs.
	RunSeeded bool

	Concurrency  []int // closed-loop worker counts
	InputTokens  []int // prompt token targets
	OutputTokens []int // output caps

	Requests       int           // measured requests per case; 0 = unset (duration, or whole replay trace)
	Duration       time.Duration // measured window per case; 0 = unset
	WarmupRequests int           // warmup requests per case (recorded with phase "warmup")

	Arrival       schedule.Mode
	Rates         []float64 // fixed-rate / poisson, requests per second
	BurstSize     int
	BurstInterval time.Duration
	Trace         []time.Duration // replay offsets, from 0
	TraceSource   string          // "offsets" or "artifact" (recorded)
	TraceCase     string          // case of an artifact trace
	TraceDigest   string
	MaxInFlight   int    // open loop only (default 128)
	Overflow      string // open loop only: wait | drop

	PromptMode        prompt.Mode
	SharedPrefixRatio float64
	PrefixGroups      int

	CacheState        string
	CacheResetURL     string
	CacheResetTimeout time.Duration

	// Shards and Shard slice the run across load-generator hosts (profile --shards N
	// --shard K): 0 or 1 shards is an unsharded run; see Config.Owns for the slice.
	Shards int
	Shard  int
}

// Case is one cell of the workload matrix.
type Case struct {
	ID           string // "<label>_in<input>_out<output>", e.g. c8_in512_out128, poisson2_in512_out128
	Label        string
	Concurrency  int     // closed loop workers; 0 for open loop
	Rate         float64 // fixed-rate / poisson rate; 0 otherwise
	InputTokens  int
	OutputTokens int
}

// OpenLoop reports whether the arrival mode is open-loop (anything but closed).
func (c *Config) OpenLoop() bool { return c.Arrival != schedule.Closed }

// Cases expands the workload matrix in the contract's order (arrival setting, then input
// tokens, then output tokens). Two settings that give one case id are a usage error.
func (c *Config) Cases() ([]Case, error) {
	type arr struct {
		conc int
		rate float64
	}
	var arrs []arr
	switch c.Arrival {
	case schedule.Closed, "":
		for _, n := range c.Concurrency {
			arrs = append(arrs, arr{conc: n})
		}
	case schedule.FixedRate, schedule.Poisson:
		for _, r := range c.Rates {
			arrs = append(arrs, arr{rate: r})
		}
	default:
		arrs = []arr{{}}
	}
	seen := map[string]bool{}
	var out []Case
	for _, a := range arrs {
		label := schedule.CaseLabel(c.arrivalSpec(a.rate), a.conc)
		for _, in := range c.InputTokens {
			for _, o := range c.OutputTokens {
				id := schedule.CaseID(label, in, o)
				if seen[id] {
					return nil, usagef("two workload cases would share the ID %s", id)
				}
				seen[id] = true
				out = append(out, Case{ID: id, Label: label, Concurrency: a.conc, Rate: a.rate, InputTokens: in, OutputTokens: o})
			}
		}
	}
	return out, nil
}

func (c *Config) arrivalSpec(rate float64) schedule.Spec {
	return schedule.Spec{Mode: c.Arrival, Rate: rate, BurstSize: c.BurstSize, BurstInterval: c.BurstInterval, Trace: c.Trace}
}

// Phase names.
const (
	PhaseWarmup   = "warmup"
	PhaseMeasured = "measured"
)

func (c *Config) phases() []string {
	if c.WarmupRequests > 0 {
		return []string{PhaseWarmup, PhaseMeasured}
	}
	return []string{PhaseMeasured}
}

// phaseCount returns the request count and window of a phase: warmup phases are counted
// (WarmupRequests), measured phases take Requests / Duration.
func (c *Config) phaseCount(phase string) (int, time.Duration) {
	if phase == PhaseWarmup {
		return c.WarmupRequests, 0
	}
	return c.Requests, c.Duration
}

// schedule builds an open-loop phase's arrival schedule (nil for a closed loop).
func (c *Config) schedule(cs Case, phase string) (*schedule.Schedule, error) {
	if !c.OpenLoop() {
		return nil, nil
	}
	n, d := c.phaseCount(phase)
	s, err := schedule.Build(c.arrivalSpec(cs.Rate), n, d, c.Seed, cs.ID+"/"+phase)
	if err != nil {
		if errors.Is(err, schedule.ErrTooManyArrivals) {
			return nil, usagef("case %s %s phase would schedule more than 1,000,000 requests", cs.ID, phase)
		}
		return nil, usagef("case %s %s phase: %v", cs.ID, phase, err)
	}
	return &s, nil
}

// ParseExtraBody decodes --extra-body: a JSON object (numbers kept exact as json.Number).
func ParseExtraBody(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, flagErr("extra-body", "--extra-body is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, flagErr("extra-body", "--extra-body must be one JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, flagErr("extra-body", "--extra-body must be a JSON object")
	}
	return m, nil
}
