package loadgen

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// validConfig is a small valid closed loop; the tests below change one setting at a time.
func validConfig() *Config {
	return &Config{
		Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "m", RunID: "r",
		Timeout: 10 * time.Second, InputTokens: []int{32}, OutputTokens: []int{8},
	}
}

func prepare(c *Config) error {
	c.Defaults()
	return c.Validate()
}

// TestValidateMessages pins every message of the validation, word for word: they are the
// CLI's and the daemon's error texts.
func TestValidateMessages(t *testing.T) {
	open := func(c *Config) { c.Arrival, c.Rates, c.Requests = schedule.Poisson, []float64{1}, 1 }
	cases := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"no endpoint", func(c *Config) { c.Endpoint = "" }, "one of --endpoint or --base-url is required"},
		{"endpoint scheme", func(c *Config) { c.Endpoint = "ftp://x/v1" }, `endpoint "ftp://x/v1" must be an http or https URL`},
		{"endpoint port", func(c *Config) { c.Endpoint = "http://h:99999/v1/chat/completions" }, `endpoint "http://h:99999/v1/chat/completions": port 99999 is not within 1..65535`},
		{"api key", func(c *Config) { c.APIKey = "sk-a\nb" }, "the API key holds characters an HTTP header cannot carry (control characters or newlines)"},
		{"run id empty", func(c *Config) { c.RunID = "" }, "the run id must be 1 to 128 printable characters without spaces (it is sent in X-Request-Id)"},
		{"run id space", func(c *Config) { c.RunID = "a b" }, "the run id must be 1 to 128 printable characters without spaces (it is sent in X-Request-Id)"},
		{"model", func(c *Config) { c.Model = " " }, "--model is required"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "--timeout must be > 0 seconds, not 0"},
		{"timeout over a week", func(c *Config) { c.Timeout = 8 * 24 * time.Hour }, "--timeout must be at most 604800 seconds (7 days), not 691200"},
		{"drain timeout", func(c *Config) { c.DrainTimeout = -1 }, "--drain-timeout must be > 0 seconds, not -1e-09"},
		{"max tokens field", func(c *Config) { c.MaxTokensField = "x" }, `--max-tokens-field must be max_tokens or max_completion_tokens, not "x"`},
		{"extra body reserved", func(c *Config) { c.ExtraBody = map[string]any{"model": "x"} }, `--extra-body may not set "model": inferprobe sets it itself`},
		{"extra body cap field", func(c *Config) { c.ExtraBody = map[string]any{"max_tokens": 1} }, `--extra-body may not set "max_tokens": inferprobe sets it itself`},
		{"extra body other cap", func(c *Config) {
			c.MaxTokensField, c.ExtraBody = "max_completion_tokens", map[string]any{"max_tokens": 1}
		}, `--extra-body may not set "max_tokens": use --output-tokens`},
		{"no tokens", func(c *Config) { c.InputTokens = nil }, "--input-tokens and --output-tokens need at least one value"},
		{"input tokens", func(c *Config) { c.InputTokens = []int{0} }, "--input-tokens values must be within 1..1048576, got 0"},
		{"output tokens", func(c *Config) { c.OutputTokens = []int{MaxOutputTokens + 1} }, "--output-tokens values must be within 1..16777216, got 16777217"},
		{"requests", func(c *Config) { c.Requests = -1 }, "--requests must be ≥ 1"},
		{"duration", func(c *Config) { c.Duration = -1 }, "--duration must be at least 0.001 seconds (1 ms), not -1e-09"},
		{"duration under 1 ms", func(c *Config) { c.Duration = time.Millisecond - 1 }, "--duration must be at least 0.001 seconds (1 ms), not 0.000999999"},
		{"duration and requests", func(c *Config) { c.Duration, c.Requests = time.Second, 2 }, "--duration and --requests are mutually exclusive"},
		{"warmup", func(c *Config) { c.WarmupRequests = -1 }, "--warmup-requests must be ≥ 0"},
		{"arrival", func(c *Config) { c.Arrival = "x" }, `--arrival must be closed, fixed-rate, poisson, burst or replay, not "x"`},
		{"concurrency open", func(c *Config) { open(c); c.Concurrency = []int{1} }, "--concurrency applies to closed loops only; with --arrival poisson use --max-in-flight"},
		{"concurrency range", func(c *Config) { c.Concurrency = []int{0} }, "--concurrency values must be within 1..50000, got 0"},
		{"max in flight closed", func(c *Config) { c.MaxInFlight = 4 }, "--max-in-flight and --overflow apply to open-loop arrivals only"},
		{"overflow closed", func(c *Config) { c.Overflow = OverflowDrop }, "--max-in-flight and --overflow apply to open-loop arrivals only"},
		{"no rate", func(c *Config) { open(c); c.Rates = nil }, "--arrival poisson needs --rate"},
		{"rate closed", func(c *Config) { c.Rates = []float64{1} }, "--rate applies to --arrival fixed-rate or poisson only"},
		{"rate negative", func(c *Config) { open(c); c.Rates = []float64{-1} }, "--rate values must be finite and > 0, got -1"},
		{"rate inf", func(c *Config) { open(c); c.Rates = []float64{math.Inf(1)} }, "--rate values must be finite and > 0, got +Inf"},
		{"burst", func(c *Config) { c.Arrival, c.Requests = schedule.Burst, 2 }, "--arrival burst needs --burst-size ≥ 1 and --burst-interval > 0"},
		{"burst closed", func(c *Config) { c.BurstSize = 2 }, "--burst-size and --burst-interval apply to --arrival burst only"},
		{"replay", func(c *Config) { c.Arrival = schedule.Replay }, "--arrival replay needs --arrival-trace"},
		{"trace closed", func(c *Config) { c.Trace = []time.Duration{0} }, "--arrival-trace applies to --arrival replay only"},
		{"trace case closed", func(c *Config) { c.TraceCase = "x" }, "--arrival-trace applies to --arrival replay only"},
		{"open count", func(c *Config) { open(c); c.Requests = 0 }, "--arrival poisson needs --requests or --duration"},
		{"max in flight", func(c *Config) { open(c); c.MaxInFlight = -1 }, "--max-in-flight must be within 1..50000"},
		{"overflow", func(c *Config) { open(c); c.Overflow = "x" }, `--overflow must be wait or drop, not "x"`},
		{"ratio repeat", func(c *Config) { c.PromptMode, c.SharedPrefixRatio = prompt.Repeat, 0.5 }, "--shared-prefix-ratio applies to --prompt-mode shared-prefix only"},
		{"groups unique", func(c *Config) { c.PromptMode, c.PrefixGroups = prompt.Unique, 2 }, "--prefix-groups applies to --prompt-mode shared-prefix only"},
		{"ratio range", func(c *Config) { c.PromptMode, c.SharedPrefixRatio = prompt.SharedPrefix, 2 }, "--shared-prefix-ratio must be within 0..1"},
		{"ratio NaN", func(c *Config) { c.PromptMode, c.SharedPrefixRatio = prompt.SharedPrefix, math.NaN() }, "--shared-prefix-ratio must be within 0..1"},
		{"prompt mode", func(c *Config) { c.PromptMode = "x" }, `--prompt-mode must be repeat, unique or shared-prefix, not "x"`},
		{"groups", func(c *Config) { c.PromptMode, c.PrefixGroups = prompt.SharedPrefix, -1 }, "--prefix-groups must be ≥ 1"},
		{"cache state", func(c *Config) { c.CacheState = "x" }, `--cache-state must be unspecified or cold, not "x"`},
		{"cache reset url", func(c *Config) { c.CacheResetURL = "ftp://x" }, "--cache-reset-url must be an http or https URL"},
		{"cache reset url credentials", func(c *Config) { c.CacheResetURL = "http://u:secret@h/reset_prefix_cache" }, "--cache-reset-url must not carry user:password (URL credentials are never sent; the API key is)"},
		{"cache reset timeout", func(c *Config) { c.CacheResetTimeout = -1 }, "--cache-reset-timeout must be at least 0 seconds, not -1e-09"},
		{"case ids", func(c *Config) { c.Concurrency = []int{1, 1} }, "two workload cases would share the ID c1_in32_out8"},
		{"schedule size", func(c *Config) {
			c.Arrival, c.Rates, c.Duration = schedule.FixedRate, []float64{1e9}, 10*time.Millisecond
		}, "case fixed1e+09_in32_out8 measured phase would schedule more than 1,000,000 requests"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(c)
			err := prepare(c)
			if err == nil {
				t.Fatalf("accepted %+v", c)
			}
			if !IsUsage(err) || err.Error() != tc.want {
				t.Fatalf("error %q (%T), want %q", err, err, tc.want)
			}
		})
	}
}

