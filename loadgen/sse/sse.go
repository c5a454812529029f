// Package sse is an incremental, byte-exact parser for Server-Sent Events streams
// (text/event-stream), following the "event stream interpretation" rules of the WHATWG HTML
// Living Standard, §9.2.6 "Parsing an event stream" (https://html.spec.whatwg.org/multipage/server-sent-events.html).
//
// The parser is fed the body as it arrives, in reads of any size: an event (or a line, or a
// CRLF pair, or a UTF-8 character) may be split at any byte, and one read may carry several
// events. The events it emits, and the order of them, do not depend on how the input was split.
//
// Differences from a browser's EventSource, all deliberate for a measuring client:
//   - Bytes are kept as they are: invalid UTF-8 is passed through unchanged (a browser would
//     substitute U+FFFD), because the payload is JSON and its decoder judges it.
//   - Line length and event size are bounded (ErrLineTooLong, ErrEventTooLong) instead of
//     buffering without limit.
//   - Comment lines are counted (Comments), so keep-alives can be seen.
package sse

import (
	"bytes"
	"errors"
)

// ErrLineTooLong is returned by Feed when one line (without its line end) exceeds the
// parser's maxLine bytes. The parser is then unusable (every later Feed returns the same
// error) until Reset.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLong is returned by Feed when the data of one event (its data lines joined by
// "\n") would exceed the parser's maxLine bytes. Sticky like ErrLineTooLong.
var ErrEventTooLong = errors.New("sse: event data too long")

// DefaultMaxLine is a line bound (16 MiB) suitable for OpenAI-compatible streams, whose
// largest lines are single JSON chunks.
const DefaultMaxLine = 16 << 20

// retainLimit bounds the capacity of the internal buffers kept between events: a buffer
// that grew past it for one long line is dropped afterwards rather than kept for the life of
// the parser.
const retainLimit = 64 << 10

// Event is one dispatched event.
type Event struct {
	// Type is the event type: the value of the last "event:" field of the event, or
	// "message" when it had none (the WHATWG default).
	Type string
	// ID is the last event ID: the value of the most recent "id:" field seen so far in the
	// stream (it persists across events, as the standard says), "" if none.
	ID string
	// Data is the event's data lines joined by "\n" (no trailing "\n"). It aliases the
	// parser's buffer and is valid only during the emit callback; copy it to keep it.
	Data []byte
}

// Parser is an incremental event-stream parser. The zero value is not usable; call NewParser.
// A Parser is not safe for concurrent use.
type Parser struct {
	maxLine  int
	line     []byte // a partial line carried over from the previous Feed
	data     []byte // the data buffer of the event being built: each data line plus "\n"
	evType   string // event type buffer
	lastID   string // last event ID buffer
	retry    int64  // reconnection time from the last valid "retry:" field, ms
	hasRetry bool
	skipLF   bool // the previous Feed ended in CR: a leading LF is part of that line end
	started  bool // at least one line has been processed (for the BOM rule)
	dataSeen bool // a data field was seen for the event being built
	comments int
	events   int
	err      error
}

// NewParser returns a parser that refuses lines, and event data, longer than maxLine bytes.
// maxLine <= 0 means DefaultMaxLine.
func NewParser(maxLine int) *Parser {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Parser{maxLine: maxLine}
}

// Reset returns the parser to its initial state (a new stream) and keeps its buffers when
// they are small, so one parser can serve many streams.
func (p *Parser) Reset() {
	*p = Parser{maxLine: p.maxLine, line: keep(p.line), data: keep(p.data)}
}

func keep(b []byte) []byte {
	if cap(b) > retainLimit {
		return nil
	}
	return b[:0]
}

// Comments is the number of comment lines (lines starting with ':', such as keep-alives)
// seen so far.
func (p *Parser) Comments() int { return p.comments }

// Events is the number of events emitted so far.
func (p *Parser) Events() int { return p.events }

