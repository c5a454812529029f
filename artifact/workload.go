package artifact

import (
	"encoding/json"
)

// ArrivalClosed is the closed-loop arrival mode; every other mode
// (fixed-rate, poisson, burst, replay) is an open loop.
const ArrivalClosed = "closed"

// Workload is the infer.workload v1 record: what traffic a run sent, so it
// can be repeated.
type Workload struct {
	SessionID string `json:"session_id"`
	// WorkloadDigest is TrafficDigest of this record: 64 lowercase hex digits.
	WorkloadDigest string         `json:"workload_digest"`
	Seed           int64          `json:"seed"`
	Generator      Generator      `json:"generator"`
	Cases          []WorkloadCase `json:"cases"`
	Measurement    Measurement    `json:"measurement"`
	Prompts        PromptSpec     `json:"prompts"`
	Warmup         Warmup         `json:"warmup"`
	Decoding       Decoding       `json:"decoding"`
	Tokenizer      Tokenizer      `json:"tokenizer"`
	Cache          WorkloadCache  `json:"cache"`
	ChatTemplate   ChatTemplate   `json:"chat_template"`
	// Shard names this artifact's slice of a sharded run (profile --shards N);
	// omitted in an unsharded run. It is not part of WorkloadDigest, so every
	// shard of one run records one digest.
	Shard *ShardInfo `json:"shard,omitempty"`
}

// ShardInfo is infer.workload's shard block: which slice of one run's
// schedule this artifact holds. Shard K of Shards N sends the open-loop
// arrivals i ≡ K (mod N) of the run's one schedule; in a closed loop of C
// workers it runs ceil((C−K)/N) of them (global workers K, K+N, …) and owns
// the request indexes i with (i mod C) mod N = K. RunID is the run id every
// shard shares (it is in each X-Request-Id).
type ShardInfo struct {
	Shard  int64  `json:"shard"`
	Shards int64  `json:"shards"`
	RunID  string `json:"run_id"`
}

func (Workload) selfEncoding() {}

// RecordKind returns KindWorkload.
func (Workload) RecordKind() Kind { return KindWorkload }

// MarshalJSON writes the record with its event_type and schema_version.
func (w Workload) MarshalJSON() ([]byte, error) {
	type plain Workload
	return withKind(KindWorkload, plain(w))
}

// TrafficDigest computes workload_digest: Digest of the canonical JSON of
// {seed, generator, cases (a replay trace reduced to arrivals and digest),
// measurement {request_count, duration_seconds, plus max_in_flight and
// overflow when any case is an open loop}, prompts, warmup, decoding,
// tokenizer, cache_requested}. It leaves out the endpoint, model, timeouts,
// drain timeout, reset URL and trace source, so one workload sent to two
// engine configurations has one digest; integral floats count as integers
// (extra_body 0 and 0.0 are equal).
func (w Workload) TrafficDigest() (string, error) {
	openLoop := false
	cases := make([]any, 0, len(w.Cases))
	for _, c := range w.Cases {
		if c.Arrival.Mode != ArrivalClosed {
			openLoop = true
		}
		arrival := map[string]any{"mode": c.Arrival.Mode}
		if c.Arrival.RatePerSecond != nil {
			arrival["rate_per_second"] = *c.Arrival.RatePerSecond
		}
		if c.Arrival.BurstSize != nil {
			arrival["burst_size"] = *c.Arrival.BurstSize
		}
		if c.Arrival.BurstIntervalSeconds != nil {
			arrival["burst_interval_seconds"] = *c.Arrival.BurstIntervalSeconds
		}
		if t := c.Arrival.Trace; t != nil {
			arrival["trace"] = map[string]any{"arrivals": t.Arrivals, "digest": t.Digest}
		}
		cases = append(cases, map[string]any{
			"case_id":       c.CaseID,
			"input_tokens":  c.InputTokens,
			"output_tokens": c.OutputTokens,
			"concurrency":   c.Concurrency,
			"max_in_flight": c.MaxInFlight,
			"arrival":       arrival,
		})
	}
	measurement := map[string]any{
		"request_count":    w.Measurement.RequestCount,
		"duration_seconds": w.Measurement.DurationSeconds,
	}
	if openLoop {
		measurement["max_in_flight"] = w.Measurement.MaxInFlight
		measurement["overflow"] = w.Measurement.Overflow
	}
	return Digest(map[string]any{
		"seed":            w.Seed,
		"generator":       w.Generator,
		"cases":           cases,
		"measurement":     measurement,
		"prompts":         w.Prompts,
		"warmup":          w.Warmup,
		"decoding":        w.Decoding,
		"tokenizer":       w.Tokenizer,
		"cache_requested": w.Cache.Requested,
	})
}