// TestDefaults: the settings a config leaves unset take the contract's defaults.
func TestDefaults(t *testing.T) {
	c := validConfig()
	if err := prepare(c); err != nil {
		t.Fatal(err)
	}
	want := validConfig()
	want.DrainTimeout, want.MaxTokensField, want.Arrival = want.Timeout, "max_tokens", schedule.Closed
	want.Concurrency, want.Requests = []int{1}, 1
	want.PromptMode, want.PrefixGroups, want.CacheState = prompt.Repeat, 1, CacheUnspecified
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("closed loop defaults\n got %+v\nwant %+v", c, want)
	}

	c = validConfig()
	c.Arrival, c.Rates, c.Duration, c.Requests = schedule.Poisson, []float64{2}, time.Second, 1
	if err := prepare(c); err != nil {
		t.Fatal(err)
	}
	if c.MaxInFlight != 128 || c.Overflow != OverflowWait || c.Requests != 0 || c.Concurrency != nil {
		t.Fatalf("open loop defaults: max in flight %d, overflow %q, requests %d, concurrency %v", c.MaxInFlight, c.Overflow, c.Requests, c.Concurrency)
	}
}

// TestUsageErrorNamesItsSetting: a rule's error names the setting it is about (the daemon
// names that workload key), or none for a rule about the whole workload.
func TestUsageErrorNamesItsSetting(t *testing.T) {
	for _, tc := range []struct {
		mod  func(c *Config)
		flag string
	}{
		{func(c *Config) { c.Arrival, c.Rates, c.Requests = schedule.Poisson, []float64{-1}, 1 }, "rate"},
		{func(c *Config) { c.Arrival, c.Requests = schedule.Poisson, 1 }, "arrival"},
		{func(c *Config) { c.MaxInFlight = 4 }, "max-in-flight"},
		{func(c *Config) { c.OutputTokens = []int{0} }, "output-tokens"},
		{func(c *Config) { c.APIKey = "a\nb" }, "api-key"},
		{func(c *Config) { c.Concurrency = []int{2, 2} }, ""},
	} {
		c := validConfig()
		tc.mod(c)
		var ue *UsageError
		if err := prepare(c); !errors.As(err, &ue) || ue.Flag != tc.flag {
			t.Errorf("%v: flag %q, want %q", err, ue.Flag, tc.flag)
		}
	}
}
