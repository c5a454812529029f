package loadgen

import (
	"errors"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestWorkloadUnmarshalYAML: a workload mapping sets the fields of its keys and leaves the
// others; an unusable entry is a *KeyError with the key and the line.
func TestWorkloadUnmarshalYAML(t *testing.T) {
	decode := func(text string, w *Workload) error {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(text), &n); err != nil {
			t.Fatal(err)
		}
		return n.Content[0].Decode(w)
	}
	timeout := 10.0
	seed := int64(1)
	w := Workload{Timeout: &timeout, InputTokens: []int{32}, Seed: &seed}
	if err := decode("rate: [2, '3,4.5']\narrival: poisson\nno-stream: 1\nextra-body: {top_k: 5}\nrequests: '6'\n", &w); err != nil {
		t.Fatal(err)
	}
	if *w.Timeout != 10 || !reflect.DeepEqual(w.InputTokens, []int{32}) || *w.Seed != 1 || !reflect.DeepEqual(w.Rates, []float64{2, 3, 4.5}) ||
		*w.Arrival != "poisson" || !*w.NoStream || w.ExtraBody != `{"top_k":5}` || *w.Requests != 6 || w.Stream != nil {
		t.Fatalf("decoded %+v", w)
	}
	if err := decode("~\n", &w); err != nil || *w.Requests != 6 {
		t.Fatalf("a null workload: %v", err)
	}
	for _, tc := range []struct {
		text string
		want KeyError
	}{
		{"requests: 2\ninput-tokens:\n  - 512\n  - x\n", KeyError{Key: "input-tokens", Line: 4, Msg: `want a whole number, not "x"`}},
		{"input-tokenz: 1\n", KeyError{Key: "input-tokenz", Line: 1, Msg: `unknown key "input-tokenz"`}},
		{"seed: 1.5\n", KeyError{Key: "seed", Line: 1, Msg: `want a whole number, not "1.5"`}},
		{"stream: yes\n", KeyError{Key: "stream", Line: 1, Msg: `want true or false, not "yes"`}},
		{"timeout: [1, 2]\n", KeyError{Key: "timeout", Line: 1, Msg: `want a number, not "1,2"`}},
		{"duration: fast\n", KeyError{Key: "duration", Line: 1, Msg: `want a number, not "fast"`}},
		{"duration: 1e400\n", KeyError{Key: "duration", Line: 1, Msg: "1e400 is out of range (float64 holds at most ±1.8e+308)"}},
		{"rate:\n  - 2\n  - 1e400\n", KeyError{Key: "rate", Line: 3, Msg: "1e400 is out of range (float64 holds at most ±1.8e+308)"}},
		{"[1]\n", KeyError{Line: 1, Msg: "want a mapping of profile flags (e.g. requests: 10), not a list"}},
	} {
		var ke *KeyError
		if err := decode(tc.text, &Workload{}); !errors.As(err, &ke) || *ke != tc.want {
			t.Errorf("%q: %v, want %+v", tc.text, err, tc.want)
		}
	}
}
