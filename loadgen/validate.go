package loadgen

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// DefaultMaxInFlight is an open loop's --max-in-flight when none is given.
const DefaultMaxInFlight = 128

// UsageError is an unusable setting: the CLI maps it to exit code 2, before anything is sent
// or written.
type UsageError struct {
	Msg string
	// Flag is the setting the error is about: profile's flag name without dashes, which is
	// also a probe's workload key (e.g. "rate"); "" when the error is about the whole workload.
	Flag string
}

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// flagErr is a UsageError about the setting flag.
func flagErr(flag, format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Flag: flag}
}

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Defaults fills the settings left unset (zero) with the contract's defaults: the drain
// deadline is the request timeout, the output cap goes in max_tokens, arrivals are a closed
// loop of one worker sending one request (a count of 1 given with a duration is the old
// default and yields to it), an open loop holds up to DefaultMaxInFlight requests and waits
// when they are all busy, prompts repeat in one prefix group, and the cache state is
// unspecified. It changes nothing that is set, so Validate still sees every given value.
func (c *Config) Defaults() {
	if c.DrainTimeout == 0 {
		c.DrainTimeout = c.Timeout
	}
	if c.MaxTokensField == "" {
		c.MaxTokensField = "max_tokens"
	}
	if c.Arrival == "" {
		c.Arrival = schedule.Closed
	}
	if c.Duration > 0 && c.Requests == 1 {
		c.Requests = 0
	}
	if c.OpenLoop() {
		if c.MaxInFlight == 0 {
			c.MaxInFlight = DefaultMaxInFlight
		}
		if c.Overflow == "" {
			c.Overflow = OverflowWait
		}
	} else {
		if len(c.Concurrency) == 0 {
			c.Concurrency = []int{1}
		}
		if c.Requests == 0 && c.Duration == 0 {
			c.Requests = 1
		}
	}
	if c.PromptMode == "" {
		c.PromptMode = prompt.Repeat
	}
	if c.PrefixGroups == 0 {
		c.PrefixGroups = 1
	}
	if c.CacheState == "" {
		c.CacheState = CacheUnspecified
	}
}

// Validate checks a configuration that Defaults has completed against the contract's rules,
// one concern after the other: where requests go, what they carry, how many and when, the
// prompts, the cache state, and the size of every phase's schedule. It changes nothing; the
// first broken rule is returned as a *UsageError.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validateEndpoint, c.validateTimes, c.validateBody, c.validateCounts, c.validateArrival,
		c.validatePrompts, c.validateCache, c.validateSchedules, c.validateShards,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateEndpoint checks where requests go and what identifies them: the URL, the API key
// (an HTTP header value), the run id (sent in X-Request-Id) and the model.
func (c *Config) validateEndpoint() error {
	if c.Endpoint == "" {
		return flagErr("endpoint", "one of --endpoint or --base-url is required")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return flagErr("endpoint", "endpoint %q must be an http or https URL", artifact.EchoURL(c.Endpoint))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return flagErr("endpoint", "endpoint %q: port %s is not within 1..65535", artifact.EchoURL(c.Endpoint), p)
		}
	}
	if !httpguts.ValidHeaderFieldValue(c.APIKey) {
		return flagErr("api-key", "the API key holds characters an HTTP header cannot carry (control characters or newlines)")
	}
	if c.RunID == "" || len(c.RunID) > 128 || !httpguts.ValidHeaderFieldValue(c.RunID) || strings.ContainsAny(c.RunID, " \t") {
		return flagErr("run-id", "the run id must be 1 to 128 printable characters without spaces (it is sent in X-Request-Id)")
	}
	if strings.TrimSpace(c.Model) == "" {
		return flagErr("model", "--model is required")
	}
	return nil
}

