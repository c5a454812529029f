package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// decodeChunk decodes a chat chunk (or a chat.completion body) into w, exactly as
// json.Unmarshal(data, w) does — the same error/no-error verdict and the same field values,
// including encoding/json's rules for case-insensitive keys, duplicate keys (later ones
// merge into or replace earlier ones), null, slice reuse and the nesting limit — but in one
// pass without allocating. FuzzDecodeChunk checks the equivalence against json.Unmarshal.
// On error the message is encoding/json's (the slow path runs only then).
func decodeChunk(data []byte, w *wireChunk) error {
	s := jscan{data: data}
	if !s.chunk(w) {
		var ref wireChunk
		if err := json.Unmarshal(data, &ref); err != nil {
			return err
		}
		return errors.New("invalid JSON") // not reached while the scanner matches encoding/json
	}
	return nil
}

// maxDepth is encoding/json's nesting limit (scanner.go maxNestingDepth).
const maxDepth = 10000

// jscan is a validating JSON scanner over data. Every method returns false on a syntax
// error or on a value whose type encoding/json would refuse for the target field.
type jscan struct {
	data  []byte
	i     int
	depth int
}

func (s *jscan) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// chunk decodes the top-level value: an object into w, null (no effect), else a type error.
func (s *jscan) chunk(w *wireChunk) bool {
	s.ws()
	switch s.peek() {
	case '{':
		if !s.object(func(key []byte) bool {
			switch {
			case keyIs(key, "choices"):
				return s.choices(w)
			case keyIs(key, "usage"):
				return s.usage(&w.Usage)
			case keyIs(key, "error"):
				return s.raw(&w.Error)
			case keyIs(key, "object"):
				return s.raw(&w.Object)
			}
			return s.skip()
		}) {
			return false
		}
	case 'n':
		if !s.skip() {
			return false
		}
	default:
		return false // syntax error, or a type error (a non-object into a struct)
	}
	s.ws()
	return s.i == len(s.data)
}

