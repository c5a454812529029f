// Package prompt builds the synthetic prompts of a load test, sized to a token target, with
// controlled prefix sharing, deterministically from the seed.
//
// The contract is stormlog's `infer profile --prompt-mode`:
//
//   - repeat: one prompt for the whole case, warmup included; cases with the same input
//     length (and seed) send the same text.
//   - unique: each request starts with its own nonce (NonceTokens words), so no two requests
//     share a prefix beyond what the server's chat template adds.
//   - shared-prefix: each request starts with one of PrefixGroups group prefixes covering
//     SharedPrefixRatio of its tokens (the group chosen by seed), then its nonce, then filler.
//
// Nonces, groups and prefixes derive from the seed, the case id and the phase, so a run
// can be repeated exactly, and neither another case nor the warmup shares a prefix with the
// measured requests (except in repeat mode).
//
// Text is made of a fixed vocabulary of VocabularySize common lowercase English words, each
// exactly one token in tiktoken's cl100k_base and o200k_base encodings (bare, and after a
// space), joined by single spaces. A prompt of n words is therefore exactly n tokens in
// those encodings, and n words for strings.Fields (which the simulated engine counts), so
// prompts are sized by construction instead of by re-tokenizing them at send time.
package prompt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"unsafe"
)

// Mode is a prompt mode, spelled as the --prompt-mode flag values.
type Mode string

// Prompt modes.
const (
	Repeat       Mode = "repeat"
	Unique       Mode = "unique"
	SharedPrefix Mode = "shared-prefix"
)

// Limits and sizes.
const (
	// VocabularySize is the number of distinct words prompts are made of (10 bits a word).
	VocabularySize = 1024
	// NonceTokens is the length of a request's nonce in words (= tokens): 80 bits. The
	// contract's nonce "takes about eight subword tokens"; a prompt shorter than the nonce
	// (or, in shared-prefix mode, than the prefix plus the nonce) gets a truncated one.
	NonceTokens = 8
	// MaxInputTokens is the largest input-token target accepted.
	MaxInputTokens = 1 << 20
	// MaxPrefixGroups is the largest --prefix-groups accepted (one group per arrival at most).
	MaxPrefixGroups = 1_000_000
	// prefixCacheWords and prefixCacheGroups bound the group prefixes kept in memory
	// (~27 MB of text); past them a prefix is rebuilt for each prompt that uses it.
	prefixCacheWords  = 4 << 20
	prefixCacheGroups = 1 << 16
)

// Spec says how the prompts of one case phase are built. InputTokens is the token target
// (1..MaxInputTokens). SharedPrefixRatio (0..1) and PrefixGroups (≥ 1; 0 means 1) apply to
// SharedPrefix only; other modes must leave the ratio 0 and the groups 0 or 1. Seed is
// --seed; CaseID and Phase ("warmup", "measured") scope the nonces, groups and prefixes.
type Spec struct {
	Mode              Mode
	InputTokens       int
	SharedPrefixRatio float64
	PrefixGroups      int
	Seed              int64
	CaseID, Phase     string
}

// Prompt is one request's prompt and what it shares with others (the infer.request fields
// prompt_id, prefix_group, shared_prefix_tokens, prompt_digest, and the planned
// prompt_tokens with its exactness).
type Prompt struct {
	// Text is the user message content.
	Text string
	// Tokens is Text's length by the generator's Tokenizer: for cl100k_base, o200k_base and
	// the estimate it is the word count, which equals InputTokens; for any other tokenizer
	// it is that tokenizer's Count(Text).
	Tokens int
	// Exact is the Tokenizer's Exact(): false for the estimate.
	Exact bool
	// ID is "repeat" in repeat mode, "r-<12 hex>" in unique mode and "g<group>-<12 hex>" in
	// shared-prefix mode, the hex naming the request's nonce.
	ID string
	// PrefixGroup is the request's group (0-based) in shared-prefix mode, else nil.
	PrefixGroup *int
	// SharedPrefixTokens is the group prefix's length in tokens in shared-prefix mode, else nil.
	SharedPrefixTokens *int
	// Digest is the SHA-256 of Text, lowercase hex (prompt_digest).
	Digest string
}

// Generator builds the prompts of one case phase. It is immutable after NewGenerator, apart
// from a cache of group prefixes, and safe for concurrent use.
type Generator struct {
	spec    Spec
	tok     Tokenizer
	byWords bool     // Tokens = word count, known by construction
	ns      [32]byte // namespace key: seed, case, phase

	repeat Prompt // repeat mode: the one prompt

	nonceWords   int    // words of each nonce
	filler       string // words after the nonce, shared by every prompt of the phase
	prefixTokens int    // shared-prefix: words of the group prefix
	groups       uint64
	prefixes     []groupPrefix // nil when prefixes are not cached
}

type groupPrefix struct {
	once sync.Once
	text string      // prefix words, then a space when more words follow
	h    hash.Cloner // SHA-256 state after text
}

