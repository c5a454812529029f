package sse

import "strings"

// reference is a deliberately naive, whole-input transcription of the WHATWG "parsing an
// event stream" steps, with the same bounds as Parser, used as an oracle for Parser. It shares
// no code with Parser.
func reference(maxLine int, input []byte) outcome {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	s := string(input)
	// Split into lines: CRLF, LF or CR end a line; a final unterminated line is incomplete.
	var lines []string
	var rest string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			rest = s
			break
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	var o outcome
	var data strings.Builder
	hasData := false
	evType, lastID := "", ""
	for n, line := range lines {
		if len(line) > maxLine {
			o.Err = ErrLineTooLong
			return o
		}
		if n == 0 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		switch {
		case line == "":
			if hasData {
				d := data.String()
				typ := evType
				if typ == "" {
					typ = "message"
				}
				o.Events = append(o.Events, got{typ, lastID, d[:len(d)-1]})
			}
			data.Reset()
			hasData = false
			evType = ""
		case line[0] == ':':
			o.Comments++
		default:
			field, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch field {
			case "data":
				if data.Len()+len(value) > maxLine {
					o.Err = ErrEventTooLong
					return o
				}
				data.WriteString(value)
				data.WriteByte('\n')
				hasData = true
			case "event":
				evType = value
			case "id":
				if !strings.Contains(value, "\x00") {
					lastID = value
				}
			}
		}
	}
	if len(rest) > maxLine {
		o.Err = ErrLineTooLong
		return o
	}
	o.Pending = rest != "" || hasData
	return o
}
