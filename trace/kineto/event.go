package kineto

import (
	"math"
	"strconv"
)

// event is the part of one traceEvents element the importer uses. Strings are raw slices
// of the read buffer, valid until the next element is read. Times are nanoseconds
// relative to baseTimeNanoseconds (ts and dur are µs with three decimals). Ids (pid, tid,
// flow id, correlation, device, stream) are numbers, or a hash (top bit set) of a string.
type event struct {
	ph        byte
	cat, name []byte
	nameEsc   bool
	pid, tid  int64
	ts, dur   int64
	id        int64
	corr      int64
	device    int64
	stream    int64
	has       uint16
	flowEnd   bool // "bp":"e"
}

// Bits of event.has.
const (
	hasTS uint16 = 1 << iota
	hasDur
	hasID
	hasCorr
	hasDevice
	hasStream
	hasPID
	hasTID
)

// parseEvent parses one element of traceEvents at l.i into ev (reset first).
func parseEvent(l *lexer, ev *event) error {
	*ev = event{}
	c, err := l.ws()
	if err != nil {
		return err
	}
	if c != '{' {
		if err := l.skip(0); err != nil { // a non-object element: validated, ignored
			return err
		}
		return nil
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
		if err := ev.field(l, k); err != nil {
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
			return l.fail("expected ',' or '}' in a trace event, found %s", describeByte(c))
		}
	}
}

// field parses the value of key k into ev, skipping the keys it does not use.
func (ev *event) field(l *lexer, k []byte) error {
	var err error
	switch string(k) {
	case "ph":
		var s []byte
		if s, err = strValue(l); err == nil && len(s) == 1 {
			ev.ph = s[0]
		}
	case "cat":
		ev.cat, err = strValue(l)
	case "name":
		ev.name, ev.nameEsc, err = strValueEsc(l)
	case "pid":
		err = idValue(l, &ev.pid, &ev.has, hasPID)
	case "tid":
		err = idValue(l, &ev.tid, &ev.has, hasTID)
	case "ts":
		err = microsValue(l, &ev.ts, &ev.has, hasTS)
	case "dur":
		err = microsValue(l, &ev.dur, &ev.has, hasDur)
	case "id":
		err = idValue(l, &ev.id, &ev.has, hasID)
	case "bp":
		var s []byte
		if s, err = strValue(l); err == nil {
			ev.flowEnd = string(s) == "e"
		}
	case "args":
		err = ev.args(l)
	default:
		err = l.skip(1)
	}
	return err
}

// args parses the event's args object, keeping correlation, device and stream.
func (ev *event) args(l *lexer) error {
	c, err := l.ws()
	if err != nil {
		return err
	}
	if c != '{' {
		return l.skip(1)
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
		switch string(k) {
		case "correlation":
			err = idValue(l, &ev.corr, &ev.has, hasCorr)
		case "device":
			err = idValue(l, &ev.device, &ev.has, hasDevice)
		case "stream":
			err = idValue(l, &ev.stream, &ev.has, hasStream)
		default:
			err = l.skip(2)
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
			return l.fail("expected ',' or '}' in args, found %s", describeByte(c))
		}
	}
}

// strValue parses a value and returns its raw text when it is a string (nil otherwise).
func strValue(l *lexer) ([]byte, error) {
	s, _, err := strValueEsc(l)
	return s, err
}

func strValueEsc(l *lexer) ([]byte, bool, error) {
	c, err := l.ws()
	if err != nil {
		return nil, false, err
	}
	if c != '"' {
		return nil, false, l.skip(1)
	}
	return l.str()
}

// idValue parses a number (an integer, or a float truncated) or a string (hashed) into
// *dst and sets bit in *has; null and other values leave both unchanged.
func idValue(l *lexer, dst *int64, has *uint16, bit uint16) error {
	c, err := l.ws()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		s, _, err := l.str()
		if err != nil {
			return err
		}
		*dst, *has = hashID(s), *has|bit
	case c == '-' || (c >= '0' && c <= '9'):
		t, err := l.num()
		if err != nil {
			return err
		}
		if v, ok := parseInt(t); ok {
			*dst, *has = v, *has|bit
		} else if f, err := strconv.ParseFloat(string(t), 64); err == nil && math.Abs(f) < 9e18 {
			*dst, *has = int64(f), *has|bit
		}
	default:
		return l.skip(1)
	}
	return nil
}

// microsValue parses a time in µs into nanoseconds (rounded to the nearest ns).
func microsValue(l *lexer, dst *int64, has *uint16, bit uint16) error {
	c, err := l.ws()
	if err != nil {
		return err
	}
	if c != '-' && (c < '0' || c > '9') {
		return l.skip(1)
	}
	t, err := l.num()
	if err != nil {
		return err
	}
	if v, ok := microsToNS(t); ok {
		*dst, *has = v, *has|bit
	}
	return nil
}

func parseInt(t []byte) (int64, bool) {
	neg := len(t) > 0 && t[0] == '-'
	d := t
	if neg {
		d = t[1:]
	}
	if len(d) == 0 {
		return 0, false
	}
	if len(d) > 18 {
		v, err := strconv.ParseInt(string(t), 10, 64)
		return v, err == nil
	}
	var v int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// microsToNS converts a decimal µs number to ns: the fast path takes up to 15 integer
// digits and rounds at the fourth decimal; exponents and longer numbers go through
// float64. Values beyond ±9.2e15 µs are refused.
func microsToNS(t []byte) (int64, bool) {
	neg := t[0] == '-'
	j := 0
	if neg {
		j = 1
	}
	var ip int64
	n := 0
	for j < len(t) && t[j] >= '0' && t[j] <= '9' {
		ip = ip*10 + int64(t[j]-'0')
		j++
		n++
	}
	if n <= 15 && (j == len(t) || t[j] == '.') {
		var frac int64
		digits := 0
		round := false
		if j < len(t) {
			j++
			for ; j < len(t); j++ {
				if t[j] < '0' || t[j] > '9' {
					return floatMicros(t)
				}
				switch {
				case digits < 3:
					frac = frac*10 + int64(t[j]-'0')
					digits++
				case digits == 3:
					round = t[j] >= '5'
					digits++
				}
			}
		}
		for k := min(digits, 3); k < 3; k++ {
			frac *= 10
		}
		v := ip*1000 + frac
		if round {
			v++
		}
		if neg {
			v = -v
		}
		return v, true
	}
	return floatMicros(t)
}

func floatMicros(t []byte) (int64, bool) {
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 9.2e15 {
		return 0, false
	}
	return int64(math.Round(f * 1000)), true
}

// hashID is FNV-1a of a string id with the top bit set, so that it never equals a
// non-negative numeric id.
func hashID(s []byte) int64 {
	h := uint64(14695981039346656037)
	for _, c := range s {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int64(h | 1<<63)
}
