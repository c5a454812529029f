package kineto

import (
	"errors"
	"fmt"
	"io"
)

// SyntaxError is a trace file that is not the JSON it should be: malformed or cut short.
// Offset is the byte offset in the decompressed stream where the problem was found.
type SyntaxError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s: malformed trace at byte %d (decompressed): %s", e.File, e.Offset, e.Msg)
}

// errNeedMore is the slice parser's answer when the value runs past the end of the
// bytes it was given: the stream reader reads more and parses the value again.
var errNeedMore = errors.New("need more input")

// stream reads a JSON document from r in a sliding buffer. A value (one trace event, or
// one top-level member's value) is parsed only once it lies whole in the buffer: the
// buffer grows up to maxValue bytes for a large value, so memory is bounded by maxValue
// plus the read size, whatever the size of the file.
type stream struct {
	r        io.Reader
	buf      []byte
	pos, end int
	base     int64 // offset in the stream of buf[0]
	eof      bool
	readErr  error
	maxValue int
}

// The buffer starts at 64 KiB (a small trace stays small) and doubles on each read up to
// 2 MiB; beyond that it grows only for a value that does not fit.
const (
	firstBuffer = 64 << 10
	readBuffer  = 2 << 20
)

func newStream(r io.Reader, maxValue int) *stream {
	return &stream{r: r, buf: make([]byte, firstBuffer), maxValue: maxValue}
}

// offset returns the stream offset of the unread byte at buf[i].
func (s *stream) offset(i int) int64 { return s.base + int64(i) }

// fill moves the unread bytes to the front of the buffer, grows it when the value at pos
// already fills it (up to maxValue, then an error), and reads more. It reports false at
// the end of the input (or a read error, kept in readErr).
func (s *stream) fill() (bool, error) {
	if s.eof {
		return false, nil
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:s.end])
		s.base += int64(s.pos)
		s.pos, s.end = 0, n
	}
	if free := len(s.buf) - s.end; free < len(s.buf)/2 || len(s.buf) < readBuffer {
		if s.end >= s.maxValue && free < len(s.buf)/2 {
			return false, fmt.Errorf("a value longer than %d bytes", s.maxValue)
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.eof = true
			if !errors.Is(err, io.EOF) {
				s.readErr = err
			}
			return n > 0, nil
		}
		if n > 0 {
			return true, nil
		}
	}
}

// skipWS skips white space, reading more as needed; it reports false at the end of the
// input.
func (s *stream) skipWS() (bool, error) {
	for {
		for s.pos < s.end {
			switch s.buf[s.pos] {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return true, nil
			}
		}
		ok, err := s.fill()
		if err != nil || !ok {
			return false, err
		}
	}
}

// value runs parse on the bytes from pos to the buffer's end, reading more and parsing
// again while parse answers errNeedMore. parse returns how many bytes the value took; pos
// moves past them. Other parse errors carry the failing position relative to pos.
func (s *stream) value(parse func(b []byte) (int, error)) error {
	for {
		n, err := parse(s.buf[s.pos:s.end])
		if err == nil {
			s.pos += n
			return nil
		}
		if !errors.Is(err, errNeedMore) {
			var pe *parseError
			if errors.As(err, &pe) {
				return s.errorAt(s.pos+pe.at, pe.msg)
			}
			return s.errorAt(s.pos, err.Error())
		}
		ok, ferr := s.fill()
		if ferr != nil {
			return s.errorAt(s.pos, ferr.Error())
		}
		if !ok {
			return s.truncated()
		}
	}
}

// expect consumes byte c after white space.
func (s *stream) expect(c byte, what string) error {
	ok, err := s.skipWS()
	if err != nil {
		return s.errorAt(s.pos, err.Error())
	}
	if !ok {
		return s.truncated()
	}
	if s.buf[s.pos] != c {
		return s.errorAt(s.pos, fmt.Sprintf("expected %s, found %s", what, describeByte(s.buf[s.pos])))
	}
	s.pos++
	return nil
}

// next returns the next non-space byte without consuming it.
func (s *stream) next() (byte, error) {
	ok, err := s.skipWS()
	if err != nil {
		return 0, s.errorAt(s.pos, err.Error())
	}
	if !ok {
		return 0, s.truncated()
	}
	return s.buf[s.pos], nil
}

func (s *stream) truncated() error {
	if s.readErr != nil {
		return s.errorAt(s.end, "reading: "+s.readErr.Error())
	}
	return s.errorAt(s.end, "unexpected end of input (the file is cut short)")
}

func (s *stream) errorAt(i int, msg string) error {
	return &SyntaxError{Offset: s.offset(i), Msg: msg}
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
