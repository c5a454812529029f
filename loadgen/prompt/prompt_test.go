package prompt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

func mustTok(t testing.TB, enc string) Tokenizer {
	t.Helper()
	tok, err := TiktokenCounter(enc)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func mustGen(t testing.TB, spec Spec, tok Tokenizer) *Generator {
	t.Helper()
	g, err := NewGenerator(spec, tok)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var lowerWord = regexp.MustCompile(`^[a-z]{3,10}$`)

// Every vocabulary word is one token, bare and after a space, in both encodings — checked
// with the codecs directly, not through the counter's cached flag.
func TestVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range vocabulary {
		if !lowerWord.MatchString(w) {
			t.Errorf("word %q is not 3–10 lowercase letters", w)
		}
		if seen[w] {
			t.Errorf("word %q appears twice", w)
		}
		seen[w] = true
	}
	for _, enc := range []tokenizer.Encoding{tokenizer.Cl100kBase, tokenizer.O200kBase} {
		c, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range vocabulary {
			for _, s := range []string{w, " " + w} {
				if ids, _, _ := c.Encode(s); len(ids) != 1 {
					t.Errorf("%s: %q is %d tokens", enc, s, len(ids))
				}
			}
		}
		tok := mustTok(t, string(enc)).(*tiktokenCounter)
		if !tok.wordsAreTokens() {
			t.Errorf("%s: counter does not size by words", enc)
		}
	}
}

func TestTokenizers(t *testing.T) {
	cl := mustTok(t, "")
	if cl.Name() != "cl100k_base" || !cl.Exact() {
		t.Errorf("default counter: %s exact=%v", cl.Name(), cl.Exact())
	}
	// Reference counts from OpenAI's tiktoken.
	for s, want := range map[string]int{"": 0, "hello world": 2, "tiktoken is great!": 6, "antidisestablishmentarianism": 6} {
		if got := cl.Count(s); got != want {
			t.Errorf("cl100k_base Count(%q) = %d, want %d", s, got, want)
		}
	}
	o2 := mustTok(t, "o200k_base")
	if o2.Name() != "o200k_base" || o2.Count("hello world") != 2 {
		t.Errorf("o200k_base: %s %d", o2.Name(), o2.Count("hello world"))
	}
	if tok := mustTok(t, "p50k_base"); tok.Name() != "p50k_base" {
		t.Errorf("p50k_base: %s", tok.Name())
	}
	if _, err := TiktokenCounter("gpt-7_base"); err == nil || !strings.Contains(err.Error(), `"gpt-7_base"`) {
		t.Errorf("unknown encoding: err = %v", err)
	}
	// Invalid UTF-8 is counted, not refused.
	if n := cl.Count("a\xffb"); n < 2 {
		t.Errorf("invalid UTF-8 counted as %d", n)
	}
	est := EstimateCounter()
	if est.Exact() || est.Name() != "whitespace words" {
		t.Errorf("estimate: %s exact=%v", est.Name(), est.Exact())
	}
	for s, want := range map[string]int{"": 0, "   ": 0, "one": 1, " two  words\n": 2, "a\tb\nc d": 4} {
		if got := est.Count(s); got != want {
			t.Errorf("estimate Count(%q) = %d, want %d", s, got, want)
		}
	}
}

// sizes are the input lengths checked with the real tokenizers: every size to 40, then
// the powers of two around 4096 and their neighbours.
var sizes = []int{48, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 3000, 4095, 4096}

func init() {
	for i := 40; i >= 1; i-- {
		sizes = append([]int{i}, sizes...)
	}
}

func specs(w int) []Spec {
	return []Spec{
		{Mode: Repeat, InputTokens: w, Seed: 3},
		{Mode: Unique, InputTokens: w, Seed: 3, CaseID: "c1_in512_out128", Phase: "measured"},
		{Mode: SharedPrefix, InputTokens: w, SharedPrefixRatio: 0.75, PrefixGroups: 4, Seed: 3, CaseID: "c1", Phase: "measured"},
		{Mode: SharedPrefix, InputTokens: w, SharedPrefixRatio: 0.1, PrefixGroups: 1, Seed: 3, CaseID: "c1", Phase: "warmup"},
	}
}

// The tiktoken count of every prompt equals its target (the contract allows one token
// off), in both encodings and every mode, and so does the simulated engine's word count.
func TestSizingTiktoken(t *testing.T) {
	for _, enc := range []string{"cl100k_base", "o200k_base"} {
		tok := mustTok(t, enc)
		for _, w := range sizes {
			for _, spec := range specs(w) {
				g := mustGen(t, spec, tok)
				p := g.Prompt(w * 7)
				if n := tok.Count(p.Text); n != w {
					t.Errorf("%s %s w=%d: tiktoken counts %d: %q", enc, spec.Mode, w, n, clip(p.Text))
				}
				if n := len(strings.Fields(p.Text)); n != w {
					t.Errorf("%s %s w=%d: %d words", enc, spec.Mode, w, n)
				}
				if p.Tokens != w || !p.Exact {
					t.Errorf("%s %s w=%d: Tokens %d exact %v", enc, spec.Mode, w, p.Tokens, p.Exact)
				}
			}
		}
	}
}

// Every size from 1 to 512, every 7th to 4096, and the largest: the word count (= tiktoken count, by
// TestVocabulary and tiktoken's pre-tokenizer) is exact, with no double, leading or
// trailing spaces.
func TestSizingAllLengths(t *testing.T) {
	tok := EstimateCounter()
	check := func(w int, modes int) {
		for _, spec := range specs(w)[:modes] {
			g := mustGen(t, spec, tok)
			p := g.Prompt(w)
			// Words of letters joined by single spaces: w−1 spaces, none doubled or at an end
			// (strings.Count keeps this fast under -race; TestSizingTiktoken uses Fields).
			txt := p.Text
			if strings.Count(txt, " ") != w-1 || strings.Contains(txt, "  ") || txt[0] == ' ' || txt[len(txt)-1] == ' ' {
				t.Fatalf("%s w=%d: %d spaces in %q", spec.Mode, w, strings.Count(txt, " "), clip(txt))
			}
			if p.Tokens != w || p.Exact {
				t.Fatalf("%s w=%d: Tokens %d exact %v", spec.Mode, w, p.Tokens, p.Exact)
			}
		}
	}
	for w := 1; w <= 512; w++ {
		check(w, 4)
	}
	for w := 519; w <= 4096; w += 7 {
		check(w, 4)
	}
	check(MaxInputTokens, 2)
}

func TestDigestAndIDs(t *testing.T) {
	tok := mustTok(t, "")
	idRe := map[Mode]*regexp.Regexp{
		Repeat:       regexp.MustCompile(`^repeat$`),
		Unique:       regexp.MustCompile(`^r-[0-9a-f]{12}$`),
		SharedPrefix: regexp.MustCompile(`^g[0-3]-[0-9a-f]{12}$`),
	}
	for _, spec := range specs(300)[:3] {
		g := mustGen(t, spec, tok)
		for i := range 20 {
			p := g.Prompt(i)
			sum := sha256.Sum256([]byte(p.Text))
			if p.Digest != hex.EncodeToString(sum[:]) {
				t.Fatalf("%s: digest %s is not sha256(text)", spec.Mode, p.Digest)
			}
			if !idRe[spec.Mode].MatchString(p.ID) {
				t.Fatalf("%s: id %q", spec.Mode, p.ID)
			}
			if (p.PrefixGroup != nil) != (spec.Mode == SharedPrefix) || (p.SharedPrefixTokens != nil) != (spec.Mode == SharedPrefix) {
				t.Fatalf("%s: group %v shared %v", spec.Mode, p.PrefixGroup, p.SharedPrefixTokens)
			}
			if spec.Mode == SharedPrefix && (p.ID[1:2] != fmt.Sprint(*p.PrefixGroup) || *p.SharedPrefixTokens != 225) {
				t.Fatalf("id %s group %d shared %d", p.ID, *p.PrefixGroup, *p.SharedPrefixTokens)
			}
		}
	}
}

// Same seed → identical prompts; the generator's output is pinned so that a change to
// prompt text (which changes prompt_digest across inferprobe versions) is noticed.
func TestDeterminismGolden(t *testing.T) {
	tok := EstimateCounter()
	golden := []struct {
		spec  Spec
		index int
		text  string
		id    string
	}{
		{Spec{Mode: Repeat, InputTokens: 6, Seed: 0}, 0, goldenRepeat, "repeat"},
		{Spec{Mode: Unique, InputTokens: 12, Seed: 0, CaseID: "c1_in12_out4", Phase: "measured"}, 5, goldenUnique, goldenUniqueID},
		{Spec{Mode: SharedPrefix, InputTokens: 12, SharedPrefixRatio: 0.25, PrefixGroups: 2, Seed: 0, CaseID: "c1_in12_out4", Phase: "measured"}, 5, goldenShared, goldenSharedID},
	}
	for _, tc := range golden {
		a := mustGen(t, tc.spec, tok).Prompt(tc.index)
		b := mustGen(t, tc.spec, tok).Prompt(tc.index)
		if a.Text != b.Text || a.Digest != b.Digest || a.ID != b.ID {
			t.Fatalf("%s: two generators disagree", tc.spec.Mode)
		}
		if a.Text != tc.text || a.ID != tc.id {
			t.Errorf("%s: text %q id %q, want %q %q", tc.spec.Mode, a.Text, a.ID, tc.text, tc.id)
		}
	}
}

func TestModes(t *testing.T) {
	tok := mustTok(t, "")
	base := Spec{InputTokens: 512, Seed: 9, CaseID: "c8_in512_out128", Phase: "measured"}

	// repeat: one prompt for the case, warmup included, and for any case of that length.
	r := base
	r.Mode = Repeat
	rp := mustGen(t, r, tok).Prompt(0)
	for _, v := range []func(*Spec){
		func(s *Spec) { s.CaseID = "c1_in512_out64" },
		func(s *Spec) { s.Phase = "warmup" },
	} {
		s := r
		v(&s)
		g := mustGen(t, s, tok)
		if g.Prompt(0).Text != rp.Text || g.Prompt(41).Text != rp.Text {
			t.Error("repeat prompt differs across case/phase/index")
		}
	}
	for _, v := range []func(*Spec){func(s *Spec) { s.InputTokens = 513 }, func(s *Spec) { s.Seed = 10 }} {
		s := r
		v(&s)
		if strings.HasPrefix(mustGen(t, s, tok).Prompt(0).Text, rp.Text[:40]) {
			t.Error("repeat prompt did not change with length or seed")
		}
	}

	// unique: every request starts with its own nonce; what follows it is shared.
	u := base
	u.Mode = Unique
	g := mustGen(t, u, tok)
	nonces := map[string]int{}
	var rest string
	for i := range 2000 {
		words := strings.Fields(g.Prompt(i).Text)
		n := strings.Join(words[:NonceTokens], " ")
		if j, dup := nonces[n]; dup {
			t.Fatalf("requests %d and %d share a nonce", j, i)
		}
		nonces[n] = i
		tail := strings.Join(words[NonceTokens:], " ")
		if i > 0 && tail != rest {
			t.Fatal("filler after the nonce differs between requests")
		}
		rest = tail
	}
	for _, v := range []func(*Spec){
		func(s *Spec) { s.Seed = 10 },
		func(s *Spec) { s.CaseID = "c16_in512_out128" },
		func(s *Spec) { s.Phase = "warmup" },
	} {
		s := u
		v(&s)
		other := mustGen(t, s, tok)
		for i := range 50 {
			if firstWords(other.Prompt(i).Text, NonceTokens) == firstWords(g.Prompt(i).Text, NonceTokens) {
				t.Fatalf("%+v: request %d has the same nonce as the measured phase of the base case", s, i)
			}
		}
	}

	// shared-prefix: group prefix of round(ratio × tokens) words, then the nonce.
	s := base
	s.Mode, s.SharedPrefixRatio, s.PrefixGroups = SharedPrefix, 0.75, 4
	g = mustGen(t, s, tok)
	prefixes := map[int]string{}
	counts := make([]int, 4)
	seenNonce := map[string]bool{}
	for i := range 2000 {
		p := g.Prompt(i)
		words := strings.Fields(p.Text)
		prefix := strings.Join(words[:384], " ")
		if old, ok := prefixes[*p.PrefixGroup]; ok && old != prefix {
			t.Fatalf("group %d prefix differs between requests", *p.PrefixGroup)
		}
		prefixes[*p.PrefixGroup] = prefix
		counts[*p.PrefixGroup]++
		nonce := strings.Join(words[384:384+NonceTokens], " ")
		if seenNonce[nonce] {
			t.Fatalf("request %d repeats a nonce", i)
		}
		seenNonce[nonce] = true
	}
	for grp, c := range counts {
		if c < 400 || c > 600 { // 2000 draws over 4 groups: 500 ± ~4.5σ
			t.Errorf("group %d chosen %d times of 2000", grp, c)
		}
	}
	distinct := map[string]bool{}
	for _, p := range prefixes {
		distinct[firstWords(p, 16)] = true
	}
	if len(distinct) != 4 {
		t.Errorf("%d distinct group prefixes, want 4", len(distinct))
	}
	// The warmup's and another case's groups share no prefix with the measured ones.
	for _, v := range []func(*Spec){func(x *Spec) { x.Phase = "warmup" }, func(x *Spec) { x.CaseID = "other" }} {
		o := s
		v(&o)
		og := mustGen(t, o, tok)
		for i := range 20 {
			if distinct[firstWords(og.Prompt(i).Text, 16)] {
				t.Fatalf("%+v shares a group prefix with the measured phase", o)
			}
		}
	}
}

// Prefix length edges: at least one prefix word, at least one nonce word when there is
// room, and the ratio's rounding.
func TestSharedPrefixTokens(t *testing.T) {
	tok := EstimateCounter()
	for _, tc := range []struct {
		w     int
		ratio float64
		want  int
	}{{512, 0.75, 384}, {512, 0.5, 256}, {100, 0.125, 13}, {100, 0, 1}, {100, 1, 99}, {2, 1, 1}, {1, 0.5, 1}, {1, 1, 1}, {10, 0.95, 9}} {
		g := mustGen(t, Spec{Mode: SharedPrefix, InputTokens: tc.w, SharedPrefixRatio: tc.ratio, PrefixGroups: 0}, tok)
		p := g.Prompt(0)
		if *p.SharedPrefixTokens != tc.want || *p.PrefixGroup != 0 || len(strings.Fields(p.Text)) != tc.w {
			t.Errorf("w=%d ratio=%g: shared %d (want %d), group %d, %d words", tc.w, tc.ratio, *p.SharedPrefixTokens, tc.want, *p.PrefixGroup, len(strings.Fields(p.Text)))
		}
	}
}

// Group prefixes beyond the cache bound are rebuilt per prompt and equal the cached ones.
func TestUncachedPrefixes(t *testing.T) {
	tok := EstimateCounter()
	spec := Spec{Mode: SharedPrefix, InputTokens: 4096, SharedPrefixRatio: 0.5, PrefixGroups: 3000, Seed: 1, CaseID: "c", Phase: "measured"}
	uncached := mustGen(t, spec, tok)
	if uncached.prefixes != nil {
		t.Fatal("3000 groups × 2048 words should not be cached")
	}
	cached := mustGen(t, spec, tok)
	cached.prefixes = make([]groupPrefix, spec.PrefixGroups)
	for i := range 30 {
		a, b := uncached.Prompt(i), cached.Prompt(i)
		if a.Text != b.Text || a.Digest != b.Digest || a.ID != b.ID {
			t.Fatalf("request %d differs between cached and uncached prefixes", i)
		}
	}
}

// A tokenizer the generator cannot size by words: Tokens is its own count of the text.
type byteCounter struct{}

func (byteCounter) Name() string       { return "bytes" }
func (byteCounter) Count(s string) int { return len(s) }
func (byteCounter) Exact() bool        { return true }

func TestOtherTokenizer(t *testing.T) {
	for _, spec := range specs(64)[:3] {
		p := mustGen(t, spec, byteCounter{}).Prompt(3)
		if p.Tokens != len(p.Text) || !p.Exact {
			t.Errorf("%s: Tokens %d for %d bytes", spec.Mode, p.Tokens, len(p.Text))
		}
	}
}

func TestConcurrentPrompts(t *testing.T) {
	tok := mustTok(t, "")
	for _, spec := range specs(256)[:3] {
		g := mustGen(t, spec, tok)
		want := make([]Prompt, 64)
		for i := range want {
			want[i] = mustGen(t, spec, tok).Prompt(i)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 64 {
					i := (k*5 + w) % 64
					if p := g.Prompt(i); p.Text != want[i].Text || p.Digest != want[i].Digest {
						errs <- fmt.Sprintf("%s: request %d differs under concurrency", spec.Mode, i)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

func TestNewGeneratorErrors(t *testing.T) {
	tok := EstimateCounter()
	for _, tc := range []struct {
		spec Spec
		tok  Tokenizer
		want string
	}{
		{Spec{Mode: Repeat, InputTokens: 8}, nil, "needs a tokenizer"},
		{Spec{Mode: "random", InputTokens: 8}, tok, "prompt mode must be"},
		{Spec{InputTokens: 8}, tok, "prompt mode must be"},
		{Spec{Mode: Unique}, tok, "input tokens must be within"},
		{Spec{Mode: Unique, InputTokens: MaxInputTokens + 1}, tok, "input tokens must be within"},
		{Spec{Mode: SharedPrefix, InputTokens: 8, SharedPrefixRatio: 1.5}, tok, "ratio must be within 0..1"},
		{Spec{Mode: SharedPrefix, InputTokens: 8, SharedPrefixRatio: -0.1}, tok, "ratio must be within 0..1"},
		{Spec{Mode: SharedPrefix, InputTokens: 8, SharedPrefixRatio: nan()}, tok, "ratio must be within 0..1"},
		{Spec{Mode: SharedPrefix, InputTokens: 8, SharedPrefixRatio: 0.5, PrefixGroups: -1}, tok, "prefix groups must be within"},
		{Spec{Mode: SharedPrefix, InputTokens: 8, SharedPrefixRatio: 0.5, PrefixGroups: MaxPrefixGroups + 1}, tok, "prefix groups must be within"},
		{Spec{Mode: Unique, InputTokens: 8, SharedPrefixRatio: 0.5}, tok, "applies to shared-prefix prompts only"},
		{Spec{Mode: Repeat, InputTokens: 8, PrefixGroups: 2}, tok, "apply to shared-prefix prompts only"},
	} {
		if _, err := NewGenerator(tc.spec, tc.tok); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.spec, err, tc.want)
		}
	}
	// The CLI's defaults for non-shared modes (groups 1) are accepted.
	if _, err := NewGenerator(Spec{Mode: Unique, InputTokens: 8, PrefixGroups: 1}, tok); err != nil {
		t.Error(err)
	}
}

func TestPhaseDigest(t *testing.T) {
	if PhaseDigest(nil) != "" {
		t.Error("empty phase digest should be empty")
	}
	// sha256("a\nb\nc") and sha256("x") from Python's hashlib.
	if got := PhaseDigest([]string{"a", "b", "c"}); got != "ea7fb08b7a2dc4619ffb7c7bb38d95a2047935fa165d71b12efd3852a2e6d0cc" {
		t.Errorf("PhaseDigest(a,b,c) = %s", got)
	}
	if got := PhaseDigest([]string{"x"}); got != "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" {
		t.Errorf("PhaseDigest(x) = %s", got)
	}
	if PhaseDigest([]string{"a", "b"}) == PhaseDigest([]string{"b", "a"}) {
		t.Error("order must matter")
	}

	g := mustGen(t, Spec{Mode: Unique, InputTokens: 32, Seed: 1, CaseID: "c", Phase: "measured"}, EstimateCounter())
	var digests []string
	for i := range 500 {
		digests = append(digests, g.Prompt(i).Digest)
	}
	want := PhaseDigest(digests)
	d := NewPhaseDigester()
	if s, err := d.Sum(); s != "" || err != nil {
		t.Fatalf("empty digester: %q %v", s, err)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(500)
	for k, i := range order {
		if err := d.Add(i, digests[i]); err != nil {
			t.Fatal(err)
		}
		if k == 250 {
			if _, err := d.Sum(); err == nil && d.Len() < 251 {
				t.Fatal("Sum with a gap should fail")
			}
		}
	}
	got, err := d.Sum()
	if err != nil || got != want || d.Len() != 500 {
		t.Fatalf("digester %s (%v, len %d), want %s", got, err, d.Len(), want)
	}
	if err := d.Add(3, digests[3]); err == nil {
		t.Error("adding an index twice should fail")
	}
	if err := d.Add(-1, "x"); err == nil {
		t.Error("a negative index should fail")
	}
	if err := d.Add(500, "x"); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Sum(); got != PhaseDigest(append(slices.Clone(digests), "x")) {
		t.Error("Sum did not allow more digests after it")
	}
	d2 := NewPhaseDigester()
	d2.Add(1, "b")
	if err := d2.Add(1, "b"); err == nil {
		t.Error("adding a pending index twice should fail")
	}
	if _, err := d2.Sum(); err == nil || !strings.Contains(err.Error(), "missing for request index 0") {
		t.Errorf("gap: err = %v", err)
	}
}

// The tokenizer works offline: neither this package nor its dependencies import a network
// package, so counting cannot download anything.
func TestNoNetworkDependency(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || strings.HasPrefix(dep, "net/") || strings.HasPrefix(dep, "crypto/tls") {
			t.Errorf("prompt depends on %s", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/tiktoken-go/tokenizer/codec") {
		t.Error("go list did not list the tokenizer: the check is not looking at the right package")
	}
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func nan() float64 { var z float64; return z / z }

// Golden prompts (EstimateCounter; the text does not depend on the tokenizer).
const (
	goldenRepeat   = "issues six cent rest conditions email"
	goldenUnique   = "drop period black option matter receive something near must characters updated error"
	goldenUniqueID = "r-f7a8b89190c6"
	goldenShared   = "world final sum drop period black option matter receive something near must"
	goldenSharedID = "g0-f7a8b89190c6"
)

// FuzzGenerator: any spec either fails validation or yields prompts of exactly the target
// length (in words, the cl100k_base token count by construction) with a matching digest.
func FuzzGenerator(f *testing.F) {
	f.Add(uint8(0), 16, 0.0, 0, int64(0), "c1_in16_out8", "measured", 0)
	f.Add(uint8(1), 33, 0.0, 1, int64(-5), "x", "warmup", 1<<40)
	f.Add(uint8(2), 100, 0.75, 4, int64(9), "case", "measured", 3)
	f.Add(uint8(2), 1, 1.0, 1000, int64(1), "", "", -7)
	tok := EstimateCounter()
	f.Fuzz(func(t *testing.T, mode uint8, w int, ratio float64, groups int, seed int64, caseID, phase string, index int) {
		if w > 5000 {
			w %= 5000
		}
		modes := []Mode{Repeat, Unique, SharedPrefix, "bogus"}
		spec := Spec{Mode: modes[int(mode)%len(modes)], InputTokens: w, SharedPrefixRatio: ratio, PrefixGroups: groups, Seed: seed, CaseID: caseID, Phase: phase}
		g, err := NewGenerator(spec, tok)
		if err != nil {
			return
		}
		p := g.Prompt(index)
		txt := p.Text
		if p.Tokens != w || strings.Count(txt, " ") != w-1 || strings.Contains(txt, "  ") || txt[0] == ' ' || txt[len(txt)-1] == ' ' {
			t.Fatalf("%+v index %d: %d tokens, %d spaces", spec, index, p.Tokens, strings.Count(txt, " "))
		}
		sum := sha256.Sum256([]byte(txt))
		if p.Digest != hex.EncodeToString(sum[:]) {
			t.Fatal("digest mismatch")
		}
		if spec.Mode == SharedPrefix && (*p.PrefixGroup < 0 || *p.PrefixGroup >= max(groups, 1) || *p.SharedPrefixTokens < 1 || *p.SharedPrefixTokens > w) {
			t.Fatalf("group %d of %d, shared %d of %d", *p.PrefixGroup, groups, *p.SharedPrefixTokens, w)
		}
	})
}
