package artifact

import (
	"strings"
	"testing"
)

func TestEchoURL(t *testing.T) {
	for in, want := range map[string]string{
		"not a url":                                  "not a url",
		"http://h:8000/v1":                           "http://h:8000/v1",
		"http://h/v 1/é":                             "http://h/v 1/é",
		"http://user:s3cret@h:8000/v1":               "http://<redacted>@h:8000/v1",
		"http://a@b:s3cret@h/v1?api_key=sk-abc#frag": "http://<redacted>@h/v1?<redacted>",
		"user:s3cret@localhost:8000/v1":              "<redacted>@localhost:8000/v1",
		"localhost:8000/v1":                          "localhost:8000/v1",
		"http://h/v1?":                               "http://h/v1",
		"http://h/p@th?token=x":                      "http://h/p@th?<redacted>",
		"ht tp://us er:pa ss@h st/v1":                "ht tp://<redacted>@h st/v1",
		"":                                           "",
	} {
		got := EchoURL(in)
		if got != want {
			t.Errorf("EchoURL(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"s3cret", "sk-abc", "pa ss", "token"} {
			if strings.Contains(got, secret) {
				t.Errorf("EchoURL(%q) = %q shows %q", in, got, secret)
			}
		}
	}
}
