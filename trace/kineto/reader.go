package kineto

import (
	"io"
)

// docInfo is what the trace's top level says besides its events.
type docInfo struct {
	baseTimeNS int64
	hasBase    bool
	rank       int64
	hasRank    bool
	events     int64
}

// readDoc reads a Kineto Chrome trace (one JSON object) from r and calls onEvent for each
// element of its traceEvents array, in file order; the event's slices are valid only
// during the call. Every other member is validated and dropped, except
// baseTimeNanoseconds and distributedInfo.rank. Memory is the read buffer (grown only
// for a value over 1 MiB, at most maxValue bytes). Errors are *SyntaxError (File unset),
// or onEvent's error as it is.
func readDoc(r io.Reader, maxValue int, onEvent func(*event) error) (docInfo, error) {
	s := newStream(r, maxValue)
	var info docInfo
	if err := s.expect('{', "a JSON object"); err != nil {
		return info, err
	}
	c, err := s.next()
	if err != nil {
		return info, err
	}
	if c == '}' {
		s.pos++
		return info, s.end0()
	}
	for {
		var key string
		if err := s.value(func(b []byte) (int, error) {
			l := lexer{b: b}
			k, err := l.key()
			key = string(k)
			return l.i, err
		}); err != nil {
			return info, err
		}
		if err := s.member(key, &info, onEvent); err != nil {
			return info, err
		}
		c, err := s.next()
		if err != nil {
			return info, err
		}
		s.pos++
		if c == '}' {
			return info, s.end0()
		}
		if c != ',' {
			return info, s.errorAt(s.pos-1, "expected ',' or '}' after a top-level member, found "+describeByte(c))
		}
	}
}

// member reads the value of one top-level member.
func (s *stream) member(key string, info *docInfo, onEvent func(*event) error) error {
	switch key {
	case "traceEvents":
		return s.events(info, onEvent)
	case "baseTimeNanoseconds":
		return s.value(func(b []byte) (int, error) {
			l := lexer{b: b}
			var has uint16
			err := idValue(&l, &info.baseTimeNS, &has, 1)
			info.hasBase = has != 0
			return l.i, err
		})
	case "distributedInfo":
		return s.value(func(b []byte) (int, error) {
			l := lexer{b: b}
			err := distributedRank(&l, info)
			return l.i, err
		})
	}
	return s.value(func(b []byte) (int, error) {
		l := lexer{b: b}
		err := l.skip(0)
		return l.i, err
	})
}

// events reads the traceEvents array.
func (s *stream) events(info *docInfo, onEvent func(*event) error) error {
	if err := s.expect('[', "the traceEvents array"); err != nil {
		return err
	}
	c, err := s.next()
	if err != nil {
		return err
	}
	if c == ']' {
		s.pos++
		return nil
	}
	var ev event
	for {
		if err := s.value(func(b []byte) (int, error) {
			l := lexer{b: b}
			err := parseEvent(&l, &ev)
			return l.i, err
		}); err != nil {
			return err
		}
		info.events++
		if err := onEvent(&ev); err != nil {
			return err
		}
		c, err := s.next()
		if err != nil {
			return err
		}
		s.pos++
		if c == ']' {
			return nil
		}
		if c != ',' {
			return s.errorAt(s.pos-1, "expected ',' or ']' between trace events, found "+describeByte(c))
		}
	}
}

// distributedRank parses the distributedInfo object, keeping its rank.
func distributedRank(l *lexer, info *docInfo) error {
	c, err := l.ws()
	if err != nil {
		return err
	}
	if c != '{' {
		return l.skip(0)
	}
	l.i++
	if c, err = l.ws(); err != nil {
		return err
	}
	if c == '}' {
		l.i++
		return nil
	}
	for {
		k, err := l.key()
		if err != nil {
			return err
		}
		if string(k) == "rank" {
			var has uint16
			err = idValue(l, &info.rank, &has, 1)
			info.hasRank = has != 0 && info.rank >= 0
		} else {
			err = l.skip(1)
		}
		if err != nil {
			return err
		}
		if c, err = l.ws(); err != nil {
			return err
		}
		l.i++
		if c == '}' {
			return nil
		}
		if c != ',' {
			l.i--
			return l.fail("expected ',' or '}' in distributedInfo, found %s", describeByte(c))
		}
	}
}

// end0 checks that only white space follows the document.
func (s *stream) end0() error {
	ok, err := s.skipWS()
	if err != nil {
		return s.errorAt(s.pos, err.Error())
	}
	if s.readErr != nil {
		return s.errorAt(s.end, "reading: "+s.readErr.Error())
	}
	if ok {
		return s.errorAt(s.pos, "data after the end of the trace object")
	}
	return nil
}