// NewGenerator validates spec and prepares the parts every prompt of the phase shares (the
// repeat prompt, the filler). tok decides Prompt.Tokens and Prompt.Exact; use
// TiktokenCounter or EstimateCounter. Errors: an unknown mode, InputTokens outside
// 1..MaxInputTokens, a ratio outside 0..1 or NaN, groups outside 0..MaxPrefixGroups, a ratio
// or groups > 1 given to a mode other than shared-prefix, a nil tokenizer.
func NewGenerator(spec Spec, tok Tokenizer) (*Generator, error) {
	if tok == nil {
		return nil, errors.New("prompt generator needs a tokenizer")
	}
	switch spec.Mode {
	case Repeat, Unique, SharedPrefix:
	default:
		return nil, fmt.Errorf("prompt mode must be repeat, unique or shared-prefix, not %q", string(spec.Mode))
	}
	if spec.InputTokens < 1 || spec.InputTokens > MaxInputTokens {
		return nil, fmt.Errorf("input tokens must be within 1..%d, got %d", MaxInputTokens, spec.InputTokens)
	}
	if spec.PrefixGroups < 0 || spec.PrefixGroups > MaxPrefixGroups {
		return nil, fmt.Errorf("prefix groups must be within 1..%d, got %d", MaxPrefixGroups, spec.PrefixGroups)
	}
	if spec.Mode == SharedPrefix {
		if math.IsNaN(spec.SharedPrefixRatio) || spec.SharedPrefixRatio < 0 || spec.SharedPrefixRatio > 1 {
			return nil, fmt.Errorf("shared-prefix ratio must be within 0..1, got %g", spec.SharedPrefixRatio)
		}
		if spec.PrefixGroups == 0 {
			spec.PrefixGroups = 1
		}
	} else {
		if spec.SharedPrefixRatio != 0 {
			return nil, fmt.Errorf("a shared-prefix ratio applies to shared-prefix prompts only, not %s", spec.Mode)
		}
		if spec.PrefixGroups > 1 {
			return nil, fmt.Errorf("prefix groups apply to shared-prefix prompts only, not %s", spec.Mode)
		}
	}
	g := &Generator{spec: spec, tok: tok, byWords: sizedByWords(tok), ns: namespace(spec)}
	w := spec.InputTokens
	switch spec.Mode {
	case Repeat:
		// Keyed by seed and length only: the same for every case and phase of that length.
		var key [32]byte
		binary.BigEndian.PutUint64(key[:8], uint64(spec.Seed))
		binary.BigEndian.PutUint64(key[8:16], uint64(w))
		key = sha256.Sum256(append([]byte("inferprobe.prompt/v1 repeat\x00"), key[:16]...))
		text := unsafeString(appendWords(nil, key, w))
		g.repeat = Prompt{Text: text, ID: string(Repeat), Digest: digest([]byte(text))}
		g.repeat.Tokens, g.repeat.Exact = g.count(text)
	case Unique:
		g.nonceWords = min(NonceTokens, w)
		g.filler = unsafeString(appendWords(nil, g.key('f', 0), w-g.nonceWords))
	case SharedPrefix:
		p := int(math.Round(spec.SharedPrefixRatio * float64(w)))
		// At least one prefix word (as Stormlog); at least one nonce word when there is room.
		p = max(p, 1)
		if w >= 2 {
			p = min(p, w-1)
		}
		p = min(p, w)
		g.prefixTokens = p
		g.nonceWords = min(NonceTokens, w-p)
		g.filler = unsafeString(appendWords(nil, g.key('f', 0), w-p-g.nonceWords))
		g.groups = uint64(spec.PrefixGroups)
		if spec.PrefixGroups <= prefixCacheGroups && spec.PrefixGroups*p <= prefixCacheWords {
			g.prefixes = make([]groupPrefix, spec.PrefixGroups)
		}
	}
	return g, nil
}

// namespace derives the key that scopes a phase's nonces, groups, prefixes and filler.
func namespace(spec Spec) [32]byte {
	b := []byte("inferprobe.prompt/v1\x00")
	b = binary.BigEndian.AppendUint64(b, uint64(spec.Seed))
	b = binary.AppendUvarint(b, uint64(len(spec.CaseID)))
	b = append(b, spec.CaseID...)
	b = binary.AppendUvarint(b, uint64(len(spec.Phase)))
	b = append(b, spec.Phase...)
	return sha256.Sum256(b)
}

// key derives a sub-key of the namespace: kind 'n' (a request's nonce and group), 'p' (a
// group's prefix), 'f' (the filler).
func (g *Generator) key(kind byte, i uint64) [32]byte {
	var b [32 + 1 + 8]byte
	copy(b[:32], g.ns[:])
	b[32] = kind
	binary.BigEndian.PutUint64(b[33:], i)
	return sha256.Sum256(b[:])
}

