// Package sim is a simulated vLLM-compatible inference server: an OpenAI-compatible Chat
// Completions API backed by a simulated continuous-batching engine, with vLLM's /metrics
// names, its llm_request OTLP spans, its request-id and traceparent handling, and knobs that
// inject faults. It is the embedded default target of inferprobe and the peer its tests run
// against; it needs no GPU.
//
// # Engine model
//
// Each engine (Config.Engines of them, label engine="0", "1", ...; requests are assigned
// round-robin) runs vLLM V1's scheduling loop in real time. One step schedules, in order:
// every running sequence (a decode token each, or the next chunk of its prefill), then
// waiting sequences in FIFO order while the running batch is below MaxNumSeqs, the step's
// token budget (MaxNumBatchedTokens) lasts, and the sequence's KV blocks fit. A step lasts
//
//	DecodeStepBase + DecodeStepPerSeq × (decoding sequences) + (prefill tokens) / PrefillTokensPerSec
//
// and every sequence in it emits its token at the step's end. The KV cache has NumGPUBlocks
// blocks of BlockSize tokens; a sequence holds ceil(tokens/BlockSize) blocks. When a decode
// token needs a new block and none is free, the newest running sequence is preempted
// (recompute: its blocks are freed, it goes back to the head of the queue, and it prefills
// prompt + generated tokens again when readmitted), counted in vllm:num_preemptions_total.
// With prefix caching, full prompt blocks are identified by a chained hash of their words;
// an admitted request whose leading blocks are cached skips their prefill (vLLM keeps at
// least the last prompt token uncached).
//
// # Tokens
//
// A prompt token is a whitespace-separated word (see CountPromptTokens). A generated token
// is one word with a leading space (" lorem"), so the number of words in the streamed text
// equals usage.completion_tokens.
//
// # Determinism
//
// Output length, output words, early stops and per-request faults are drawn from a PCG
// generator seeded with Config.Seed and the request id; ids generated for requests without
// X-Request-Id come from a generator seeded with Config.Seed in arrival order. The scheduler
// is a pure function of the arrivals and their times, so the same seed and arrivals give the
// same outputs; wall-clock step lengths vary with the host's timer precision.
package sim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// Config holds every knob of the simulated server. Start validates it (see Validate); the
// zero value is not usable, start from DefaultConfig.
type Config struct {
	// Model is the served model name: the only accepted "model" of a request (others get
	// 404 NotFoundError), the model_name label on /metrics and the id in /v1/models.
	// Default "inferprobe-sim".
	Model string
	// Seed seeds every random draw (output lengths and words, early stops, faults, request
	// ids). Default 1.
	Seed uint64
	// Engines is the number of independent engines (vLLM data-parallel style), each with its
	// own queue, KV cache and engine label value "0".."N-1". Default 1.
	Engines int

	// MaxNumSeqs caps the running batch of one engine (vLLM --max-num-seqs). Default 256.
	MaxNumSeqs int
	// MaxNumBatchedTokens is one step's token budget, prefill chunks plus one per decoding
	// sequence (vLLM --max-num-batched-tokens); longer prompts prefill in chunks over
	// several steps. Default 8192.
	MaxNumBatchedTokens int
	// NumGPUBlocks is the number of KV-cache blocks of one engine (vLLM num_gpu_blocks).
	// Default 8192.
	NumGPUBlocks int
	// BlockSize is the number of tokens per KV-cache block (vLLM --block-size). Default 16.
	BlockSize int
	// MaxModelLen is the context length in tokens: prompt + max_tokens above it is a 400
	// BadRequestError, as in vLLM. It also sets the token-count histogram buckets (the 1-2-5
	// series up to it). Must fit in NumGPUBlocks × BlockSize. Default 4096.
	MaxModelLen int
	// EnablePrefixCaching turns the prefix cache on (vLLM V1 default: on). Each admission
	// (again after a preemption) adds the prompt tokens to vllm:prefix_cache_queries_total
	// and the cached tokens to vllm:prefix_cache_hits_total.
	EnablePrefixCaching bool

	// PrefillTokensPerSec is the prefill throughput in tokens per second; 0 makes prefill
	// take no time. Default 20000 (a 512-token prompt prefills in 25.6 ms).
	PrefillTokensPerSec float64
	// DecodeStepBase is the fixed cost of one engine step. Default 8 ms.
	DecodeStepBase time.Duration
	// DecodeStepPerSeq is the extra step time per decoding sequence in the batch. Default
	// 150 µs (a batch of 64 steps in 17.6 ms).
	DecodeStepPerSeq time.Duration

	// StopProbability is the chance, per request without ignore_eos, that generation stops
	// early (finish_reason "stop") after a uniform number of tokens in [1, max_tokens-1];
	// otherwise it runs to max_tokens (finish_reason "length"). Default 0.2.
	StopProbability float64
	// DefaultMaxTokens is the max_tokens of requests that set neither max_tokens nor
	// max_completion_tokens, capped by MaxModelLen - prompt tokens. 0 uses vLLM's rule
	// (MaxModelLen - prompt tokens). Default 256.
	DefaultMaxTokens int
	// TokensPerChunk is the number of tokens per streamed SSE content event (speculative
	// decoding and some front ends send several); the finishing event may carry fewer.
	// Default 1.
	TokensPerChunk int
	// MaxBodyBytes limits a request body; larger bodies get 413. Default 8 MiB.
	MaxBodyBytes int64
	// EnableRequestIDHeaders echoes X-Request-Id on every response (vLLM
	// --enable-request-id-headers): the request's value, or a fresh random hex id when
	// none was sent.
	EnableRequestIDHeaders bool
	// ResetAnswer selects the POST /reset_prefix_cache body: "json" (default) answers
	// {"success": true|false} like vLLM ≥ 0.26; "empty" answers an empty 200 like older vLLM.
	ResetAnswer string

	// OTLPTracesEndpoint enables llm_request spans, exported there (vLLM
	// --otlp-traces-endpoint): "host:port" or "http://host:port" for gRPC, the full URL
	// (e.g. "http://host:4318/v1/traces") for http/protobuf. Empty: no spans.
	OTLPTracesEndpoint string
	// OTLPProtocol is "grpc" or "http/protobuf"; empty reads
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL and defaults to "grpc", as vLLM does.
	OTLPProtocol string
	// OTLPBatchDelay is the batch span processor's schedule delay (the OTel SDK default,
	// which vLLM uses, is 5 s).
	OTLPBatchDelay time.Duration

	// GroundTruthPath, when set, receives one JSONL line per chat request with the
	// simulator's own true times in integer unix nanoseconds (see GroundTruth).
	GroundTruthPath string
	// ProfilerDir, when set, enables POST /start_profile and /stop_profile (404 without it,
	// as a vLLM started without a profiler). While a profile runs each engine records its
	// steps (at most MaxProfiledSteps; later ones are counted as dropped); each stop of a
	// running profile writes, per engine N, rank<N>.<unix ns>.pt.trace.json.gz (a Kineto
	// trace of the steps, see KinetoTrace) and its ground truth rank<N>.<unix ns>.steps.jsonl
	// (one StepTruth per line), each through a .tmp file renamed when complete. It must be
	// an existing directory.
	ProfilerDir string

	// Faults injects failures; the zero value injects none.
	Faults Faults
}