// Retry returns the reconnection time in milliseconds from the last valid "retry:" field
// (ASCII digits only), and whether there was one. Values past 2^63-1 saturate.
func (p *Parser) Retry() (ms int64, ok bool) { return p.retry, p.hasRetry }

// Pending reports whether input is buffered that has not produced an event: a partial line,
// or data lines of an event whose terminating blank line has not arrived. At the end of a
// stream such input is discarded, as the standard says; Pending lets a caller tell a stream
// that ended cleanly between events from one cut inside an event.
func (p *Parser) Pending() bool { return len(p.line) > 0 || p.dataSeen }

// Err returns the sticky error, if any.
func (p *Parser) Err() error { return p.err }

// Feed parses the next bytes of the stream and calls emit, synchronously and in order, for
// every event completed by them. It does not retain p. emit must not call Feed. Feed returns
// ErrLineTooLong or ErrEventTooLong when a bound is exceeded (events completed before that
// point in p have been emitted); the error is sticky.
func (p *Parser) Feed(b []byte, emit func(Event)) error {
	if p.err != nil {
		return p.err
	}
	for len(b) > 0 {
		if p.skipLF {
			p.skipLF = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		// Find the first CR or LF with two vectorised scans instead of a byte loop.
		end := bytes.IndexByte(b, '\n')
		region := b
		if end >= 0 {
			region = b[:end]
		}
		if cr := bytes.IndexByte(region, '\r'); cr >= 0 {
			end = cr
		}
		if end < 0 {
			if len(p.line)+len(b) > p.maxLine {
				return p.fail(ErrLineTooLong)
			}
			p.line = append(p.line, b...)
			return nil
		}
		var line []byte
		if len(p.line) > 0 {
			if len(p.line)+end > p.maxLine {
				return p.fail(ErrLineTooLong)
			}
			p.line = append(p.line, b[:end]...)
			line = p.line
		} else {
			if end > p.maxLine {
				return p.fail(ErrLineTooLong)
			}
			line = b[:end]
		}
		if b[end] == '\r' {
			if end+1 < len(b) {
				if b[end+1] == '\n' {
					end++
				}
			} else {
				p.skipLF = true
			}
		}
		b = b[end+1:]
		err := p.processLine(line, emit)
		if len(p.line) > 0 {
			p.line = keep(p.line)
		}
		if err != nil {
			return p.fail(err)
		}
	}
	return nil
}

func (p *Parser) fail(err error) error {
	p.err = err
	p.line = nil
	p.data = nil
	return err
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// processLine applies the standard's per-line rules to one line (without its line end).
func (p *Parser) processLine(line []byte, emit func(Event)) error {
	if !p.started {
		p.started = true
		// "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are present."
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		p.dispatch(emit)
		return nil
	}
	if line[0] == ':' {
		p.comments++
		return nil
	}
	var field, value []byte
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	} else {
		field = line
	}
	switch string(field) {
	case "data":
		if len(p.data)+len(value)+1 > p.maxLine+1 {
			return ErrEventTooLong
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
		p.dataSeen = true
	case "event":
		if string(value) != p.evType {
			p.evType = string(value)
		}
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != p.lastID {
			p.lastID = string(value)
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			p.retry, p.hasRetry = ms, true
		}
	}
	return nil
}

// dispatch ends the event being built at a blank line.
func (p *Parser) dispatch(emit func(Event)) {
	if !p.dataSeen {
		// "If the data buffer is an empty string, set the data buffer and the event type
		// buffer to the empty string and return."
		p.evType = ""
		return
	}
	typ := p.evType
	if typ == "" {
		typ = "message"
	}
	p.events++
	emit(Event{Type: typ, ID: p.lastID, Data: p.data[:len(p.data)-1]})
	p.data = keep(p.data)
	p.evType = ""
	p.dataSeen = false
}

// parseDigits parses a non-empty run of ASCII digits, saturating at the int64 maximum.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + d
	}
	return n, true
}
