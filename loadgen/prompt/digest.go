package prompt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"
)

// PhaseDigest returns a phase window's prompts_digest: the SHA-256 (lowercase hex) of the
// prompts' digests (Prompt.Digest) joined by "\n", in schedule order (request_index order).
// Per the contract it covers every scheduled arrival's prompt, dropped ones included, so two
// runs of one schedule share it whatever their overflow policy; in a closed loop with a
// duration, the prompts actually sent. It returns "" for no prompts (record null).
func PhaseDigest(digests []string) string {
	if len(digests) == 0 {
		return ""
	}
	h := sha256.New()
	for i, d := range digests {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(d))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// PhaseDigester computes PhaseDigest incrementally, with memory bounded by how far out of
// order digests arrive rather than by the phase's size (a million arrivals would otherwise
// keep ~100 MB of digest strings). Add each index's digest once, in any order; Sum returns
// the same value as PhaseDigest over the digests of indexes 0..n−1. Safe for concurrent use.
type PhaseDigester struct {
	mu      sync.Mutex
	h       hash.Hash
	next    int            // lowest index not yet hashed
	pending map[int]string // digests that arrived before their turn
}

// NewPhaseDigester returns an empty digester.
func NewPhaseDigester() *PhaseDigester {
	return &PhaseDigester{h: sha256.New(), pending: map[int]string{}}
}

// Add records the prompt digest of request index (≥ 0). Errors: a negative index, or an
// index already added.
func (p *PhaseDigester) Add(index int, digest string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if index < 0 {
		return fmt.Errorf("prompt digest for negative request index %d", index)
	}
	if _, dup := p.pending[index]; dup || index < p.next {
		return fmt.Errorf("prompt digest for request index %d added twice", index)
	}
	p.pending[index] = digest
	for {
		d, ok := p.pending[p.next]
		if !ok {
			return nil
		}
		delete(p.pending, p.next)
		if p.next > 0 {
			p.h.Write([]byte{'\n'})
		}
		p.h.Write([]byte(d))
		p.next++
	}
}

// Sum returns prompts_digest over the digests added: "" when none was added. Errors: a gap
// (some index below the highest one added is missing); the digest is then unknown.
func (p *PhaseDigester) Sum() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) > 0 {
		return "", fmt.Errorf("prompt digests missing for request index %d (%d later ones added)", p.next, len(p.pending))
	}
	if p.next == 0 {
		return "", nil
	}
	// Sum on a clone, so that more digests can still be added.
	c, err := p.h.(hash.Cloner).Clone()
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(c.Sum(nil)), nil
}

// Len returns how many digests have been hashed in order so far.
func (p *PhaseDigester) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}