// Faults are the fault-injection knobs. Fractions are probabilities in [0,1] drawn per
// request (per scrape for the /metrics faults) from the seeded generator; durations are
// wall-clock.
type Faults struct {
	// Reset is the fraction of chat requests whose TCP connection is reset (RST) before a
	// status line is written. The engine never sees them.
	Reset float64
	// Reject429 and Reject503 are the fractions of chat requests rejected at once with HTTP
	// 429 (RateLimitError) or 503 (ServiceUnavailableError) JSON errors, as a gateway in
	// front of vLLM would.
	Reject429 float64
	Reject503 float64
	// StreamError is the fraction of requests the engine finishes with finish_reason
	// "error" part-way through: a stream sends its content so far, then
	// data: {"error": {...}} and data: [DONE], with HTTP status 200; a non-streaming
	// request gets a 500 JSON error. They count in request_success_total{finished_reason="error"}
	// and get a span, like vLLM.
	StreamError float64
	// Truncate is the fraction of requests aborted part-way through whose connection is
	// then closed without finish_reason, usage or [DONE] (no span, not counted as a
	// success, like a client abort in vLLM).
	Truncate float64
	// Stall is the fraction of streams that pause for StallDuration before one of their
	// content events (the engine keeps generating).
	Stall         float64
	StallDuration time.Duration
	// SlowHeaders is the fraction of requests whose response headers are held back for
	// SlowHeadersDuration (the engine starts the request at once).
	SlowHeaders         float64
	SlowHeadersDuration time.Duration
	// Metrics503 and MetricsHTML are the fractions of GET /metrics answered with a 503 or
	// with a 200 HTML page instead of the exposition.
	Metrics503  float64
	MetricsHTML float64
	// RestartAt, when positive, restarts every engine once, that long after Start: in-flight
	// requests are dropped (their connections closed), caches emptied, and /metrics starts
	// again from zero with a new process_start_time_seconds and new _created stamps.
	RestartAt time.Duration
	// RestartDowntime is how long after the restart /health answers 503 and chat requests
	// get 503 EngineDeadError-style JSON errors. Default 0.
	RestartDowntime time.Duration
	// ProfileStart is a POST /start_profile fault: "" none, ProfileStart500 or
	// ProfileStartTimeout. ProfileStopNoFile makes POST /stop_profile answer 200 without
	// writing a trace. ProfileTruncatedTrace cuts each trace: TruncateJSON stops its JSON
	// in the middle of an event past half its bytes, inside a complete, valid gzip stream;
	// TruncateGzip cuts the gzip file itself at half its bytes (the gzip stream is then
	// invalid too). Its ground truth stays whole.
	ProfileStart          string
	ProfileStopNoFile     bool
	ProfileTruncatedTrace string
}

