package client

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// FuzzAppendJSONString proves the fast path of appendJSONString equivalent to encoding/json:
// for every valid JSON string literal, both decode to the same bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"héllo"`, `"a\nb"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"\/"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		var want string
		if len(lit) == 0 || lit[0] != '"' || lit[len(lit)-1] != '"' || json.Unmarshal(lit, &want) != nil {
			return // not a bare string literal: not an input the client ever passes
		}
		if got := string(appendJSONString([]byte("x"), lit)); got != "x"+want {
			t.Fatalf("appendJSONString(%q) = %q, want %q", lit, got[1:], want)
		}
	})
}

// FuzzStream feeds arbitrary bodies to the client's stream reader, whole and cut into random
// reads: it must never panic, and the result must not depend on the cuts.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"ollama-stream-usage.body.sse", "ollama-stream-stop.body.sse"} {
		f.Add(fixture(f, name), uint64(1))
	}
	f.Add([]byte(chunk(`{"reasoning_content":"r"}`, "")+chunk(content("c"), "stop")+doneFrame), uint64(2))
	f.Add([]byte(`data: {"error":{"message":"x"}}`+"\n\n"), uint64(3))
	f.Add([]byte("event: error\ndata: oops\n\n"), uint64(4))
	f.Add([]byte(`data: {"choices":[{"delta":{"content":"a\u00e9"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`+"\r\n\r\n"), uint64(5))
	f.Add([]byte(chunk(roleChunk, "")+chunk(`{}`, "stop")+doneFrame), uint64(6))
	f.Add([]byte(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "tool_calls")+doneFrame), uint64(7))
	c := New(Options{MaxLineBytes: 1 << 12, MaxTextBytes: 64})
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		want := shapeOf(readMem(c, &chunkReader{chunks: [][]byte{body}}))
		if want.Outcome == "" {
			t.Fatal("no outcome")
		}
		if want.Outcome == OK && !want.SawDone && want.FinishReason == "" {
			t.Fatal("OK without [DONE] or finish_reason")
		}
		// A stream succeeds only with content: an answer without any is no_content.
		if want.HasFirstToken != (want.TokenChunks > 0) || (want.Outcome == OK) != (want.ErrorType == "" && want.HasFirstToken) ||
			(want.ErrorType == ErrTypeNoContent && want.HasFirstToken) {
			t.Fatalf("inconsistent: %+v", want)
		}
		r := rand.New(rand.NewPCG(seed, 7))
		var cuts []int
		for off := 0; off < len(body); {
			off += 1 + r.IntN(16)
			if off < len(body) {
				cuts = append(cuts, off)
			}
		}
		if got := shapeOf(readMem(c, &chunkReader{chunks: splitAt(body, cuts...)})); got != want {
			t.Fatalf("cut at %v:\n%+v\nwhole:\n%+v", cuts, got, want)
		}
	})
}

// FuzzDecodeChunk proves decodeChunk equivalent to json.Unmarshal into wireChunk: the same
// verdict, and on success the same decoded fields.
func FuzzDecodeChunk(f *testing.F) {
	for _, name := range []string{"ollama-stream-usage.body.sse", "ollama-nonstream.body.json"} {
		for _, line := range bytes.Split(fixture(f, name), []byte("\n")) {
			line = bytes.TrimPrefix(line, []byte("data: "))
			if len(line) > 0 {
				f.Add(line)
			}
		}
	}
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
		`{"choices":[{},{},{"text":"x"}],"choices":[{}],"choices":[{},{},{}]}`,
		`{"choices":null,"choices":[]}`, `{"CHOICES":[{"DELTA":{"Content":"a"}}]}`,
		`{"cho\u0069ces":[{"delta":{"reaſoning":"r"}}]}`, `{"usage":{"prompt_tokens":1.0}}`,
		`{"usage":null,"usage":{"total_tokens":-0}}`, `{"usage":{"prompt_tokens":9223372036854775808}}`,
		`{"error":{"message":"x"},"object":"error","message":"m"}`, `null`, `[1]`, `"s"`, `{"choices":{}}`,
		`{"choices":[null,{"delta":null,"message":{"content":null}}]}`, `{"a":[[[[]]]],"b":1e-5}`,
		`{"choices":[{"delta":{"content":"\ud800"}}]}` + " \n", "{\"x\":\"\xff\"}", `{"x":tru}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0}]},"message":{"Tool_Calls":[ ]}}]}`, `{"choices":[{"delta":{"tool_calls":{}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got wireChunk
		want.reset()
		got.reset()
		errWant := json.Unmarshal(data, &want)
		s := jscan{data: data}
		ok := s.chunk(&got)
		if ok != (errWant == nil) {
			t.Fatalf("%q: scanner ok=%v, encoding/json err=%v", data, ok, errWant)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nscanner %+v\njson    %+v", data, got, want)
		}
		if err := decodeChunk(data, &got); (err == nil) != (errWant == nil) || (err != nil && err.Error() != errWant.Error()) {
			t.Fatalf("decodeChunk err %v, want %v", err, errWant)
		}
	})
}

func TestDeepNesting(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		data := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		var w wireChunk
		errWant := json.Unmarshal(data, &w)
		s := jscan{data: data}
		if ok := s.chunk(&w); ok != (errWant == nil) {
			t.Fatalf("depth %d: scanner ok=%v, json err=%v", depth, ok, errWant)
		}
	}
}