// validateBody checks each request: the output cap's field, the extra body
// (which may not set what inferprobe sets) and the token targets and caps.
func (c *Config) validateBody() error {
	switch c.MaxTokensField {
	case "max_tokens", "max_completion_tokens":
	default:
		return flagErr("max-tokens-field", "--max-tokens-field must be max_tokens or max_completion_tokens, not %q", c.MaxTokensField)
	}
	for k := range c.ExtraBody {
		for _, r := range append(ReservedBodyFields, c.MaxTokensField) {
			if k == r {
				return flagErr("extra-body", "--extra-body may not set %q: inferprobe sets it itself", k)
			}
		}
		if k == "max_tokens" || k == "max_completion_tokens" {
			return flagErr("extra-body", "--extra-body may not set %q: use --output-tokens", k)
		}
	}
	if len(c.InputTokens) == 0 || len(c.OutputTokens) == 0 {
		return flagErr("input-tokens", "--input-tokens and --output-tokens need at least one value")
	}
	for _, v := range c.InputTokens {
		if v < 1 || v > prompt.MaxInputTokens {
			return flagErr("input-tokens", "--input-tokens values must be within 1..%d, got %d", prompt.MaxInputTokens, v)
		}
	}
	for _, v := range c.OutputTokens {
		if v < 1 || v > MaxOutputTokens {
			return flagErr("output-tokens", "--output-tokens values must be within 1..%d, got %d", MaxOutputTokens, v)
		}
	}
	return nil
}

// validateCounts checks how much each case sends: a request count or a window, and warmup.
func (c *Config) validateCounts() error {
	switch {
	case c.Requests < 0:
		return flagErr("requests", "--requests must be ≥ 1")
	case c.Duration > 0 && c.Requests > 1:
		return flagErr("duration", "--duration and --requests are mutually exclusive")
	case c.WarmupRequests < 0:
		return flagErr("warmup-requests", "--warmup-requests must be ≥ 0")
	}
	return nil
}

// checkArrivalMode refuses an arrival mode that is not one of the five.
func checkArrivalMode(m schedule.Mode) error {
	switch m {
	case schedule.Closed, schedule.FixedRate, schedule.Poisson, schedule.Burst, schedule.Replay:
		return nil
	}
	return flagErr("arrival", "--arrival must be closed, fixed-rate, poisson, burst or replay, not %q", m)
}

// validateArrival checks when requests are sent: the mode and, for each mode, the settings
// it needs and the ones it does not take.
func (c *Config) validateArrival() error {
	for _, check := range []func() error{
		func() error { return checkArrivalMode(c.Arrival) }, c.validateWorkers, c.validateRates, c.validateBurstAndTrace,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	if c.OpenLoop() {
		return c.validateOpenLoop()
	}
	return nil
}

// validateRates checks the rates, which fixed-rate and poisson arrivals need and no other
// mode takes.
func (c *Config) validateRates() error {
	rateModes := c.Arrival == schedule.FixedRate || c.Arrival == schedule.Poisson
	switch {
	case rateModes && len(c.Rates) == 0:
		return flagErr("arrival", "--arrival %s needs --rate", c.Arrival)
	case !rateModes && len(c.Rates) > 0:
		return flagErr("rate", "--rate applies to --arrival fixed-rate or poisson only")
	}
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return flagErr("rate", "--rate values must be finite and > 0, got %g", r)
		}
	}
	return nil
}

// validateBurstAndTrace checks the burst shape, which only burst arrivals take, and the
// trace, which only replay arrivals take.
func (c *Config) validateBurstAndTrace() error {
	if c.Arrival == schedule.Burst {
		if c.BurstSize < 1 || c.BurstInterval <= 0 {
			return flagErr("arrival", "--arrival burst needs --burst-size ≥ 1 and --burst-interval > 0")
		}
	} else if c.BurstSize != 0 || c.BurstInterval != 0 {
		return flagErr("burst-size", "--burst-size and --burst-interval apply to --arrival burst only")
	}
	if c.Arrival == schedule.Replay {
		if len(c.Trace) == 0 {
			return flagErr("arrival", "--arrival replay needs --arrival-trace")
		}
	} else if len(c.Trace) > 0 || c.TraceCase != "" {
		return flagErr("arrival-trace", "--arrival-trace applies to --arrival replay only")
	}
	return nil
}

