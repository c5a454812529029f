package sim

import (
	"unicode"
	"unicode/utf8"
)

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }

func isSpaceRune(r rune) bool { return unicode.IsSpace(r) }

// vocab is the simulator's output vocabulary: one word per generated token, sent with a
// leading space. Every entry is plain lower-case ASCII, so it never needs JSON escaping.
var vocab = [...]string{
	" lorem", " ipsum", " dolor", " sit", " amet", " consectetur", " adipiscing", " elit",
	" sed", " do", " eiusmod", " tempor", " incididunt", " ut", " labore", " et",
	" dolore", " magna", " aliqua", " enim", " ad", " minim", " veniam", " quis",
	" nostrud", " exercitation", " ullamco", " laboris", " nisi", " aliquip", " ex", " ea",
	" commodo", " consequat", " duis", " aute", " irure", " in", " reprehenderit", " voluptate",
	" velit", " esse", " cillum", " fugiat", " nulla", " pariatur", " excepteur", " sint",
	" occaecat", " cupidatat", " non", " proident", " sunt", " culpa", " qui", " officia",
	" deserunt", " mollit", " anim", " id", " est", " laborum", " at", " vero",
}

// splitmix64 is the SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective mix.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// tokenWord returns the text of generated token i of a request whose word seed is seed.
func tokenWord(seed uint64, i int) string {
	return vocab[splitmix64(seed+uint64(i))%uint64(len(vocab))]
}

// appendTokens appends the text of generated tokens [from, to) to b.
func appendTokens(b []byte, seed uint64, from, to int) []byte {
	for i := from; i < to; i++ {
		b = append(b, tokenWord(seed, i)...)
	}
	return b
}

// FNV-1a 64-bit constants.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// promptScanner counts prompt words (the CountPromptTokens rule) and, when hashing, computes
// the chained hash of every full block of blockSize words: block i's hash covers block i-1's
// hash and its own words (and the role markers met inside it), so equal hashes mean equal
// prefixes, as vLLM's block hashes do.
type promptScanner struct {
	blockSize int
	hashing   bool
	words     int
	inBlock   int
	h         uint64
	prev      uint64
	hashes    []uint64
}

func newPromptScanner(blockSize int, hashing bool) promptScanner {
	return promptScanner{blockSize: blockSize, hashing: hashing, h: fnvOffset}
}

func (p *promptScanner) mixByte(c byte) {
	p.h ^= uint64(c)
	p.h *= fnvPrime
}

// marker feeds a non-token separator (a role name) into the current block's hash.
func (p *promptScanner) marker(s string) {
	if !p.hashing {
		return
	}
	p.mixByte(0xff)
	for i := 0; i < len(s); i++ {
		p.mixByte(s[i])
	}
	p.mixByte(0xfe)
}

// add scans one content string.
func (p *promptScanner) add(s string) {
	in := false
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		var space bool
		size := 1
		if c < 0x80 {
			space = asciiSpace[c]
		} else {
			var r rune
			r, size = decodeRune(s[i:])
			space = isSpaceRune(r)
		}
		if space {
			if in {
				p.word(s[start:i])
				in = false
			}
		} else if !in {
			in = true
			start = i
		}
		i += size
	}
	if in {
		p.word(s[start:])
	}
}

func (p *promptScanner) word(w string) {
	p.words++
	if !p.hashing {
		return
	}
	for i := 0; i < len(w); i++ {
		p.mixByte(w[i])
	}
	p.mixByte(0)
	p.inBlock++
	if p.inBlock == p.blockSize {
		p.hashes = append(p.hashes, p.h)
		p.prev = p.h
		p.inBlock = 0
		// Chain: the next block starts from this block's hash.
		p.h = fnvOffset
		for k := 0; k < 8; k++ {
			p.mixByte(byte(p.prev >> (8 * k)))
		}
	}
}
