package prompt

import (
	"fmt"
	"testing"
)

// BenchmarkPrompt measures Prompt (built at send time, on the dispatch hot path) per mode
// and input length, with the cl100k_base counter (sizing by construction: no tokenizing).
//
//	go test -run '^$' -bench 'Prompt$' -benchmem ./loadgen/prompt
func BenchmarkPrompt(b *testing.B) {
	tok := mustTok(b, "cl100k_base")
	for _, w := range []int{512, 4096} {
		for _, spec := range []Spec{
			{Mode: Repeat, InputTokens: w, Seed: 1},
			{Mode: Unique, InputTokens: w, Seed: 1, CaseID: "c8_in512_out128", Phase: "measured"},
			{Mode: SharedPrefix, InputTokens: w, SharedPrefixRatio: 0.75, PrefixGroups: 4, Seed: 1, CaseID: "c8_in512_out128", Phase: "measured"},
		} {
			b.Run(fmt.Sprintf("%s/in%d", spec.Mode, w), func(b *testing.B) {
				g := mustGen(b, spec, tok)
				g.Prompt(0) // warm the group-prefix cache as a running phase would be
				b.ReportAllocs()
				b.SetBytes(int64(len(g.Prompt(0).Text)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if p := g.Prompt(i); p.Tokens != w {
						b.Fatal(p.Tokens)
					}
				}
			})
		}
	}
}

// BenchmarkNewGenerator measures the per-phase setup (filler, repeat prompt).
func BenchmarkNewGenerator(b *testing.B) {
	tok := mustTok(b, "cl100k_base")
	for _, mode := range []Mode{Repeat, Unique, SharedPrefix} {
		b.Run(fmt.Sprintf("%s/in4096", mode), func(b *testing.B) {
			spec := Spec{Mode: mode, InputTokens: 4096, Seed: 1, CaseID: "c", Phase: "measured"}
			if mode == SharedPrefix {
				spec.SharedPrefixRatio, spec.PrefixGroups = 0.75, 4
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				mustGen(b, spec, tok)
			}
		})
	}
}

// BenchmarkTiktokenCount is what sizing by construction avoids per request.
func BenchmarkTiktokenCount(b *testing.B) {
	tok := mustTok(b, "cl100k_base")
	text := mustGen(b, Spec{Mode: Unique, InputTokens: 4096, Seed: 1}, tok).Prompt(0).Text
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		tok.Count(text)
	}
}
