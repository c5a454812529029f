package client

import (
	"fmt"
	"io"
	"time"
)

// readJSON reads a non-streaming JSON answer (a chat.completion object).
func (s *stream) readJSON(body io.Reader, r *Result, onReadErr func(error)) {
	s.res = r
	limit := s.c.maxLine
	if cap(s.body) == 0 {
		s.body = make([]byte, 0, 4096)
	}
	for {
		if len(s.body) == cap(s.body) {
			s.body = append(s.body, 0)[:len(s.body)]
		}
		n, err := body.Read(s.body[len(s.body):cap(s.body)])
		s.body = s.body[:len(s.body)+n]
		if len(s.body) > limit {
			r.End = time.Now()
			r.fail(Error, ErrTypeBodyTooLarge, fmt.Sprintf("the JSON body exceeds %d bytes", limit))
			return
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			r.End = time.Now()
			onReadErr(err)
			return
		}
	}
	r.End = time.Now()
	s.w.reset()
	if err := decodeChunk(s.body, &s.w); err != nil {
		r.fail(Error, ErrTypeInvalidJSON, "the JSON body does not decode: "+err.Error())
		return
	}
	if s.w.isError() {
		se, _ := parseServerError(s.body, false)
		r.failServer(Error, ErrTypeResponseError, "error object in the answer: ", se)
		return
	}
	if len(s.w.Choices) == 0 {
		r.fail(Error, ErrTypeInvalidResponse, "the JSON answer has no choices")
		return
	}
	_, token := s.choices(false)
	if s.w.Usage.set {
		u := s.w.Usage.u
		r.Usage = &u
	}
	r.Text = string(s.text)
	if !token {
		r.failNoContent()
		return
	}
	r.Outcome = OK
}
