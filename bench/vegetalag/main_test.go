package main

import (
	"strings"
	"testing"
)

func TestParseHits(t *testing.T) {
	in := "1700000000000000000,200,1000,10,20,,,,0,POST,http://x,\n" +
		"1700000000002000000,500,1000,10,20,\"boom, it said\",,,1,POST,http://x,\n"
	hits, ok, err := parseHits(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || len(hits) != 2 || hits[1] != (hit{1700000000002000000, 1}) {
		t.Fatalf("hits %v ok %d", hits, ok)
	}
	for _, bad := range []string{"1,200\n", "x,200,1,1,1,,,,0\n", "1,200,1,1,1,,,,-1\n", "\"unterminated\n"} {
		if _, _, err := parseHits(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseHits(f *testing.F) {
	f.Add("1700000000000000000,200,1000,10,20,,,,0,POST,http://x,\n")
	f.Add("1,500,1,1,1,\"a,b\",,,3\n2,200,1,1,1,,,,4\n")
	f.Fuzz(func(t *testing.T, s string) {
		hits, ok, err := parseHits(strings.NewReader(s))
		if err != nil {
			return
		}
		if ok > len(hits) {
			t.Fatalf("ok %d > %d hits", ok, len(hits))
		}
		for _, h := range hits {
			if h.seq < 0 {
				t.Fatalf("negative seq %d", h.seq)
			}
		}
	})
}
