package prompt

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Tokenizer counts the tokens of a text. Implementations must be safe for concurrent use.
type Tokenizer interface {
	// Name identifies the counting rule: the tiktoken encoding ("cl100k_base",
	// "o200k_base"), or "whitespace words" for the estimate.
	Name() string
	// Count returns the number of tokens in s (≥ 0).
	Count(s string) int
	// Exact reports whether Count is a real tokenizer's count (true) or an estimate.
	Exact() bool
}

// TiktokenCounter returns an exact counter for a tiktoken encoding: "cl100k_base" (the
// default, also for ""), "o200k_base", "p50k_base", "p50k_edit" or "r50k_base". The
// encodings come from github.com/tiktoken-go/tokenizer, which compiles their vocabularies
// into the binary: nothing is downloaded and no network is touched, at construction or
// when counting. Counts match OpenAI's tiktoken for the same encoding; they are a proxy for,
// not equal to, the served model's own tokenizer. Errors: an unknown encoding.
func TiktokenCounter(encoding string) (Tokenizer, error) {
	if encoding == "" {
		encoding = string(tokenizer.Cl100kBase)
	}
	c, err := tokenizer.Get(tokenizer.Encoding(encoding))
	if err != nil {
		return nil, fmt.Errorf("tiktoken encoding %q: %w (known: cl100k_base, o200k_base, p50k_base, p50k_edit, r50k_base)", encoding, err)
	}
	return &tiktokenCounter{codec: c}, nil
}

type tiktokenCounter struct {
	codec tokenizer.Codec

	verifyOnce sync.Once
	singles    bool // every vocabulary word is one token, bare and after a space
}

func (t *tiktokenCounter) Name() string { return t.codec.GetName() }
func (t *tiktokenCounter) Exact() bool  { return true }

// Count returns the number of tokens tiktoken produces for s. The codec runs in its default
// error mode, which tokenizes invalid UTF-8 as raw bytes and reports no error.
func (t *tiktokenCounter) Count(s string) int {
	n, _ := t.codec.Count(s)
	return n
}

// wordsAreTokens reports whether every vocabulary word is exactly one token both at the
// start of a text and after a space. tiktoken's pre-tokenizer splits lowercase words joined
// by single spaces into one piece per word (" word"), and BPE never merges across pieces, so
// then a prompt of n vocabulary words is exactly n tokens. Checked once per counter.
func (t *tiktokenCounter) wordsAreTokens() bool {
	t.verifyOnce.Do(func() {
		t.singles = true
		for _, w := range vocabulary {
			if t.Count(w) != 1 || t.Count(" "+w) != 1 {
				t.singles = false
				return
			}
		}
	})
	return t.singles
}

// EstimateCounter returns the fallback counter used when no tokenizer is wanted or
// available: the number of whitespace-separated words (strings.Fields), as Stormlog's
// "estimated" source counts. Exact() is false, and records made with it must say
// so (prompt_token_exact: false). For English prose a word is ~1.3 subword tokens; for the
// prompts this package builds (one vocabulary word per cl100k_base token) it equals the
// tiktoken count, and it is what the simulated engine counts.
func EstimateCounter() Tokenizer { return estimateCounter{} }

type estimateCounter struct{}

func (estimateCounter) Name() string       { return "whitespace words" }
func (estimateCounter) Exact() bool        { return false }
func (estimateCounter) Count(s string) int { return len(strings.Fields(s)) }

// sizedByWords reports whether tok counts a text of vocabulary words joined by single spaces
// as exactly its word count, so that a prompt's count is known by construction.
func sizedByWords(tok Tokenizer) bool {
	switch t := tok.(type) {
	case *tiktokenCounter:
		return t.wordsAreTokens()
	case estimateCounter:
		return true
	}
	return false
}