// DefaultConfig returns the defaults documented on each Config field: TTFT of a few tens of
// milliseconds and 10–30 ms decode steps at moderate batch sizes.
func DefaultConfig() Config {
	return Config{
		Model:               "inferprobe-sim",
		Seed:                1,
		Engines:             1,
		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 8192,
		NumGPUBlocks:        8192,
		BlockSize:           16,
		MaxModelLen:         4096,
		EnablePrefixCaching: true,
		PrefillTokensPerSec: 20000,
		DecodeStepBase:      8 * time.Millisecond,
		DecodeStepPerSeq:    150 * time.Microsecond,
		StopProbability:     0.2,
		DefaultMaxTokens:    256,
		TokensPerChunk:      1,
		MaxBodyBytes:        8 << 20,
		ResetAnswer:         "json",
		OTLPBatchDelay:      5 * time.Second,
	}
}

// Protocol values accepted by Config.OTLPProtocol and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// otlpProtocol resolves the exporter protocol: the Config field, else the environment, else grpc.
func (c *Config) otlpProtocol() string {
	p := strings.TrimSpace(c.OTLPProtocol)
	if p == "" {
		p = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	}
	if p == "" {
		p = ProtocolGRPC
	}
	return p
}

// Validate reports every unusable setting in one error (nil when the config is usable): the
// engine model's, then the request handling's, the tracing's and the faults', in that order.
func (c *Config) Validate() error {
	var p problems
	c.checkEngine(&p)
	c.checkRequests(&p)
	c.checkTracing(&p)
	c.Faults.check(&p)
	if c.ProfilerDir != "" {
		if fi, err := os.Stat(c.ProfilerDir); err != nil || !fi.IsDir() {
			p.add("profiler-dir %q is not a directory", c.ProfilerDir)
		}
	}
	return errors.Join(p...)
}

// problems collects the findings of Validate, in the order found.
type problems []error

// add records one finding, formatted as fmt.Errorf does.
func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// MaxDecodeStep bounds each decode step time knob: a step longer than a minute models no
// engine (and a stream of them outlives every client timeout).
const MaxDecodeStep = time.Minute

// checkEngine checks the model name, the engine count and the scheduler, KV-cache and
// step-time knobs; MaxModelLen must fit in the KV cache when both of its sizes are valid.
func (c *Config) checkEngine(p *problems) {
	if strings.TrimSpace(c.Model) == "" {
		p.add("model name is empty")
	} else if !utf8.ValidString(c.Model) {
		p.add("model name %q is not valid UTF-8", c.Model)
	}
	if c.Engines < 1 || c.Engines > 64 {
		p.add("engines must be in [1,64], got %d", c.Engines)
	}
	if c.MaxNumSeqs < 1 {
		p.add("max-num-seqs must be ≥ 1, got %d", c.MaxNumSeqs)
	}
	if c.MaxNumBatchedTokens < 1 {
		p.add("max-num-batched-tokens must be ≥ 1, got %d", c.MaxNumBatchedTokens)
	}
	if c.BlockSize < 1 || c.BlockSize > 1024 {
		p.add("block-size must be in [1,1024], got %d", c.BlockSize)
	}
	if c.NumGPUBlocks < 1 || c.NumGPUBlocks > 1<<26 {
		p.add("num-gpu-blocks must be in [1,%d], got %d", 1<<26, c.NumGPUBlocks)
	}
	if c.MaxModelLen < 2 {
		p.add("max-model-len must be ≥ 2, got %d", c.MaxModelLen)
	} else if c.BlockSize >= 1 && c.NumGPUBlocks >= 1 && int64(c.MaxModelLen) > int64(c.NumGPUBlocks)*int64(c.BlockSize) {
		p.add("max-model-len %d does not fit in the KV cache (%d blocks × %d tokens)", c.MaxModelLen, c.NumGPUBlocks, c.BlockSize)
	}
	if !(c.PrefillTokensPerSec >= 0) || c.PrefillTokensPerSec > 1e12 {
		p.add("prefill-tps must be ≥ 0 (0 = instantaneous), got %v", c.PrefillTokensPerSec)
	}
	if c.DecodeStepBase < 0 || c.DecodeStepPerSeq < 0 || c.DecodeStepBase > MaxDecodeStep || c.DecodeStepPerSeq > MaxDecodeStep {
		p.add("decode step times must be in [0, %v], got base %v and per sequence %v", MaxDecodeStep, c.DecodeStepBase, c.DecodeStepPerSeq)
	}
}