// Prompt returns the prompt of request index (its request_index in the phase), built now.
// The same (spec, index) always gives the same prompt. The repeat prompt's Text is shared;
// other prompts' Text is a fresh string the caller may drop when the request is done.
func (g *Generator) Prompt(index int) Prompt {
	if g.spec.Mode == Repeat {
		return g.repeat
	}
	k := g.key('n', uint64(index))
	var pr Prompt
	var buf []byte
	var sum [sha256.Size]byte
	nonceLen := wordsLen(k, g.nonceWords)
	tail := nonceLen
	if g.filler != "" {
		tail += 1 + len(g.filler)
	}
	if g.spec.Mode == Unique {
		buf = make([]byte, 0, tail)
		buf = appendNonce(buf, k, g.nonceWords)
		if g.filler != "" {
			buf = append(append(buf, ' '), g.filler...)
		}
		sum = sha256.Sum256(buf)
		pr.ID = promptID("r-", k)
	} else {
		group := int(binary.BigEndian.Uint64(k[16:24]) % g.groups)
		prefix, h := g.prefix(group)
		buf = make([]byte, 0, len(prefix)+tail)
		buf = append(buf, prefix...)
		if g.nonceWords > 0 {
			buf = appendNonce(buf, k, g.nonceWords)
		}
		if g.filler != "" {
			if g.nonceWords > 0 {
				buf = append(buf, ' ')
			}
			buf = append(buf, g.filler...)
		}
		h.Write(buf[len(prefix):])
		h.Sum(sum[:0])
		pr.ID = promptID("g"+strconv.Itoa(group)+"-", k)
		pr.PrefixGroup = &group
		shared := g.prefixTokens
		pr.SharedPrefixTokens = &shared
	}
	pr.Text = unsafeString(buf)
	pr.Digest = hexString(sum[:])
	pr.Tokens, pr.Exact = g.count(pr.Text)
	return pr
}

// prefix returns group's prefix text (followed by a space when words follow it) and a
// SHA-256 state that has absorbed it, from the cache when prefixes are cached.
func (g *Generator) prefix(group int) (string, hash.Hash) {
	build := func() (string, hash.Cloner) {
		b := appendWords(nil, g.key('p', uint64(group)), g.prefixTokens)
		if g.prefixTokens < g.spec.InputTokens {
			b = append(b, ' ')
		}
		h := sha256.New().(hash.Cloner)
		h.Write(b)
		return unsafeString(b), h
	}
	if g.prefixes == nil {
		return build()
	}
	gp := &g.prefixes[group]
	gp.once.Do(func() { gp.text, gp.h = build() })
	h, err := gp.h.Clone()
	if err != nil { // not reachable for crypto/sha256; rebuild rather than fail
		return build()
	}
	return gp.text, h
}

// count returns a text's token count and exactness under the generator's tokenizer.
func (g *Generator) count(text string) (int, bool) {
	if g.byWords {
		return g.spec.InputTokens, g.tok.Exact()
	}
	return g.tok.Count(text), g.tok.Exact()
}

// appendWords appends n vocabulary words drawn from a PCG keyed by key, joined by single
// spaces (no leading or trailing space).
func appendWords(dst []byte, key [32]byte, n int) []byte {
	if n <= 0 {
		return dst
	}
	rng := rand.NewPCG(binary.BigEndian.Uint64(key[:8]), binary.BigEndian.Uint64(key[8:16]))
	dst = append(make([]byte, 0, len(dst)+n*7), dst...)
	var bits uint64
	left := 0
	for i := range n {
		if left == 0 {
			bits, left = rng.Uint64(), 6 // six 10-bit indices per draw
		}
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, vocabulary[bits&(VocabularySize-1)]...)
		bits >>= 10
		left--
	}
	return dst
}

// nonceIndex returns the j-th (0..7) 10-bit word index of a nonce key's first 80 bits.
func nonceIndex(k [32]byte, j int) int {
	bit := j * 10
	v := uint32(k[bit/8])<<16 | uint32(k[bit/8+1])<<8 | uint32(k[bit/8+2])
	return int(v>>(14-bit%8)) & (VocabularySize - 1)
}

// wordsLen is the byte length of the first n nonce words joined by spaces.
func wordsLen(k [32]byte, n int) int {
	l := 0
	for j := range n {
		if j > 0 {
			l++
		}
		l += len(vocabulary[nonceIndex(k, j)])
	}
	return l
}

func appendNonce(dst []byte, k [32]byte, n int) []byte {
	for j := range n {
		if j > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, vocabulary[nonceIndex(k, j)]...)
	}
	return dst
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hexString(s[:])
}

// hexString is hex.EncodeToString with one allocation.
func hexString(b []byte) string {
	var a [2 * sha256.Size]byte
	n := hex.Encode(a[:], b)
	return string(a[:n])
}

// promptID is prefix followed by the hex of the nonce key's first 6 bytes.
func promptID(prefix string, k [32]byte) string {
	var a [32]byte
	n := copy(a[:], prefix)
	if n+12 > len(a) {
		return prefix + hex.EncodeToString(k[:6])
	}
	hex.Encode(a[n:], k[:6])
	return string(a[:n+12])
}

// unsafeString returns b's bytes as a string without copying; b must not change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
