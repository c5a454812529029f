package sim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeChatRequest: any body yields either a valid request or a 4xx error, never a
// panic; a valid request's prompt tokens follow the documented word rule.
func FuzzDecodeChatRequest(f *testing.F) {
	seeds := []string{
		`{"model":"inferprobe-sim","messages":[{"role":"user","content":"hello world"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"image_url","image_url":{"url":"u"}}]}],"max_completion_tokens":3}`,
		`{"messages":[{"role":"assistant","content":null},{"role":"user","content":"x\u00a0y\u2003z"}],"n":1,"temperature":0,"top_p":1}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`,
		`{"model":"other","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text"}]}]}`,
		`{"messages":"nope"}`, `[]`, `null`, `{`, `{"messages":[{"content":"a"}]} trailing`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e400}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream_options":{"continuous_usage_stats":1}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cfg := DefaultConfig()
	cfg.MaxModelLen = 512
	cfg.BlockSize = 4
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := decodeChatRequest(body, &cfg)
		if aerr != nil {
			if req != nil {
				t.Fatal("both a request and an error")
			}
			if aerr.status != 400 && aerr.status != 404 {
				t.Fatalf("status %d", aerr.status)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(aerr.body(), &e); err != nil || e.Error.Code != aerr.status || e.Error.Message == "" {
				t.Fatalf("error body %s: %v", aerr.body(), err)
			}
			return
		}
		if req.promptTokens < 1 || req.promptTokens >= cfg.MaxModelLen {
			t.Fatalf("prompt tokens %d", req.promptTokens)
		}
		if req.maxTokens < 1 || req.promptTokens+req.maxTokens > cfg.MaxModelLen {
			t.Fatalf("max tokens %d with prompt %d", req.maxTokens, req.promptTokens)
		}
		if len(req.hashes) != req.promptTokens/cfg.BlockSize {
			t.Fatalf("%d block hashes for %d tokens", len(req.hashes), req.promptTokens)
		}
		// Recount with strings.Fields over the decoded contents.
		var w struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &w); err != nil {
			t.Fatalf("accepted body does not decode: %v", err)
		}
		n := 0
		for _, m := range w.Messages {
			var s string
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &s) == nil {
				n += len(strings.Fields(s))
			} else if json.Unmarshal(m.Content, &parts) == nil {
				for _, p := range parts {
					if p.Type == "text" {
						n += len(strings.Fields(p.Text))
					}
				}
			}
		}
		if n != req.promptTokens {
			t.Fatalf("prompt tokens %d, strings.Fields count %d", req.promptTokens, n)
		}
	})
}

// FuzzCountWords: the allocation-free counter agrees with strings.Fields on any bytes.
func FuzzCountWords(f *testing.F) {
	for _, s := range []string{"", " a  b\tc\n", "\u00a0x\u0085y\u3000", "\xff\xfe a", "é è"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := CountPromptTokens(s), len(strings.Fields(s)); got != want {
			t.Fatalf("CountPromptTokens(%q) = %d, strings.Fields gives %d", s, got, want)
		}
		p := newPromptScanner(3, true)
		p.add(s)
		if p.words != len(strings.Fields(s)) || len(p.hashes) != p.words/3 {
			t.Fatalf("scanner words %d hashes %d", p.words, len(p.hashes))
		}
	})
}

func TestPromptHashesArePrefixes(t *testing.T) {
	scan := func(parts ...string) []uint64 {
		p := newPromptScanner(2, true)
		p.marker("user")
		for _, s := range parts {
			p.add(s)
		}
		return p.hashes
	}
	a := scan("a b c d e f")
	b := scan("a b", " c d x y")
	c := scan("a  b\nc d e f g")
	if len(a) != 3 || a[0] != b[0] || a[1] != b[1] || a[2] == b[2] {
		t.Fatalf("shared prefix blocks must hash equal, then differ: %x %x", a, b)
	}
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("whitespace changed block %d", i)
		}
	}
	p := newPromptScanner(2, true)
	p.marker("system")
	p.add("a b")
	if p.hashes[0] == a[0] {
		t.Fatalf("role marker ignored")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Model = " " },
		func(c *Config) { c.Model = "m\xff" }, // a Prometheus label value must be UTF-8
		func(c *Config) { c.Engines = 0 },
		func(c *Config) { c.MaxNumSeqs = 0 },
		func(c *Config) { c.BlockSize = 0 },
		func(c *Config) { c.NumGPUBlocks = 10; c.MaxModelLen = 1000 },
		func(c *Config) { c.PrefillTokensPerSec = -1 },
		func(c *Config) { c.DecodeStepBase = -time.Millisecond },
		func(c *Config) { c.DecodeStepBase = 1000 * time.Hour },
		func(c *Config) { c.DecodeStepPerSeq = MaxDecodeStep + 1 },
		func(c *Config) { c.StopProbability = 1.5 },
		func(c *Config) { c.TokensPerChunk = 0 },
		func(c *Config) { c.ResetAnswer = "xml" },
		func(c *Config) { c.OTLPTracesEndpoint = "x:1"; c.OTLPProtocol = "http/json" },
		func(c *Config) { c.Faults.Reject429 = 2 },
		func(c *Config) { c.Faults.Stall = 0.5 },
		func(c *Config) { c.Faults.SlowHeaders = 0.5 },
		func(c *Config) { c.Faults.RestartAt = -1 },
	}
	atBound := DefaultConfig()
	atBound.DecodeStepBase, atBound.DecodeStepPerSeq = MaxDecodeStep, MaxDecodeStep
	if err := atBound.Validate(); err != nil {
		t.Errorf("decode steps of %v refused: %v", MaxDecodeStep, err)
	}
	for i, mod := range bad {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
}