// object scans an object at s.i, calling member for each key with s.i at the value; member
// must consume the value.
func (s *jscan) object(member func(key []byte) bool) bool {
	s.i++ // '{'
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.ws()
		start := s.i
		esc, ok := s.str()
		if !ok {
			return false
		}
		key := s.data[start+1 : s.i-1]
		if esc {
			var k string
			if json.Unmarshal(s.data[start:s.i], &k) != nil {
				return false
			}
			key = []byte(k)
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// array scans an array at s.i, calling elem with s.i at each element.
func (s *jscan) array(elem func(i int) bool) bool {
	s.i++ // '['
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for n := 0; ; n++ {
		s.ws()
		if !elem(n) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// keyIs reports whether a JSON key selects the field named name: encoding/json matches
// exactly or by Unicode case folding (fold.go: foldName(x) == foldName(y) iff
// bytes.EqualFold(x, y)).
func keyIs(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

// raw keeps the next value's bytes (any type, null included: the field is an Unmarshaler).
func (s *jscan) raw(dst *raw) bool {
	start := s.i
	if !s.skip() {
		return false
	}
	*dst = s.data[start:s.i]
	return true
}

// choices decodes into the []wireChoice field like encoding/json: null sets nil; an array
// decodes element i into the existing element i (no zeroing), growing within capacity
// first, truncates to its length, and an empty array leaves an empty slice without capacity.
func (s *jscan) choices(w *wireChunk) bool {
	switch s.peek() {
	case 'n':
		if !s.skip() {
			return false
		}
		w.Choices = nil
		return true
	case '[':
	default:
		s.skip()
		return false // type error (or syntax error)
	}
	count := 0
	if !s.array(func(i int) bool {
		if i >= len(w.Choices) {
			if i < cap(w.Choices) {
				w.Choices = w.Choices[:i+1]
			} else {
				w.Choices = append(w.Choices, wireChoice{})
			}
		}
		count = i + 1
		return s.choice(&w.Choices[i])
	}) {
		return false
	}
	if count < len(w.Choices) {
		w.Choices = w.Choices[:count]
	}
	if count == 0 {
		w.Choices = w.Choices[:0:0]
		if w.Choices == nil {
			w.Choices = []wireChoice{}
		}
	}
	return true
}

// nullOrObject skips null and decodes an object's members with member; any other value is
// a type error (false).
func (s *jscan) nullOrObject(member func(key []byte) bool) bool {
	switch s.peek() {
	case 'n':
		return s.skip()
	case '{':
		return s.object(member)
	}
	return false
}

// choice decodes one element: an object merges into ch, null leaves it, else a type error.
func (s *jscan) choice(ch *wireChoice) bool {
	return s.nullOrObject(func(key []byte) bool {
		switch {
		case keyIs(key, "delta"):
			return s.message(&ch.Delta)
		case keyIs(key, "message"):
			return s.message(&ch.Message)
		case keyIs(key, "text"):
			return s.raw(&ch.Text)
		case keyIs(key, "finish_reason"):
			return s.raw(&ch.FinishReason)
		}
		return s.skip()
	})
}

func (s *jscan) message(m *wireMessage) bool {
	return s.nullOrObject(func(key []byte) bool {
		switch {
		case keyIs(key, "content"):
			return s.raw(&m.Content)
		case keyIs(key, "reasoning_content"):
			return s.raw(&m.ReasoningContent)
		case keyIs(key, "reasoning"):
			return s.raw(&m.Reasoning)
		case keyIs(key, "tool_calls"):
			return s.raw(&m.ToolCalls)
		}
		return s.skip()
	})
}

// usage mirrors wireUsage.UnmarshalJSON: null is no-op; otherwise set, and the value must
// be an object whose token fields are int64 numbers or null.
func (s *jscan) usage(u *wireUsage) bool {
	if s.peek() == 'n' {
		return s.skip()
	}
	u.set = true
	if s.peek() != '{' {
		return false
	}
	return s.object(func(key []byte) bool {
		switch {
		case keyIs(key, "prompt_tokens"):
			return s.int64(&u.u.PromptTokens)
		case keyIs(key, "completion_tokens"):
			return s.int64(&u.u.CompletionTokens)
		case keyIs(key, "total_tokens"):
			return s.int64(&u.u.TotalTokens)
		}
		return s.skip()
	})
}

// int64 decodes a number into an int64 field like encoding/json (strconv.ParseInt of the
// literal; null leaves the field; other types are type errors).
func (s *jscan) int64(dst *int64) bool {
	c := s.peek()
	if c == 'n' {
		return s.skip()
	}
	if c != '-' && (c < '0' || c > '9') {
		return false
	}
	start := s.i
	if !s.number() {
		return false
	}
	n, err := strconv.ParseInt(string(s.data[start:s.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// skip validates and passes over one value.
func (s *jscan) skip() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		return s.array(func(int) bool { return s.skip() })
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *jscan) lit(word string) bool {
	if len(s.data)-s.i >= len(word) && string(s.data[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// str passes over a string literal at s.i and reports whether it has escapes. Bytes
// >= 0x80 are accepted whatever they are (encoding/json replaces invalid UTF-8, it does
// not refuse it); control characters are refused.
func (s *jscan) str() (escaped, ok bool) {
	if s.peek() != '"' {
		return false, false
	}
	s.i++
	for s.i < len(s.data) {
		// Skip ordinary bytes in a tight loop.
		for s.i < len(s.data) && !strSpecial[s.data[s.i]] {
			s.i++
		}
		if s.i >= len(s.data) {
			break
		}
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return escaped, true
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.data) {
				return false, false
			}
			switch s.data[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.data) {
					return false, false
				}
				for _, h := range s.data[s.i+2 : s.i+6] {
					if !isHex(h) {
						return false, false
					}
				}
				s.i += 6
			default:
				return false, false
			}
		default: // a control character
			return false, false
		}
	}
	return false, false
}

// strSpecial marks the bytes that end the fast loop inside a string: '"', '\\' and controls.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number passes over a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jscan) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *jscan) digits() bool {
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
