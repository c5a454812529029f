package analyze

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

const validPolicy = `{
  "format": "stormlog.infer.slo",
  "version": 1,
  "name": "chat_interactive",
  "criteria": [
    {"metric": "ttft", "boundary": "client", "max_ms": 500},
    {"metric": "tpot", "boundary": "client", "max_ms": 50, "attainment_target": 0.99}
  ],
  "attainment_target": 0.98,
  "population": "offered",
  "unknown_policy": "bounds",
  "interval": {"kind": "measured_window"}
}`

func mustPolicy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

// A document round-trips; 500 and 500.0 digest alike, 501 does not.
func TestPolicyRoundTripAndDigest(t *testing.T) {
	p := mustPolicy(t, validPolicy)
	if p.Name != "chat_interactive" || len(p.Criteria) != 2 || p.Criteria[1].Key() != "client.tpot" ||
		*p.Criteria[1].AttainmentTarget != 0.99 || *p.AttainmentTarget != 0.98 || p.Interval.Kind != IntervalMeasuredWindow {
		t.Fatalf("parsed %+v", p)
	}
	doc, err := json.Marshal(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	again := mustPolicy(t, string(doc))
	if !reflect.DeepEqual(p, again) {
		t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, again)
	}
	if p.Digest() != again.Digest() || len(p.Digest()) != 64 {
		t.Fatalf("digest %q vs %q", p.Digest(), again.Digest())
	}
	floaty := mustPolicy(t, strings.Replace(validPolicy, `"max_ms": 500}`, `"max_ms": 500.0}`, 1))
	if floaty.Digest() != p.Digest() {
		t.Error("500 and 500.0 digest differently")
	}
	other := mustPolicy(t, strings.Replace(validPolicy, `"max_ms": 500}`, `"max_ms": 501}`, 1))
	if other.Digest() == p.Digest() {
		t.Error("500 and 501 digest alike")
	}
	// Defaults fill in: a document without population, unknown_policy and interval is the same
	// policy as one spelling them out.
	minimal := mustPolicy(t, `{"format":"stormlog.infer.slo","version":1,"name":"chat_interactive",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":500},
		{"metric":"tpot","boundary":"client","max_ms":50,"attainment_target":0.99}],"attainment_target":0.98}`)
	if minimal.Digest() != p.Digest() {
		t.Error("defaults change the digest")
	}
}

