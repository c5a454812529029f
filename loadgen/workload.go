package loadgen

import (
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// Defaults of the workload settings that Config.Defaults does not derive from others.
const (
	DefaultTimeout           = 60 * time.Second
	DefaultInputTokens       = 512
	DefaultOutputTokens      = 128
	DefaultCacheResetTimeout = 10 * time.Second
	DefaultTokenizer         = "auto"
	DefaultTiktokenEncoding  = "cl100k_base"
)

// Workload is a profile workload as the user wrote it: profile's flags, or a probe's
// workload mapping in the daemon's configuration, whose keys are the flag names without
// dashes (see UnmarshalYAML). A zero field takes profile's default. Pointer fields are set
// exactly when the setting was given: some rules are about given values (--duration 0 is
// refused, --stream and --no-stream exclude each other). Times are in seconds, as the flags
// take them. Config turns a Workload into the validated Config the run pipeline runs.
type Workload struct {
	// Where requests go and as whom (--endpoint or --base-url, --model, --api-key, --run-id).
	// They are not workload keys: the daemon takes them from the probe's target.
	Endpoint string
	BaseURL  string // a /v1 base URL, used when Endpoint is empty; /chat/completions is appended
	Model    string
	APIKey   string
	RunID    string // default: a new UUID

	Timeout        *float64 // default 60
	DrainTimeout   *float64 // given, > 0 (default: Timeout)
	Stream         *bool    // default true
	NoStream       *bool    // excludes Stream
	StreamUsage    *bool    // default true
	NoStreamUsage  *bool    // excludes StreamUsage
	MaxTokensField string   // default max_tokens
	ExtraBody      string   // a JSON object
	Seed           *int64   // default 0; the daemon gives each run its own (Config.UseRunSeed)

	Concurrency    []int    // default [1]; given, not empty
	InputTokens    []int    // default [512]
	OutputTokens   []int    // default [128]
	Requests       *int     // given, ≥ 1; excludes Duration unless 1
	Duration       *float64 // given, > 0
	WarmupRequests int

	Arrival          *string // default closed
	Rates            []float64
	BurstSize        int
	BurstInterval    float64
	ArrivalTrace     string // a file: offset_ms lines or an inferprobe artifact
	ArrivalTraceCase string
	MaxInFlight      *int    // open loop only; given, ≥ 1 (default 128)
	Overflow         *string // open loop only (default wait)

	PromptMode        string // default repeat
	SharedPrefixRatio float64
	PrefixGroups      *int // given, ≥ 1 (default 1)

	CacheState        string // default unspecified
	CacheResetURL     string
	CacheResetTimeout *float64 // default 10

	Tokenizer         *string // auto (default), tiktoken or none
	TiktokenEncoding  string  // default cl100k_base
	StrictTokenCounts bool

	// Shards and Shard slice the run (profile --shards N --shard K); 0 shards is unsharded.
	Shards, Shard int
}

func or[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// Config turns the workload into a run configuration: the rules about given settings, the
// arrival trace read from its file, Config.Defaults and Config.Validate. Every error is a
// *UsageError, except an unreadable or invalid trace file (*TraceInputError).
func (w *Workload) Config() (*Config, error) {
	if err := w.checkGiven(); err != nil {
		return nil, err
	}
	c := &Config{
		Endpoint: w.Endpoint, Model: w.Model, APIKey: w.APIKey, RunID: w.RunID,
		Stream:         or(w.Stream, true) && !or(w.NoStream, false),
		StreamUsage:    or(w.StreamUsage, true) && !or(w.NoStreamUsage, false),
		MaxTokensField: w.MaxTokensField, Seed: or(w.Seed, 0),
		Concurrency: w.Concurrency, InputTokens: w.InputTokens, OutputTokens: w.OutputTokens,
		Requests: or(w.Requests, 0), WarmupRequests: w.WarmupRequests,
		Arrival: schedule.Mode(or(w.Arrival, string(schedule.Closed))), Rates: w.Rates, BurstSize: w.BurstSize,
		PromptMode: prompt.Mode(w.PromptMode), SharedPrefixRatio: w.SharedPrefixRatio, PrefixGroups: or(w.PrefixGroups, 0),
		CacheState: w.CacheState, CacheResetURL: w.CacheResetURL,
		Shards: w.Shards, Shard: w.Shard,
	}
	if c.InputTokens == nil {
		c.InputTokens = []int{DefaultInputTokens}
	}
	if c.OutputTokens == nil {
		c.OutputTokens = []int{DefaultOutputTokens}
	}
	if c.Endpoint == "" && w.BaseURL != "" {
		var err error
		if c.Endpoint, err = endpointOf(w.BaseURL); err != nil {
			return nil, err
		}
	}
	if c.RunID == "" {
		c.RunID = uuid.NewString()
	}
	if err := w.setTimes(c); err != nil {
		return nil, err
	}
	if err := w.checkGivenValues(); err != nil {
		return nil, err
	}
	var err error
	if c.ExtraBody, err = ParseExtraBody(w.ExtraBody); err != nil {
		return nil, err
	}
	if err := w.setArrival(c); err != nil {
		return nil, err
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkGiven refuses settings given together that exclude each other.
func (w *Workload) checkGiven() error {
	for _, p := range []struct {
		a, b  string
		given bool
	}{
		{"stream", "no-stream", w.Stream != nil && w.NoStream != nil},
		{"stream-usage", "no-stream-usage", w.StreamUsage != nil && w.NoStreamUsage != nil},
		{"requests", "duration", w.Requests != nil && w.Duration != nil && *w.Requests != 1},
	} {
		if p.given {
			return flagErr(p.a, "--%s and --%s are mutually exclusive", p.a, p.b)
		}
	}
	return nil
}

// endpointOf is the Chat Completions URL of a /v1 base URL (ChatCompletionsURL), which must
// be an absolute http(s) URL; the error echoes the base URL as typed (artifact.EchoURL: no
// credentials).
func endpointOf(baseURL string) (string, error) {
	endpoint, err := ChatCompletionsURL(baseURL)
	switch {
	case errors.Is(err, ErrBaseIsEndpoint):
		return "", flagErr("base-url", "--base-url is the /v1 base (…/v1); give a full …/chat/completions URL with --endpoint")
	case err != nil:
		return "", flagErr("base-url", "--base-url %q must be an http or https URL (…/v1)", artifact.EchoURL(baseURL))
	}
	return endpoint, nil
}

// Errors of ChatCompletionsURL.
var (
	// ErrBaseIsEndpoint: a base URL that already ends in /chat/completions.
	ErrBaseIsEndpoint = errors.New("the base URL already ends in /chat/completions")
	// ErrNotHTTPURL: a base URL that does not parse, or is not an absolute http(s) URL.
	ErrNotHTTPURL = errors.New("not an absolute http or https URL")
)

// ChatCompletionsURL is the Chat Completions URL of a /v1 base URL: /chat/completions joined
// to its path (trailing slashes dropped), its query and credentials kept as given, e.g.
// "http://h:8000/v1?key=x" → "http://h:8000/v1/chat/completions?key=x". Errors:
// ErrNotHTTPURL, ErrBaseIsEndpoint.
func ChatCompletionsURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", ErrNotHTTPURL
	}
	base := strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(base, "/chat/completions") {
		return "", ErrBaseIsEndpoint
	}
	u.Path = base + "/chat/completions"
	u.RawPath = ""
	return u.String(), nil
}

// checkGivenValues refuses given values that would otherwise read as "unset".
func (w *Workload) checkGivenValues() error {
	switch {
	case w.Requests != nil && *w.Requests < 1:
		return flagErr("requests", "--requests must be ≥ 1")
	case w.MaxInFlight != nil && *w.MaxInFlight < 1:
		return flagErr("max-in-flight", "--max-in-flight must be ≥ 1")
	case w.PrefixGroups != nil && *w.PrefixGroups < 1:
		return flagErr("prefix-groups", "--prefix-groups must be ≥ 1")
	case w.Concurrency != nil && len(w.Concurrency) == 0:
		return flagErr("concurrency", "--concurrency needs at least one value")
	}
	return nil
}

// setArrival checks the arrival mode (an empty one too, which Config.Defaults would take
// for closed), sets an open loop's in-flight bound and overflow policy, which a closed loop
// does not take, and reads the replay trace.
func (w *Workload) setArrival(c *Config) error {
	if err := checkArrivalMode(c.Arrival); err != nil {
		return err
	}
	if !c.OpenLoop() && (w.MaxInFlight != nil || w.Overflow != nil) {
		return flagErr("max-in-flight", "--max-in-flight and --overflow apply to open-loop arrivals only")
	}
	if c.OpenLoop() {
		c.MaxInFlight, c.Overflow = or(w.MaxInFlight, 0), or(w.Overflow, "")
	}
	if w.ArrivalTraceCase != "" && w.ArrivalTrace == "" {
		return flagErr("arrival-trace-case", "--arrival-trace-case needs --arrival-trace")
	}
	if w.ArrivalTrace == "" {
		return nil
	}
	if c.Arrival != schedule.Replay {
		return flagErr("arrival-trace", "--arrival-trace applies to --arrival replay only")
	}
	return LoadArrivalTrace(c, w.ArrivalTrace, w.ArrivalTraceCase)
}

// NewTokenizer returns the workload's tokenizer and its name: auto and tiktoken count with
// the embedded tiktoken encoding; none gives the marked estimate (refused with
// StrictTokenCounts). Errors are *UsageError.
func (w *Workload) NewTokenizer() (prompt.Tokenizer, string, error) {
	switch name := or(w.Tokenizer, DefaultTokenizer); name {
	case "auto", "tiktoken":
		enc := w.TiktokenEncoding
		if enc == "" {
			enc = DefaultTiktokenEncoding
		}
		tok, err := prompt.TiktokenCounter(enc)
		if err != nil {
			return nil, "", flagErr("tiktoken-encoding", "--tiktoken-encoding: %v", err)
		}
		return tok, name, nil
	case "none":
		if w.StrictTokenCounts {
			return nil, "", flagErr("strict-token-counts", "--strict-token-counts needs a tokenizer (--tokenizer auto or tiktoken)")
		}
		return prompt.EstimateCounter(), "none", nil
	default:
		return nil, "", flagErr("tokenizer", "--tokenizer must be auto, tiktoken or none, not %q", name)
	}
}