// checkRequests checks the knobs of answering requests: early stops, default max_tokens,
// tokens per SSE event, the body limit and the /reset_prefix_cache answer.
func (c *Config) checkRequests(p *problems) {
	if !(c.StopProbability >= 0 && c.StopProbability <= 1) {
		p.add("stop-prob must be in [0,1], got %v", c.StopProbability)
	}
	if c.DefaultMaxTokens < 0 {
		p.add("default-max-tokens must be ≥ 0, got %d", c.DefaultMaxTokens)
	}
	if c.TokensPerChunk < 1 || c.TokensPerChunk > 4096 {
		p.add("tokens-per-chunk must be in [1,4096], got %d", c.TokensPerChunk)
	}
	if c.MaxBodyBytes < 1024 {
		p.add("max-body-bytes must be ≥ 1024, got %d", c.MaxBodyBytes)
	}
	switch c.ResetAnswer {
	case "json", "empty":
	default:
		p.add("reset-answer must be json or empty, got %q", c.ResetAnswer)
	}
}

// checkTracing checks the OTLP protocol (when spans are on, or when one is set explicitly
// even though unused) and the batch delay.
func (c *Config) checkTracing(p *problems) {
	if c.OTLPTracesEndpoint != "" || strings.TrimSpace(c.OTLPProtocol) != "" {
		switch proto := c.otlpProtocol(); proto {
		case ProtocolGRPC, ProtocolHTTPProtobuf:
		default:
			p.add("OTLP traces protocol must be %s or %s, got %q", ProtocolGRPC, ProtocolHTTPProtobuf, proto)
		}
	}
	if c.OTLPBatchDelay < 0 {
		p.add("otlp-batch-delay must be ≥ 0")
	}
}

// check checks that every fault fraction is in [0,1], every duration ≥ 0, and that the
// stall and slow-headers faults have a duration when they are on.
func (f *Faults) check(p *problems) {
	for _, fr := range []struct {
		name string
		v    float64
	}{
		{"fault-reset", f.Reset}, {"fault-reject-429", f.Reject429}, {"fault-reject-503", f.Reject503},
		{"fault-stream-error", f.StreamError}, {"fault-truncate", f.Truncate}, {"fault-stall", f.Stall},
		{"fault-slow-headers", f.SlowHeaders}, {"fault-metrics-503", f.Metrics503}, {"fault-metrics-html", f.MetricsHTML},
	} {
		if !(fr.v >= 0 && fr.v <= 1) {
			p.add("%s must be a fraction in [0,1], got %v", fr.name, fr.v)
		}
	}
	if f.StallDuration < 0 || f.SlowHeadersDuration < 0 || f.RestartAt < 0 || f.RestartDowntime < 0 {
		p.add("fault durations must be ≥ 0")
	}
	if f.ProfileStart != "" && f.ProfileStart != ProfileStart500 && f.ProfileStart != ProfileStartTimeout {
		p.add("fault-profile-start must be 500 or timeout, got %q", f.ProfileStart)
	}
	switch f.ProfileTruncatedTrace {
	case "", TruncateJSON, TruncateGzip:
	default:
		p.add("fault-profile-truncated-trace must be %s or %s, got %q", TruncateJSON, TruncateGzip, f.ProfileTruncatedTrace)
	}
	if f.Stall > 0 && f.StallDuration == 0 {
		p.add("fault-stall needs fault-stall-duration > 0")
	}
	if f.SlowHeaders > 0 && f.SlowHeadersDuration == 0 {
		p.add("fault-slow-headers needs fault-slow-headers-duration > 0")
	}
}

// CountPromptTokens is the simulator's fixed prompt-token rule: the number of
// whitespace-separated words (as strings.Fields splits them, on unicode.IsSpace) summed over
// the given message contents. A request's contents are each message's string content, or
// the "text" of each {"type":"text"} part when the content is an array; roles, names and
// non-text parts count nothing, and there are no chat-template tokens. A client that builds
// prompts from words that are each one tokenizer token (e.g. cl100k_base) therefore agrees
// with usage.prompt_tokens exactly.
func CountPromptTokens(messagesContent ...string) int {
	n := 0
	for _, c := range messagesContent {
		n += countWords(c)
	}
	return n
}

// countWords counts strings.Fields(s) without allocating.
func countWords(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		c := s[i]
		var space bool
		if c < 0x80 {
			space = asciiSpace[c]
			i++
		} else {
			r, size := decodeRune(s[i:])
			space = isSpaceRune(r)
			i += size
		}
		if space {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

var asciiSpace = [128]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}
