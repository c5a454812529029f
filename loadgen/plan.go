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
// The behavioural contract is stormlog's `infer profile` (shared/seeds and
// shared/research/stormlog.md §2.1, §2.5, §5 items 1–26): flag meanings, case ids, record
// fields and drain rules follow it.
package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/inferprobe/inferprobe/artifact"
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
// before the server does (DESIGN.md, "Timing facts").
const MaxConcurrency = 50_000

// MaxOutputTokens bounds --output-tokens (a cap far beyond any served context length).
const MaxOutputTokens = 1 << 24

// ReservedBodyFields are the request-body fields inferprobe sets itself; --extra-body may not
// override them (nor the output cap field named by MaxTokensField).
var ReservedBodyFields = []string{"model", "messages", "stream", "stream_options"}

// Config is a whole profile run as the user asked for it. Durations are wall-clock; counts
// are per case. Validate checks every rule of the contract; Cases expands the matrix.
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
	Seed           int64

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

// UsageError is an unusable setting: the CLI maps it to exit code 2, before anything is sent
// or written.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Validate checks the configuration against the contract's rules and fills defaults that
// depend on other settings (DrainTimeout, MaxInFlight, Overflow). Every error is a *UsageError.
func (c *Config) Validate() error {
	if c.Endpoint == "" {
		return usagef("one of --endpoint or --base-url is required")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("endpoint %q must be an http or https URL", artifact.RedactURL(c.Endpoint))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return usagef("endpoint %q: port %s is not within 1..65535", artifact.RedactURL(c.Endpoint), p)
		}
	}
	if !httpguts.ValidHeaderFieldValue(c.APIKey) {
		return usagef("the API key holds characters an HTTP header cannot carry (control characters or newlines)")
	}
	if c.RunID == "" || len(c.RunID) > 128 || !httpguts.ValidHeaderFieldValue(c.RunID) || strings.ContainsAny(c.RunID, " \t") {
		return usagef("the run id must be 1 to 128 printable characters without spaces (it is sent in X-Request-Id)")
	}
	if strings.TrimSpace(c.Model) == "" {
		return usagef("--model is required")
	}
	if c.Timeout <= 0 {
		return usagef("--timeout must be > 0")
	}
	if c.DrainTimeout < 0 {
		return usagef("--drain-timeout must be > 0")
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = c.Timeout
	}
	switch c.MaxTokensField {
	case "":
		c.MaxTokensField = "max_tokens"
	case "max_tokens", "max_completion_tokens":
	default:
		return usagef("--max-tokens-field must be max_tokens or max_completion_tokens, not %q", c.MaxTokensField)
	}
	for k := range c.ExtraBody {
		for _, r := range append(ReservedBodyFields, c.MaxTokensField) {
			if k == r {
				return usagef("--extra-body may not set %q: inferprobe sets it itself", k)
			}
		}
		if k == "max_tokens" || k == "max_completion_tokens" {
			return usagef("--extra-body may not set %q: use --output-tokens", k)
		}
	}
	if len(c.InputTokens) == 0 || len(c.OutputTokens) == 0 {
		return usagef("--input-tokens and --output-tokens need at least one value")
	}
	for _, v := range c.InputTokens {
		if v < 1 || v > prompt.MaxInputTokens {
			return usagef("--input-tokens values must be within 1..%d, got %d", prompt.MaxInputTokens, v)
		}
	}
	for _, v := range c.OutputTokens {
		if v < 1 || v > MaxOutputTokens {
			return usagef("--output-tokens values must be within 1..%d, got %d", MaxOutputTokens, v)
		}
	}
	if c.Requests < 0 {
		return usagef("--requests must be ≥ 1")
	}
	if c.Duration < 0 {
		return usagef("--duration must be > 0")
	}
	if c.Duration > 0 && c.Requests > 1 {
		return usagef("--duration and --requests are mutually exclusive")
	}
	if c.Duration > 0 && c.Requests == 1 {
		c.Requests = 0 // legacy default --requests 1 given with --duration
	}
	if c.WarmupRequests < 0 {
		return usagef("--warmup-requests must be ≥ 0")
	}
	switch c.Arrival {
	case "":
		c.Arrival = schedule.Closed
	case schedule.Closed, schedule.FixedRate, schedule.Poisson, schedule.Burst, schedule.Replay:
	default:
		return usagef("--arrival must be closed, fixed-rate, poisson, burst or replay, not %q", c.Arrival)
	}
	open := c.OpenLoop()
	if open && len(c.Concurrency) > 0 {
		return usagef("--concurrency applies to closed loops only; with --arrival %s use --max-in-flight", c.Arrival)
	}
	if !open {
		if len(c.Concurrency) == 0 {
			c.Concurrency = []int{1}
		}
		for _, v := range c.Concurrency {
			if v < 1 || v > MaxConcurrency {
				return usagef("--concurrency values must be within 1..%d, got %d", MaxConcurrency, v)
			}
		}
		if c.MaxInFlight != 0 || c.Overflow != "" {
			return usagef("--max-in-flight and --overflow apply to open-loop arrivals only")
		}
		if c.Requests == 0 && c.Duration == 0 {
			c.Requests = 1
		}
	}
	rateModes := c.Arrival == schedule.FixedRate || c.Arrival == schedule.Poisson
	if rateModes && len(c.Rates) == 0 {
		return usagef("--arrival %s needs --rate", c.Arrival)
	}
	if !rateModes && len(c.Rates) > 0 {
		return usagef("--rate applies to --arrival fixed-rate or poisson only")
	}
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return usagef("--rate values must be finite and > 0, got %g", r)
		}
	}
	if c.Arrival == schedule.Burst {
		if c.BurstSize < 1 || c.BurstInterval <= 0 {
			return usagef("--arrival burst needs --burst-size ≥ 1 and --burst-interval > 0")
		}
	} else if c.BurstSize != 0 || c.BurstInterval != 0 {
		return usagef("--burst-size and --burst-interval apply to --arrival burst only")
	}
	if c.Arrival == schedule.Replay {
		if len(c.Trace) == 0 {
			return usagef("--arrival replay needs --arrival-trace")
		}
	} else if len(c.Trace) > 0 || c.TraceCase != "" {
		return usagef("--arrival-trace applies to --arrival replay only")
	}
	if open {
		if c.Requests == 0 && c.Duration == 0 && c.Arrival != schedule.Replay {
			return usagef("--arrival %s needs --requests or --duration", c.Arrival)
		}
		if c.MaxInFlight == 0 {
			c.MaxInFlight = 128
		}
		if c.MaxInFlight < 1 || c.MaxInFlight > MaxConcurrency {
			return usagef("--max-in-flight must be within 1..%d", MaxConcurrency)
		}
		switch c.Overflow {
		case "":
			c.Overflow = OverflowWait
		case OverflowWait, OverflowDrop:
		default:
			return usagef("--overflow must be wait or drop, not %q", c.Overflow)
		}
	}
	switch c.PromptMode {
	case "":
		c.PromptMode = prompt.Repeat
	case prompt.Repeat, prompt.Unique:
		if c.SharedPrefixRatio != 0 {
			return usagef("--shared-prefix-ratio applies to --prompt-mode shared-prefix only")
		}
		if c.PrefixGroups > 1 {
			return usagef("--prefix-groups applies to --prompt-mode shared-prefix only")
		}
	case prompt.SharedPrefix:
		if c.SharedPrefixRatio < 0 || c.SharedPrefixRatio > 1 || math.IsNaN(c.SharedPrefixRatio) {
			return usagef("--shared-prefix-ratio must be within 0..1")
		}
	default:
		return usagef("--prompt-mode must be repeat, unique or shared-prefix, not %q", c.PromptMode)
	}
	if c.PrefixGroups == 0 {
		c.PrefixGroups = 1
	}
	if c.PrefixGroups < 1 {
		return usagef("--prefix-groups must be ≥ 1")
	}
	switch c.CacheState {
	case "":
		c.CacheState = CacheUnspecified
	case CacheUnspecified, CacheCold:
	default:
		return usagef("--cache-state must be unspecified or cold, not %q", c.CacheState)
	}
	if c.CacheResetURL != "" {
		ru, err := url.Parse(c.CacheResetURL)
		if err != nil || (ru.Scheme != "http" && ru.Scheme != "https") || ru.Host == "" {
			return usagef("--cache-reset-url must be an http or https URL")
		}
	}
	if c.CacheResetTimeout < 0 {
		return usagef("--cache-reset-timeout must be ≥ 0")
	}
	cases, err := c.Cases()
	if err != nil {
		return err
	}
	// Schedules are checked here so that a too-large phase is a usage error before anything is sent.
	for _, cs := range cases {
		for _, ph := range c.phases() {
			if _, err := c.schedule(cs, ph); err != nil {
				return err
			}
		}
	}
	return nil
}

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
		return nil, usagef("--extra-body is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, usagef("--extra-body must be one JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, usagef("--extra-body must be a JSON object")
	}
	return m, nil
}
