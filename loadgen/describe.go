package loadgen

import (
	"encoding/json"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// GeneratorName and GeneratorVersion identify the prompt generator in infer.workload; the
// version changes whenever the generated text would.
const (
	GeneratorName    = "inferprobe.synthetic"
	GeneratorVersion = 1
)

func (c *Config) arrivalRecord(cs Case) artifact.ArrivalSpec {
	a := artifact.ArrivalSpec{Mode: string(c.Arrival)}
	switch c.Arrival {
	case schedule.FixedRate, schedule.Poisson:
		a.RatePerSecond = artifact.Ptr(cs.Rate)
	case schedule.Burst:
		a.BurstSize = artifact.Ptr(int64(c.BurstSize))
		a.BurstIntervalSeconds = artifact.Ptr(c.BurstInterval.Seconds())
	case schedule.Replay:
		t := &artifact.ArrivalTrace{Source: c.TraceSource, Arrivals: int64(len(c.Trace)), Digest: c.TraceDigest}
		if c.TraceCase != "" {
			t.CaseID = artifact.Ptr(c.TraceCase)
		}
		a.Trace = t
	}
	return a
}

func (c *Config) promptRecord() artifact.PromptSpec {
	p := artifact.PromptSpec{Mode: string(c.PromptMode)}
	if c.PromptMode == prompt.SharedPrefix {
		p.SharedPrefixRatio = artifact.Ptr(c.SharedPrefixRatio)
		p.PrefixGroups = artifact.Ptr(int64(c.PrefixGroups))
	}
	return p
}

func (c *Config) countAndDuration() (*int64, *float64) {
	var n *int64
	var d *float64
	if c.Requests > 0 {
		n = artifact.Ptr(int64(c.Requests))
	}
	if c.Duration > 0 {
		d = artifact.Ptr(c.Duration.Seconds())
	}
	return n, d
}

// SessionConfig is the config block of the first infer.session line. The API key is never
// part of it; URLs are redacted.
func (c *Config) SessionConfig(tokenizer string) *artifact.SessionConfig {
	cases, _ := c.Cases()
	n, d := c.countAndDuration()
	sc := &artifact.SessionConfig{
		Endpoint:                 artifact.RedactURL(c.Endpoint),
		Model:                    c.Model,
		Concurrency:              ints64(c.Concurrency),
		InputTokens:              ints64(c.InputTokens),
		OutputTokens:             ints64(c.OutputTokens),
		DurationSeconds:          d,
		RequestCount:             n,
		Stream:                   c.Stream,
		StreamIncludeUsage:       c.Stream && c.StreamUsage,
		Tokenizer:                tokenizer,
		SystemSampler:            "none",
		MaxInFlight:              c.maxInFlightRecord(),
		Overflow:                 strPtr(c.Overflow),
		Prompts:                  c.promptRecord(),
		CacheState:               c.CacheState,
		CacheResetTimeoutSeconds: c.CacheResetTimeout.Seconds(),
		EnvironmentProxies:       artifact.EnvironmentProxies{Policy: "ignored", Schemes: client.IgnoredProxyEnv()},
	}
	if sc.Concurrency == nil {
		sc.Concurrency = []int64{}
	}
	if sc.EnvironmentProxies.Schemes == nil {
		sc.EnvironmentProxies.Schemes = []string{}
	}
	for _, cs := range cases {
		sc.Arrivals = append(sc.Arrivals, c.arrivalRecord(cs))
	}
	if c.CacheResetURL != "" {
		sc.CacheResetURL = artifact.Ptr(artifact.RedactURL(c.CacheResetURL))
	}
	return sc
}

// WorkloadRecord is the run's infer.workload record with its workload_digest.
func (c *Config) WorkloadRecord(sessionID string, tok prompt.Tokenizer) (*artifact.Workload, error) {
	cases, err := c.Cases()
	if err != nil {
		return nil, err
	}
	n, d := c.countAndDuration()
	extra := json.RawMessage("{}")
	if len(c.ExtraBody) > 0 {
		if extra, err = json.Marshal(c.ExtraBody); err != nil {
			return nil, err
		}
	}
	w := &artifact.Workload{
		SessionID: sessionID,
		Seed:      c.Seed,
		Generator: artifact.Generator{Name: GeneratorName, Version: GeneratorVersion},
		Measurement: artifact.Measurement{
			RequestCount: n, DurationSeconds: d,
			MaxInFlight: c.maxInFlightRecord(), Overflow: strPtr(c.Overflow),
			DrainTimeoutSeconds: c.DrainTimeout.Seconds(), TimeoutSeconds: c.Timeout.Seconds(),
		},
		Prompts: c.promptRecord(),
		Warmup:  artifact.Warmup{Requests: int64(c.WarmupRequests), Prompts: "separate"},
		Decoding: artifact.Decoding{
			Stream: c.Stream, StreamIncludeUsage: c.Stream && c.StreamUsage,
			MaxTokensField: c.MaxTokensField, ExtraBody: extra, OtherSettings: "server defaults",
		},
		Tokenizer:    tokenizerRecord(tok),
		Cache:        artifact.WorkloadCache{Requested: c.CacheState},
		ChatTemplate: artifact.ChatTemplate{AppliedBy: "server"},
		Shard:        c.shardInfo(),
	}
	if c.PromptMode == prompt.Repeat {
		w.Warmup.Prompts = "measured"
	}
	if c.CacheResetURL != "" {
		w.Cache.ResetURL = artifact.Ptr(artifact.RedactURL(c.CacheResetURL))
	}
	for _, cs := range cases {
		wc := artifact.WorkloadCase{
			CaseID: cs.ID, InputTokens: int64(cs.InputTokens), OutputTokens: int64(cs.OutputTokens),
			Arrival: c.arrivalRecord(cs),
		}
		if c.OpenLoop() {
			wc.MaxInFlight = artifact.Ptr(int64(c.MaxInFlight))
		} else {
			wc.Concurrency = artifact.Ptr(int64(cs.Concurrency))
		}
		w.Cases = append(w.Cases, wc)
	}
	if w.WorkloadDigest, err = w.TrafficDigest(); err != nil {
		return nil, err
	}
	return w, nil
}

func tokenizerRecord(tok prompt.Tokenizer) artifact.Tokenizer {
	if tok == nil {
		return artifact.Tokenizer{Source: SourceUnknown}
	}
	t := artifact.Tokenizer{Source: tokenSource(tok), Exact: tok.Exact(), Name: artifact.Ptr(tok.Name())}
	if tok.Exact() {
		t.Library = artifact.Ptr("github.com/tiktoken-go/tokenizer")
	}
	return t
}

func ints64(v []int) []int64 {
	if v == nil {
		return nil
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// maxInFlightRecord is --max-in-flight for records: null for a closed loop.
func (c *Config) maxInFlightRecord() *int64 {
	if !c.OpenLoop() {
		return nil
	}
	return artifact.Ptr(int64(c.MaxInFlight))
}