// validateWorkers checks the closed loop's worker counts, which an open loop does not take;
// an open loop's in-flight bound and overflow policy, which a closed loop does not take.
func (c *Config) validateWorkers() error {
	if c.OpenLoop() {
		if len(c.Concurrency) > 0 {
			return flagErr("concurrency", "--concurrency applies to closed loops only; with --arrival %s use --max-in-flight", c.Arrival)
		}
		return nil
	}
	for _, v := range c.Concurrency {
		if v < 1 || v > MaxConcurrency {
			return flagErr("concurrency", "--concurrency values must be within 1..%d, got %d", MaxConcurrency, v)
		}
	}
	if c.MaxInFlight != 0 || c.Overflow != "" {
		return flagErr("max-in-flight", "--max-in-flight and --overflow apply to open-loop arrivals only")
	}
	return nil
}

// validateOpenLoop checks an open loop's length, in-flight bound and overflow policy.
func (c *Config) validateOpenLoop() error {
	if c.Requests == 0 && c.Duration == 0 && c.Arrival != schedule.Replay {
		return flagErr("arrival", "--arrival %s needs --requests or --duration", c.Arrival)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > MaxConcurrency {
		return flagErr("max-in-flight", "--max-in-flight must be within 1..%d", MaxConcurrency)
	}
	switch c.Overflow {
	case OverflowWait, OverflowDrop:
		return nil
	}
	return flagErr("overflow", "--overflow must be wait or drop, not %q", c.Overflow)
}

// validatePrompts checks the prompt mode and the shared-prefix settings only it takes.
func (c *Config) validatePrompts() error {
	switch c.PromptMode {
	case prompt.Repeat, prompt.Unique:
		if c.SharedPrefixRatio != 0 {
			return flagErr("shared-prefix-ratio", "--shared-prefix-ratio applies to --prompt-mode shared-prefix only")
		}
		if c.PrefixGroups > 1 {
			return flagErr("prefix-groups", "--prefix-groups applies to --prompt-mode shared-prefix only")
		}
	case prompt.SharedPrefix:
		if c.SharedPrefixRatio < 0 || c.SharedPrefixRatio > 1 || math.IsNaN(c.SharedPrefixRatio) {
			return flagErr("shared-prefix-ratio", "--shared-prefix-ratio must be within 0..1")
		}
	default:
		return flagErr("prompt-mode", "--prompt-mode must be repeat, unique or shared-prefix, not %q", c.PromptMode)
	}
	if c.PrefixGroups < 1 {
		return flagErr("prefix-groups", "--prefix-groups must be ≥ 1")
	}
	return nil
}

// validateCache checks the requested cache state and the reset that makes a cold one real.
func (c *Config) validateCache() error {
	switch c.CacheState {
	case CacheUnspecified, CacheCold:
	default:
		return flagErr("cache-state", "--cache-state must be unspecified or cold, not %q", c.CacheState)
	}
	if c.CacheResetURL != "" {
		ru, err := url.Parse(c.CacheResetURL)
		if err != nil || (ru.Scheme != "http" && ru.Scheme != "https") || ru.Host == "" {
			return flagErr("cache-reset-url", "--cache-reset-url must be an http or https URL")
		}
		if ru.User != nil {
			return flagErr("cache-reset-url", "--cache-reset-url must not carry user:password (URL credentials are never sent; the API key is)")
		}
	}
	return nil
}

// validateSchedules expands the cases (two settings may not give one case id) and builds
// every open-loop phase's schedule, so that a too-large phase is a usage error before
// anything is sent.
func (c *Config) validateSchedules() error {
	cases, err := c.Cases()
	if err != nil {
		return err
	}
	for _, cs := range cases {
		for _, ph := range c.phases() {
			if _, err := c.schedule(cs, ph); err != nil {
				return err
			}
		}
	}
	return nil
}
