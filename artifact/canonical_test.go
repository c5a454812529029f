package artifact

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// The expected texts and digests below were produced by CPython 3's
// json.dumps(sort_keys=True, separators=(",", ":")) after turning integral
// floats into ints — Stormlog's recipe for its SLO and workload digests.
const (
	pySLOCanonical = `{"attainment_target":null,"criteria":[{"boundary":"client","max_ms":500,"metric":"ttft"}],"format":"stormlog.infer.slo","interval":{"kind":"measured_window"},"name":"cli","population":"offered","unknown_policy":"bounds","version":1}`
	pySLODigest500 = "cf9c963cd41e61828593dd6b923b48b8676ff13525d1dc55480dbaf71003bb03"
	pySLODigest501 = "69c0faa69710998cb92846ff46920fb5cf94f973c10bc33a8db5a894c9640c0b"
	pyTrickyText   = `{"Z":12345678901234567890,"a":{"b":true,"c":null,"d":-3},"z":[1.5,0.1,1e-05,0.00012,100000000000000000000,0,2.5e-300,123456.789,1000000000000000.5],"\u00e9":"snow \u2603 \ud834\udd1e \u007f \u0001 \n\t\"\\ </>&"}`
	pyTrickyDigest = "c77798ee0b2263ca2b0454a33d68fbe65f8354aaa4de9466c56d18f9539cde07"
)

func sloDoc(maxMS any) map[string]any {
	return map[string]any{
		"format":            "stormlog.infer.slo",
		"version":           1,
		"name":              "cli",
		"criteria":          []any{map[string]any{"metric": "ttft", "boundary": "client", "max_ms": maxMS}},
		"attainment_target": nil,
		"population":        "offered",
		"unknown_policy":    "bounds",
		"interval":          map[string]any{"kind": "measured_window"},
	}
}

func TestCanonicalMatchesPythonRecipe(t *testing.T) {
	got, err := Canonical(sloDoc(500.0))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != pySLOCanonical {
		t.Fatalf("canonical text\n got %s\nwant %s", got, pySLOCanonical)
	}
	tricky := json.RawMessage(`{"z":[1.5, 0.1, 1e-05, 0.00012, 1e20, -0.0, 2.5e-300, 123456.789, 1000000000000000.5],
		"é":"snow ☃ 𝄞 \u007f \u0001 \n\t\"\\ </>&", "a":{"d":-3,"c":null,"b":true}, "Z": 12345678901234567890}`)
	got, err = Canonical(tricky)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != pyTrickyText {
		t.Fatalf("canonical text\n got %s\nwant %s", got, pyTrickyText)
	}
	d, err := Digest(tricky)
	if err != nil {
		t.Fatal(err)
	}
	if d != pyTrickyDigest {
		t.Fatalf("digest %s, want %s", d, pyTrickyDigest)
	}
}

// An integral float digests as the integer: 500, 500.0 and a raw 500.000 give one digest,
// 501 another.
func TestDigestIntegralFloatsEqualIntegers(t *testing.T) {
	d500, err := Digest(sloDoc(500))
	if err != nil {
		t.Fatal(err)
	}
	d500f, err := Digest(sloDoc(500.0))
	if err != nil {
		t.Fatal(err)
	}
	dRaw, err := Digest(json.RawMessage(`{"version":1,"name":"cli","format":"stormlog.infer.slo","population":"offered","unknown_policy":"bounds","interval":{"kind":"measured_window"},"attainment_target":null,"criteria":[{"max_ms":500.000,"boundary":"client","metric":"ttft"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d501, err := Digest(sloDoc(501))
	if err != nil {
		t.Fatal(err)
	}
	if d500 != pySLODigest500 || d500f != pySLODigest500 || dRaw != pySLODigest500 {
		t.Fatalf("500 digests %s %s %s, want all %s", d500, d500f, dRaw, pySLODigest500)
	}
	if d501 != pySLODigest501 {
		t.Fatalf("501 digest %s, want %s", d501, pySLODigest501)
	}
	if len(d500) != 64 {
		t.Fatalf("digest %q is not 64 hex digits", d500)
	}
}

func TestCanonicalNumbers(t *testing.T) {
	cases := map[string]string{
		`500`:                    `500`,
		`500.0`:                  `500`,
		`5e2`:                    `500`,
		`-0`:                     `0`,
		`-0.0`:                   `0`,
		`0.5`:                    `0.5`,
		`1e-7`:                   `1e-07`,
		`0.0001`:                 `0.0001`,
		`-2.5e-5`:                `-2.5e-05`,
		`1e23`:                   `99999999999999991611392`, // the float64's exact value, as Python's int()
		`9007199254740993`:       `9007199254740993`,        // kept exactly, not rounded through float64
		`9007199254740993.0`:     `9007199254740992`,        // a float literal is a float64
		`1e-400`:                 `0`,                       // underflows to 0.0 as in Python
		`123456789012345678901`:  `123456789012345678901`,
		`-123456789.25`:          `-123456789.25`,
		`[1.0,2.50,{"k":3.000}]`: `[1,2.5,{"k":3}]`,
	}
	for in, want := range cases {
		got, err := Canonical(json.RawMessage(in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", in, err)
			continue
		}
		if string(got) != want {
			t.Errorf("Canonical(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestCanonicalRefusesNonFinite(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": []any{math.Inf(-1)}}, json.RawMessage(`{"x":1e400}`)} {
		if _, err := Canonical(v); !errors.Is(err, ErrNonFinite) {
			t.Errorf("Canonical(%v) error %v, want ErrNonFinite", v, err)
		}
	}
	if _, err := Canonical(json.RawMessage(`{"a":1} {"b":2}`)); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := Canonical(json.RawMessage(`{"a":`)); err == nil {
		t.Error("broken JSON accepted")
	}
	// A Float's non-finite value is a string in the artifact and stays one.
	got, err := Canonical(map[string]Float{"v": Float(math.NaN())})
	if err != nil || string(got) != `{"v":"NaN"}` {
		t.Fatalf("Canonical(Float NaN) = %s, %v", got, err)
	}
}

func TestCanonicalStructUsesJSONNames(t *testing.T) {
	type s struct {
		B float64 `json:"b"`
		A string  `json:"a"`
	}
	got, err := Canonical(s{B: 2, A: "x"})
	if err != nil || string(got) != `{"a":"x","b":2}` {
		t.Fatalf("Canonical(struct) = %s, %v", got, err)
	}
}