// Generator names the prompt generator and its version; the version changes
// whenever the generated text would.
type Generator struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// WorkloadCase is one case of the workload matrix.
type WorkloadCase struct {
	CaseID       string `json:"case_id"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	// Concurrency is the closed-loop worker count; null for open loops.
	Concurrency *int64 `json:"concurrency"`
	// MaxInFlight is the open-loop in-flight cap; null for closed loops.
	MaxInFlight *int64      `json:"max_in_flight"`
	Arrival     ArrivalSpec `json:"arrival"`
}

// ArrivalSpec is an arrival shape: mode "closed", "fixed-rate", "poisson",
// "burst" or "replay", with only the fields its mode takes.
type ArrivalSpec struct {
	Mode string `json:"mode"`
	// RatePerSecond is set for fixed-rate and poisson (requests/second).
	RatePerSecond *float64 `json:"rate_per_second,omitempty"`
	// BurstSize and BurstIntervalSeconds are set for burst.
	BurstSize            *int64   `json:"burst_size,omitempty"`
	BurstIntervalSeconds *float64 `json:"burst_interval_seconds,omitempty"`
	// Trace is set for replay.
	Trace *ArrivalTrace `json:"trace,omitempty"`
}

// ArrivalTrace describes a replayed arrival trace.
type ArrivalTrace struct {
	// Source says where the offsets came from ("offset_ms trace" or
	// "inferprobe artifact"); not part of the workload digest.
	Source string `json:"source"`
	// CaseID is the artifact case replayed, null for an offset_ms trace.
	CaseID *string `json:"case_id"`
	// Arrivals is the number of offsets in the trace.
	Arrivals int64 `json:"arrivals"`
	// Digest identifies the offsets (64 lowercase hex digits).
	Digest string `json:"digest"`
}

// Measurement holds the phase-length settings of a run.
type Measurement struct {
	RequestCount    *int64   `json:"request_count"`
	DurationSeconds *float64 `json:"duration_seconds"`
	// MaxInFlight and Overflow apply to open-loop arrivals only (null for closed loops).
	MaxInFlight         *int64  `json:"max_in_flight"`
	Overflow            *string `json:"overflow"`
	DrainTimeoutSeconds float64 `json:"drain_timeout_seconds"`
	TimeoutSeconds      float64 `json:"timeout_seconds"`
}

// PromptSpec is the prompt mode: "repeat", "unique" or "shared-prefix"
// (the last with its ratio in (0,1) and group count).
type PromptSpec struct {
	Mode              string   `json:"mode"`
	SharedPrefixRatio *float64 `json:"shared_prefix_ratio,omitempty"`
	PrefixGroups      *int64   `json:"prefix_groups,omitempty"`
}

// Warmup is the warmup setting: request count and whether warmup prompts
// are the measured ones ("measured", repeat mode) or separate ("separate").
type Warmup struct {
	Requests int64  `json:"requests"`
	Prompts  string `json:"prompts"`
}

// Decoding is what the requests asked of the server.
type Decoding struct {
	Stream             bool   `json:"stream"`
	StreamIncludeUsage bool   `json:"stream_include_usage"`
	MaxTokensField     string `json:"max_tokens_field"`
	// ExtraBody is the --extra-body object merged into every request ({}
	// when none).
	ExtraBody json.RawMessage `json:"extra_body"`
	// OtherSettings is "server defaults".
	OtherSettings string `json:"other_settings"`
}

// Tokenizer identifies what sized prompts and counted tokens without usage.
type Tokenizer struct {
	// Source is "tiktoken", "transformers" or "estimated".
	Source         string  `json:"source"`
	Exact          bool    `json:"exact"`
	Name           *string `json:"name"`
	Revision       *string `json:"revision"`
	Library        *string `json:"library"`
	LibraryVersion *string `json:"library_version"`
}

// WorkloadCache is the requested cache state and the (redacted) reset URL.
type WorkloadCache struct {
	// Requested is "unspecified" or "cold".
	Requested string  `json:"requested"`
	ResetURL  *string `json:"reset_url"`
}

// ChatTemplate says who applied the chat template ("server") and, as a hint
// only, the digest of a local template.
type ChatTemplate struct {
	AppliedBy            string  `json:"applied_by"`
	ClientTemplateDigest *string `json:"client_template_digest"`
}
