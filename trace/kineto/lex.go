package kineto

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// parseError is a syntax error at byte at of the slice being parsed.
type parseError struct {
	at  int
	msg string
}

func (e *parseError) Error() string { return e.msg }

// maxDepth bounds the nesting of arrays and objects inside one value.
const maxDepth = 256

// lexer parses JSON values in a byte slice that may end before the value does: running
// off the end is errNeedMore, never a syntax error.
type lexer struct {
	b []byte
	i int
}

func (l *lexer) fail(format string, args ...any) error {
	return &parseError{at: l.i, msg: fmt.Sprintf(format, args...)}
}

// ws skips white space and returns the next byte, or errNeedMore.
func (l *lexer) ws() (byte, error) {
	for l.i < len(l.b) {
		c := l.b[l.i]
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return c, nil
		}
		l.i++
	}
	return 0, errNeedMore
}

// str parses a string at l.i (the opening quote) and returns its raw contents (escapes
// kept) and whether it holds an escape.
func (l *lexer) str() ([]byte, bool, error) {
	start := l.i + 1
	j := start
	esc := false
	for {
		k := bytes.IndexByte(l.b[j:], '"')
		if k < 0 {
			return nil, false, errNeedMore
		}
		seg := l.b[j : j+k]
		if bytes.IndexByte(seg, '\\') < 0 {
			if err := l.checkChars(seg, j); err != nil {
				return nil, false, err
			}
			j += k
			break
		}
		// A backslash in the segment: walk it byte by byte.
		esc = true
		n, done, err := l.escaped(j)
		if err != nil {
			return nil, false, err
		}
		j = n
		if done {
			break
		}
	}
	l.i = j + 1
	return l.b[start:j], esc, nil
}

// escaped walks a string from j, checking escapes, up to its closing quote (done) or the
// end of the slice. It returns the position of the closing quote.
func (l *lexer) escaped(j int) (int, bool, error) {
	for j < len(l.b) {
		c := l.b[j]
		switch {
		case c == '"':
			return j, true, nil
		case c == '\\':
			if j+1 >= len(l.b) {
				return 0, false, errNeedMore
			}
			switch l.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(l.b) {
					return 0, false, errNeedMore
				}
				for _, h := range l.b[j+2 : j+6] {
					if !isHex(h) {
						return 0, false, &parseError{at: j, msg: "bad \\u escape in a string"}
					}
				}
				j += 6
			default:
				return 0, false, &parseError{at: j, msg: "bad escape in a string"}
			}
		case c < 0x20:
			return 0, false, &parseError{at: j, msg: "control character in a string"}
		default:
			j++
		}
	}
	return 0, false, errNeedMore
}

func (l *lexer) checkChars(seg []byte, at int) error {
	for k, c := range seg {
		if c < 0x20 {
			return &parseError{at: at + k, msg: "control character in a string"}
		}
	}
	return nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// num parses a number at l.i and returns its text.
func (l *lexer) num() ([]byte, error) {
	start := l.i
	j := start
	if j < len(l.b) && l.b[j] == '-' {
		j++
	}
	d := j
	for j < len(l.b) && l.b[j] >= '0' && l.b[j] <= '9' {
		j++
	}
	if j == d {
		if j == len(l.b) {
			return nil, errNeedMore
		}
		l.i = j
		return nil, l.fail("bad number")
	}
	if j-d > 1 && l.b[d] == '0' {
		l.i = d
		return nil, l.fail("number with a leading zero")
	}
	if j < len(l.b) && l.b[j] == '.' {
		j++
		f := j
		for j < len(l.b) && l.b[j] >= '0' && l.b[j] <= '9' {
			j++
		}
		if j == f && j < len(l.b) {
			l.i = j
			return nil, l.fail("bad number")
		}
	}
	if j < len(l.b) && (l.b[j] == 'e' || l.b[j] == 'E') {
		j++
		if j < len(l.b) && (l.b[j] == '+' || l.b[j] == '-') {
			j++
		}
		f := j
		for j < len(l.b) && l.b[j] >= '0' && l.b[j] <= '9' {
			j++
		}
		if j == f && j < len(l.b) {
			l.i = j
			return nil, l.fail("bad number exponent")
		}
	}
	if j == len(l.b) { // the number may go on
		return nil, errNeedMore
	}
	l.i = j
	return l.b[start:j], nil
}

// lit parses true, false or null.
func (l *lexer) lit(word string) error {
	n := len(word)
	if len(l.b)-l.i < n {
		if bytes.HasPrefix([]byte(word), l.b[l.i:]) {
			return errNeedMore
		}
		return l.fail("unexpected %s", describeByte(l.b[l.i]))
	}
	if string(l.b[l.i:l.i+n]) != word {
		return l.fail("unexpected %s", describeByte(l.b[l.i]))
	}
	l.i += n
	return nil
}

// skip parses (validates) one value and discards it.
func (l *lexer) skip(depth int) error {
	c, err := l.ws()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		_, _, err := l.str()
		return err
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return l.fail("nested deeper than %d", maxDepth)
		}
		return l.container(c, depth)
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := l.num()
		return err
	case c == 't':
		return l.lit("true")
	case c == 'f':
		return l.lit("false")
	case c == 'n':
		return l.lit("null")
	}
	return l.fail("unexpected %s", describeByte(c))
}

func (l *lexer) container(open byte, depth int) error {
	l.i++
	obj := open == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	c, err := l.ws()
	if err != nil {
		return err
	}
	if c == closer {
		l.i++
		return nil
	}
	for {
		if obj {
			if _, err := l.key(); err != nil {
				return err
			}
		}
		if err := l.skip(depth + 1); err != nil {
			return err
		}
		c, err := l.ws()
		if err != nil {
			return err
		}
		l.i++
		if c == closer {
			return nil
		}
		if c != ',' {
			l.i--
			return l.fail("expected ',' or %q, found %s", closer, describeByte(c))
		}
	}
}

// key parses an object key and its colon, returning the key's raw text.
func (l *lexer) key() ([]byte, error) {
	c, err := l.ws()
	if err != nil {
		return nil, err
	}
	if c != '"' {
		return nil, l.fail("expected a string key, found %s", describeByte(c))
	}
	k, _, err := l.str()
	if err != nil {
		return nil, err
	}
	c, err = l.ws()
	if err != nil {
		return nil, err
	}
	if c != ':' {
		return nil, l.fail("expected ':', found %s", describeByte(c))
	}
	l.i++
	return k, nil
}

// unquote returns the value of a raw string's contents (escapes resolved; invalid UTF-8
// kept as it is).
func unquote(raw []byte, esc bool) string {
	if !esc {
		return string(raw)
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(q, '"')
	q = append(q, raw...)
	q = append(q, '"')
	if s, err := strconv.Unquote(string(q)); err == nil && utf8.ValidString(s) {
		return s
	}
	return string(raw)
}
