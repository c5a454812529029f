package client

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// serverErrorShapes are error bodies as servers send them, for the table test and as the
// fuzz seed corpus.
var serverErrorShapes = []struct {
	name, body string
	known      bool // parsed as the body of a non-2xx answer
	ok         bool
	want       serverError
}{
	{"vLLM in-stream error", `{"error":{"message":"engine failure","type":"InternalServerError","code":500}}`, false, true,
		serverError{"engine failure", "InternalServerError", "500"}},
	{"OpenAI string code", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, true, true,
		serverError{"Incorrect API key provided", "invalid_request_error", "invalid_api_key"}},
	{"llama.cpp", `{"error":{"code":500,"message":"failed to decode the batch","type":"server_error"}}`, false, true,
		serverError{"failed to decode the batch", "server_error", "500"}},
	{"SGLang / old vLLM ErrorResponse", `{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":400}`, false, true,
		serverError{"context too long", "BadRequestError", "400"}},
	{"object error without a message", `{"object":"error","code":"x"}`, false, true, serverError{"error object without a message", "", "x"}},
	{"error string", `{"error":"plain"}`, false, true, serverError{"plain", "", ""}},
	{"empty error string", `{"error":"","code":1}`, false, true, serverError{"error object without a message", "", "1"}},
	{"TGI error string with error_type", `{"error":"Request failed during generation: out of memory","error_type":"generation"}`, false, true,
		serverError{"Request failed during generation: out of memory", "generation", ""}},
	{"error string with type and code beside it", `{"error":"slow down","type":"rate_limit","code":429}`, true, true, serverError{"slow down", "rate_limit", "429"}},
	{"error object without a message", `{"error":{"type":"X","code":null}}`, false, true, serverError{`{"type":"X","code":null}`, "X", ""}},
	{"error number", `{"error":7}`, false, true, serverError{"7", "", ""}},
	{"null error is none", `{"error":null,"choices":[]}`, false, false, serverError{}},
	{"a chunk is none", `{"choices":[{"delta":{"content":"a"}}],"message":"m"}`, false, false, serverError{}},
	{"odd code values, compacted", `{"error":{"message":"m","type":{"a": [1, 2]},"code":5E2}}`, false, true, serverError{"m", `{"a":[1,2]}`, "5E2"}},
	{"boolean code, empty type", `{"error":{"message":"m","type":"","code":true}}`, false, true, serverError{"m", "", "true"}},
	{"case-insensitive keys, last duplicate wins", `{"ERROR":{"message":"a"},"error":{"Message":"b","TYPE":"T"}}`, false, true, serverError{"b", "T", ""}},
	{"message body", `{"message":"overloaded","type":"overloaded_error"}`, true, true, serverError{"overloaded", "overloaded_error", ""}},
	{"message body in a 2xx is none", `{"message":"overloaded"}`, false, false, serverError{}},
	{"FastAPI detail", `{"detail":"Not Found"}`, true, true, serverError{"Not Found", "", ""}},
	{"FastAPI detail list", `{"detail":[{"loc":["body"],"msg":"field required"}]}`, true, true, serverError{`[{"loc":["body"],"msg":"field required"}]`, "", ""}},
	{"text", " boom\n", true, true, serverError{"boom", "", ""}},
	{"empty", "", true, true, serverError{}},
	{"invalid JSON in a 2xx is none", `{"error":`, false, false, serverError{}},
}

func TestParseServerError(t *testing.T) {
	for _, tc := range serverErrorShapes {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseServerError([]byte(tc.body), tc.known)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	long := strings.Repeat("é", MaxServerErrorFieldBytes) // 2 bytes each: cut inside a rune
	got, _ := parseServerError([]byte(`{"error":{"message":"m","type":"`+long+`","code":"`+long[:MaxServerErrorFieldBytes]+`"}}`), false)
	if got.Type != long[:MaxServerErrorFieldBytes]+"…" || got.Code != long[:MaxServerErrorFieldBytes] {
		t.Fatalf("type %q (%d bytes) code %q", got.Type, len(got.Type), got.Code)
	}
}

// FuzzParseServerError: the parser never panics; a 2xx chunk is an error exactly when the
// stream's decoder detects one (wireChunk.isError), then with a message; the body of a
// non-2xx answer always is one, with the same reading when a 2xx one would be; type and
// code are bounded, valid UTF-8.
func FuzzParseServerError(f *testing.F) {
	for _, tc := range serverErrorShapes {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(`{"object":"\u0065rror","message":"m"}`))
	f.Add([]byte(`{"error":{"message":"\ud800","type":"` + "\xff" + `","code":[{"x":"` + "\xfe" + `"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, isErr := parseServerError(data, false)
		known, ok := parseServerError(data, true)
		if !ok {
			t.Fatal("a known error body is always an error")
		}
		if isErr && (strict != known || strict.Message == "") {
			t.Fatalf("2xx reading %+v, non-2xx reading %+v", strict, known)
		}
		if !isErr && strict != (serverError{}) {
			t.Fatalf("no error, but %+v", strict)
		}
		var w wireChunk
		if decodeChunk(data, &w) == nil && w.isError() != isErr {
			t.Fatalf("the stream's decoder says error=%v, the parser %v", w.isError(), isErr)
		}
		for _, s := range []string{known.Type, known.Code} {
			if len(s) > MaxServerErrorFieldBytes+len("…") || !utf8.ValidString(s) {
				t.Fatalf("type or code %q", s)
			}
		}
	})
}
