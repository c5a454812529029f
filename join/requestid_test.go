package join

import (
	"reflect"
	"strings"
	"testing"
)

func TestCandidateRequestIDs(t *testing.T) {
	x := "inferprobe-6f1d2c3e-aaaa-bbbb-cccc-0123456789ab-c8_in512_out128_measured_0_3"
	for _, c := range []struct {
		id        string
		want      []string
		recovered string // "" = nil
	}{
		// chat: chatcmpl-<X>
		{"chatcmpl-" + x, []string{x, "inferprobe-6f1d2c3e-aaaa-bbbb-cccc-0123456789ab-c8_in512_out128_measured_0"}, x},
		{"chatcmpl-abc", []string{"abc"}, "abc"},
		// multi-conversation batch sub-request: chatcmpl-<X>_<i>
		{"chatcmpl-abc_2", []string{"abc_2", "abc"}, "abc_2"},
		// completions: cmpl-<X>-<i>, the prompt index first stripped
		{"cmpl-q05-warmup-r0000-0", []string{"q05-warmup-r0000", "q05-warmup-r0000-0"}, "q05-warmup-r0000"},
		{"cmpl-abc-12", []string{"abc", "abc-12"}, "abc"},
		{"cmpl-abc", []string{"abc"}, "abc"},
		// internal uniquifying suffix <external>-<8 hex>
		{"chatcmpl-abc-1a2b3c4d", []string{"abc-1a2b3c4d", "abc"}, "abc-1a2b3c4d"},
		{"cmpl-abc-0-deadbeef", []string{"abc-0-deadbeef", "abc", "abc-0"}, "abc-0-deadbeef"},
		// n>1 children of vLLM before 2025-12-23: <i>_chatcmpl-<X>
		{"1_chatcmpl-abc", []string{"abc", "1_chatcmpl-abc"}, "abc"},
		{"12_cmpl-abc-0", []string{"abc", "abc-0", "12_cmpl-abc-0"}, "abc"},
		// a bare id (random server id, other servers) is its own candidate
		{"0123456789abcdef", []string{"0123456789abcdef"}, ""},
		{"embd-abc", []string{"embd-abc"}, ""},
		{"1_abc", []string{"1_abc"}, ""},
		// degenerate forms
		{"chatcmpl-", []string{"chatcmpl-"}, ""},
		{"cmpl-", []string{"cmpl-"}, ""},
		{"", nil, ""},
		{strings.Repeat("a", maxRequestIDLen+1), nil, ""},
	} {
		got := CandidateRequestIDs(c.id)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("CandidateRequestIDs(%q) = %q, want %q", c.id, got, c.want)
		}
		rec := RecoverRequestID(c.id)
		switch {
		case c.recovered == "" && rec != nil:
			t.Errorf("RecoverRequestID(%q) = %q, want nil", c.id, *rec)
		case c.recovered != "" && (rec == nil || *rec != c.recovered):
			t.Errorf("RecoverRequestID(%q) = %v, want %q", c.id, rec, c.recovered)
		}
	}
}

// Every form vLLM produces from one X-Request-Id lists that id among its
// candidates.
func TestCandidateRequestIDsContainTheSentID(t *testing.T) {
	for _, xrid := range []string{"inferprobe-run-1-c1_measured_0_0", "abc", "a-b-c-0", "x_1", "deadbeef-12345678"} {
		for _, id := range []string{
			"chatcmpl-" + xrid, "chatcmpl-" + xrid + "_0", "cmpl-" + xrid + "-0", "cmpl-" + xrid + "-7",
			"chatcmpl-" + xrid + "-0f1e2d3c", "cmpl-" + xrid + "-0-0f1e2d3c", "0_chatcmpl-" + xrid, "3_cmpl-" + xrid + "-1",
		} {
			found := false
			for _, c := range CandidateRequestIDs(id) {
				found = found || c == xrid
			}
			if !found {
				t.Errorf("%q: candidates %q lack %q", id, CandidateRequestIDs(id), xrid)
			}
		}
	}
}

// FuzzCandidateRequestIDs: candidates are non-empty, distinct, substrings
// of the id.
func FuzzCandidateRequestIDs(f *testing.F) {
	for _, s := range []string{"chatcmpl-abc", "cmpl-q05-warmup-r0000-0", "1_chatcmpl-x_2", "cmpl-a-0-deadbeef", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		c := CandidateRequestIDs(id)
		seen := map[string]bool{}
		for _, s := range c {
			if s == "" || seen[s] || !strings.Contains(id, s) {
				t.Fatalf("candidates %q of %q", c, id)
			}
			seen[s] = true
		}
		if r := RecoverRequestID(id); r != nil && (len(c) == 0 || *r != c[0]) {
			t.Fatalf("recovered %q, candidates %q", *r, c)
		}
	})
}