// The digest is SHA-256 of the canonical text; check the text itself.
func TestPolicyCanonicalText(t *testing.T) {
	p, err := ParseSLOFlags([]string{"ttft:500", "server.queue:12.5"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := artifact.Canonical(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"attainment_target":null,"criteria":[{"boundary":"client","max_ms":500,"metric":"ttft"},{"boundary":"server","max_ms":12.5,"metric":"queue"}],"format":"stormlog.infer.slo","interval":{"kind":"measured_window"},"name":"cli","population":"offered","unknown_policy":"bounds","version":1}`
	if string(b) != want {
		t.Fatalf("canonical text\n got %s\nwant %s", b, want)
	}
}

// Invalid documents.
func TestPolicyInvalidDocuments(t *testing.T) {
	base := func(replace ...string) string {
		return strings.NewReplacer(replace...).Replace(validPolicy)
	}
	cases := map[string]struct {
		doc  string
		want string
	}{
		"bad format":            {base(`"stormlog.infer.slo"`, `"stormlog.infer.slx"`), "format must be"},
		"version 2":             {base(`"version": 1`, `"version": 2`), "version must be"},
		"version true":          {base(`"version": 1`, `"version": true`), "version must be"},
		"version 1.0":           {base(`"version": 1`, `"version": 1.0`), "version must be"},
		"version string":        {base(`"version": 1`, `"version": "1"`), "version must be"},
		"uppercase name":        {base(`"chat_interactive"`, `"Chat"`), "name must"},
		"65-char name":          {base(`"chat_interactive"`, `"a`+strings.Repeat("b", 64)+`"`), "name must"},
		"digit first":           {base(`"chat_interactive"`, `"1chat"`), "name must"},
		"name not string":       {base(`"chat_interactive"`, `7`), "name must"},
		"empty criteria":        {`{"format":"stormlog.infer.slo","version":1,"name":"a","criteria":[]}`, "at least one criterion"},
		"criteria not a list":   {`{"format":"stormlog.infer.slo","version":1,"name":"a","criteria":{"metric":"ttft"}}`, "criteria must be a list"},
		"criteria missing":      {`{"format":"stormlog.infer.slo","version":1,"name":"a"}`, "criteria must be a list"},
		"population":            {base(`"offered"`, `"successful"`), "population must be"},
		"unknown_policy":        {base(`"bounds"`, `"optimistic"`), "unknown_policy must be"},
		"target 0":              {base(`"attainment_target": 0.98`, `"attainment_target": 0`), "attainment_target must be"},
		"target 1.5":            {base(`"attainment_target": 0.98`, `"attainment_target": 1.5`), "attainment_target must be"},
		"target bool":           {base(`"attainment_target": 0.98`, `"attainment_target": true`), "attainment_target must be"},
		"criterion target 0":    {base(`"attainment_target": 0.99`, `"attainment_target": 0`), "criteria[1].attainment_target must be"},
		"extra field":           {base(`"population"`, `"extra": 1, "population"`), "unknown fields: extra"},
		"extra field case":      {base(`"population"`, `"Name": "x", "population"`), "unknown fields: Name"},
		"sliding no seconds":    {base(`{"kind": "measured_window"}`, `{"kind": "sliding"}`), "sliding interval needs seconds"},
		"sliding zero seconds":  {base(`{"kind": "measured_window"}`, `{"kind": "sliding", "seconds": 0}`), "sliding interval needs seconds"},
		"window with seconds":   {base(`{"kind": "measured_window"}`, `{"kind": "measured_window", "seconds": 60}`), "takes no seconds"},
		"unknown interval kind": {base(`{"kind": "measured_window"}`, `{"kind": "tumbling"}`), "interval.kind must be"},
		"interval extra":        {base(`{"kind": "measured_window"}`, `{"kind": "measured_window", "step": 1}`), "interval has unknown fields: step"},
		"interval not object":   {base(`{"kind": "measured_window"}`, `"measured_window"`), "interval must be an object"},
		"not an object":         {`[1]`, "must be a JSON object"},
		"not json":              {`{"format":`, "not valid JSON"},
		"trailing data":         {validPolicy + `{}`, "not valid JSON"},
		"duplicate key":         {base(`"version": 1`, `"version": 1, "version": 1`), "appears twice"},
		"huge":                  {`{"format":"` + strings.Repeat("x", MaxPolicyBytes) + `"}`, "larger than"},
	}
	for name, c := range cases {
		_, err := ParsePolicy([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want it to mention %q", name, err, c.want)
		}
	}
	// A sliding window with seconds is valid, and recorded.
	p := mustPolicy(t, base(`{"kind": "measured_window"}`, `{"kind": "sliding", "seconds": 60}`))
	if p.Interval.Kind != IntervalSliding || *p.Interval.Seconds != 60 || p.Document()["interval"].(map[string]any)["seconds"] != 60.0 {
		t.Errorf("sliding interval = %+v", p.Interval)
	}
}

// Invalid criteria.
func TestPolicyInvalidCriteria(t *testing.T) {
	doc := func(criterion string) string {
		return `{"format":"stormlog.infer.slo","version":1,"name":"a","criteria":[` + criterion + `]}`
	}
	cases := map[string]struct {
		criterion string
		want      string
	}{
		"client.itl":       {`{"metric":"itl","boundary":"client","max_ms":50}`, "chunks are not tokens"},
		"unknown boundary": {`{"metric":"ttft","boundary":"proxy","max_ms":50}`, "unknown criterion proxy.ttft"},
		"unknown metric":   {`{"metric":"ttfb","boundary":"server","max_ms":50}`, "unknown criterion server.ttfb"},
		"max_ms 0":         {`{"metric":"ttft","boundary":"client","max_ms":0}`, "criteria[0].max_ms must be > 0 milliseconds, not 0"},
		"max_ms negative":  {`{"metric":"ttft","boundary":"client","max_ms":-5}`, "criteria[0].max_ms must be > 0 milliseconds, not -5"},
		"max_ms string":    {`{"metric":"ttft","boundary":"client","max_ms":"50"}`, "max_ms must be a positive number"},
		"max_ms true":      {`{"metric":"ttft","boundary":"client","max_ms":true}`, "max_ms must be a positive number"},
		"max_ms inf":       {`{"metric":"ttft","boundary":"client","max_ms":1e999}`, "criteria[0].max_ms 1e999 is out of range (float64 holds at most ±1.8e+308)"},
		"max_ms null":      {`{"metric":"ttft","boundary":"client","max_ms":null}`, "max_ms must be a positive number"},
		"max_ms missing":   {`{"metric":"ttft","boundary":"client"}`, "max_ms must be a positive number"},
		"extra key":        {`{"metric":"ttft","boundary":"client","max_ms":50,"p":99}`, "criteria[0] has unknown fields: p"},
		"missing boundary": {`{"metric":"ttft","max_ms":50}`, "needs a boundary and a metric"},
		"not an object":    {`"ttft:50"`, "criteria[0] must be an object"},
		"repeated key":     {`{"metric":"ttft","boundary":"client","max_ms":50},{"metric":"ttft","boundary":"client","max_ms":60}`, "client.ttft is given more than once"},
	}
	for name, c := range cases {
		_, err := ParsePolicy([]byte(doc(c.criterion)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want it to mention %q", name, err, c.want)
		}
	}
	// The same key at two boundaries is two criteria.
	if _, err := ParsePolicy([]byte(doc(`{"metric":"ttft","boundary":"client","max_ms":50},{"metric":"ttft","boundary":"server","max_ms":60}`))); err != nil {
		t.Errorf("client.ttft + server.ttft refused: %v", err)
	}
}

// --slo flags.
func TestParseSLOFlags(t *testing.T) {
	p, err := ParseSLOFlags([]string{"ttft:500", "server.ttft:400", "e2e_from_intended:2500.5", "server.itl:50"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != FlagPolicyName || p.AttainmentTarget != nil || p.Interval.Kind != IntervalMeasuredWindow {
		t.Fatalf("policy %+v", p)
	}
	wantKeys := []string{"client.ttft", "server.ttft", "client.e2e_from_intended", "server.itl"}
	for i, c := range p.Criteria {
		if c.Key() != wantKeys[i] || c.AttainmentTarget != nil {
			t.Errorf("criterion %d = %+v", i, c)
		}
	}
	if p.Criteria[2].MaxMs != 2500.5 {
		t.Errorf("max_ms = %v", p.Criteria[2].MaxMs)
	}
	bad := map[string][]string{
		"no colon":        {"ttft"},
		"empty key":       {":500"},
		"not a number":    {"ttft:fast"},
		"negative":        {"ttft:-1"},
		"zero":            {"ttft:0"},
		"inf":             {"ttft:inf"},
		"nan":             {"ttft:NaN"},
		"overflow":        {"ttft:1e999"},
		"empty limit":     {"ttft:"},
		"client itl":      {"itl:50"},
		"unknown server":  {"server.ttfb:50"},
		"unknown client":  {"client.queue:50"},
		"repeated":        {"ttft:500", "client.ttft:400"},
		"empty list":      {},
		"two colons":      {"ttft:500:600"},
		"hex":             {"ttft:0x10"},
		"spaces":          {"ttft: 500"},
		"dotted boundary": {"server.e2e.x:5"},
	}
	for name, items := range bad {
		if _, err := ParseSLOFlags(items); err == nil {
			t.Errorf("%s: %q accepted", name, items)
		}
	}
	_, err = ParseSLOFlags([]string{"itl:50"})
	if err == nil || !strings.Contains(err.Error(), "chunks are not tokens") {
		t.Errorf("client.itl error = %v", err)
	}
	// The last colon splits: a key may not contain one, but the error names the value.
	if _, err := ParseSLOFlags([]string{"ttft:500:600"}); err == nil || !strings.Contains(err.Error(), "ttft:500:600") {
		t.Errorf("two colons error = %v", err)
	}
}

func TestParsePolicyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "slo.json")
	if err := os.WriteFile(path, []byte(validPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicyFile(path)
	if err != nil || p.Name != "chat_interactive" {
		t.Fatalf("ParsePolicyFile = %+v, %v", p, err)
	}
	if _, err := ParsePolicyFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file error = %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"format":"x"}`), 0o600)
	if _, err := ParsePolicyFile(bad); err == nil || !strings.Contains(err.Error(), "bad.json: format must be") {
		t.Errorf("bad file error = %v", err)
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(validPolicy))
	f.Add([]byte(`{"format":"stormlog.infer.slo","version":1,"name":"a","criteria":[{"metric":"ttft","boundary":"client","max_ms":1e-300}],"interval":{"kind":"sliding","seconds":0.5}}`))
	f.Add([]byte(`{"a":{"a":[{"b":1},{"b":2}]},"a":3}`))
	f.Add([]byte(`[[[[]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			if p != nil {
				t.Fatal("policy returned with an error")
			}
			return
		}
		// A valid policy re-parses from its own document to the same digest.
		doc, err := json.Marshal(p.Document())
		if err != nil {
			t.Fatalf("document does not marshal: %v", err)
		}
		again, err := ParsePolicy(doc)
		if err != nil {
			t.Fatalf("own document refused: %v\n%s", err, doc)
		}
		if again.Digest() != p.Digest() {
			t.Fatalf("digest changed across a round trip")
		}
	})
}

func FuzzParseSLOFlags(f *testing.F) {
	f.Add("ttft:500\nserver.ttft:400")
	f.Add("itl:50")
	f.Add(":")
	f.Add("client.e2e_from_intended:1e3")
	f.Fuzz(func(t *testing.T, joined string) {
		items := strings.Split(joined, "\n")
		p, err := ParseSLOFlags(items)
		if err != nil {
			return
		}
		if len(p.Criteria) != len(items) {
			t.Fatalf("%d criteria from %d flags", len(p.Criteria), len(items))
		}
		for _, c := range p.Criteria {
			if !(c.MaxMs > 0) || c.Key() == "client.itl" {
				t.Fatalf("accepted %+v", c)
			}
		}
		doc, _ := json.Marshal(p.Document())
		if _, err := ParsePolicy(doc); err != nil {
			t.Fatalf("flag policy's document refused: %v", err)
		}
	})
}

// TestParseSLOFlagsLimitMessages: a limit that overflows float64 is out of range (not "not
// positive"); one that is not > 0 says so with the value, word for word.
func TestParseSLOFlagsLimitMessages(t *testing.T) {
	for _, tc := range []struct{ item, want string }{
		{"ttft:1e400", `--slo "ttft:1e400": 1e400 is out of range (float64 holds at most ±1.8e+308)`},
		{"server.queue:1e999", `--slo "server.queue:1e999": 1e999 is out of range (float64 holds at most ±1.8e+308)`},
		{"ttft:0", `--slo "ttft:0": the limit must be > 0 milliseconds, not 0`},
		{"ttft:0e5", `--slo "ttft:0e5": the limit must be > 0 milliseconds, not 0`},
		{"ttft:-1", `--slo "ttft:-1": the limit must be > 0 milliseconds, not -1`},
		{"e2e:-2.5", `--slo "e2e:-2.5": the limit must be > 0 milliseconds, not -2.5`},
		{"ttft:--1", `--slo "ttft:--1": "--1" is not a number of milliseconds`},
		{"ttft:fast", `--slo "ttft:fast": "fast" is not a number of milliseconds`},
		{"ttft:100:200", `--slo "ttft:100:200": expected one KEY:MS, such as ttft:500 (one criterion per --slo: repeat the flag)`},
	} {
		_, err := ParseSLOFlags([]string{tc.item})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.item, err, tc.want)
		}
	}
}
