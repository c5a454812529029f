package prom

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// quirk is one exposition variant. want maps "family{a="b",…}" (labels in
// name order) to the value, and histogram or summary parts to
// "family{…}[le]", "family{…}.sum" and "family{…}.count"; kinds maps a family
// to its type; an empty want means the body must be refused as unparseable.
type quirk struct {
	name  string
	body  string
	want  map[string]float64
	kinds map[string]string
}

// quirks are the whitespace, line and value forms of the Prometheus text
// format. Each row's verdict is the one the Prometheus server's scraper
// gives (its text lexer skips every run of spaces and tabs between tokens,
// also after the value and after the timestamp, and accepts a last line
// without a newline; it refuses a carriage return).
var quirks = []quirk{
	{name: "trailing space after the value", body: "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3 \n",
		want: map[string]float64{`vllm:num_requests_running{engine="0",model_name="m"}`: 3}},
	{name: "trailing tab after the value", body: "a 3\t\n", want: map[string]float64{"a{}": 3}},
	{name: "trailing spaces and tabs", body: "a 4 \t \t\nb 5\n", want: map[string]float64{"a{}": 4, "b{}": 5}},
	{name: "tab before the value", body: "a\t3\n", want: map[string]float64{"a{}": 3}},
	{name: "tab after the labels", body: "a{l=\"x\"}\t3\n", want: map[string]float64{`a{l="x"}`: 3}},
	{name: "tabs everywhere", body: "a\t{l=\"x\"}\t3\t1700000000000\t\n", want: map[string]float64{`a{l="x"}`: 3}},
	{name: "whitespace after the timestamp", body: "a 3 1700000000000 \nb 4 1700000000001\t \n",
		want: map[string]float64{"a{}": 3, "b{}": 4}},
	{name: "two spaces before the timestamp", body: "a 3  1700000000000\n", want: map[string]float64{"a{}": 3}},
	{name: "histogram lines with trailing whitespace",
		body: "# TYPE h histogram\nh_bucket{le=\"1\"} 1 \nh_bucket{le=\"+Inf\"} 2\t\nh_sum 3.5 \nh_count 2 1700000000000 \n",
		want: map[string]float64{"h{}[1.0]": 1, "h{}[+Inf]": 2, "h{}.sum": 3.5, "h{}.count": 2}, kinds: map[string]string{"h": "histogram"}},
	{name: "summary lines with trailing whitespace",
		body: "# TYPE s summary\ns{quantile=\"0.5\"} 0.25 \ns_sum 7\t\ns_count 3 \n",
		want: map[string]float64{"s{}[0.5]": 0.25, "s{}.sum": 7, "s{}.count": 3}, kinds: map[string]string{"s": "summary"}},
	{name: "leading whitespace", body: "  a 1\n\tb 2\n", want: map[string]float64{"a{}": 1, "b{}": 2}},
	{name: "blank lines", body: "\na 1\n\n\nb 2\n\n", want: map[string]float64{"a{}": 1, "b{}": 2}},
	{name: "whitespace-only lines", body: "  \na 1\n\t\n", want: map[string]float64{"a{}": 1}},
	{name: "no newline after the last line", body: "a 1\nb 2", want: map[string]float64{"a{}": 1, "b{}": 2}},
	{name: "no newline after trailing whitespace", body: "a 7 \t", want: map[string]float64{"a{}": 7}},
	{name: "CRLF line endings", body: "a 3\r\n"},
	{name: "CRLF after a timestamp", body: "a 3 1700000000000\r\n"},
	{name: "extra spaces in TYPE", body: "#  TYPE   a gauge\na 1 \n", want: map[string]float64{"a{}": 1}, kinds: map[string]string{"a": "gauge"}},
	{name: "tabs in TYPE", body: "#\tTYPE\ta\tgauge\na 1\n", want: map[string]float64{"a{}": 1}, kinds: map[string]string{"a": "gauge"}},
	{name: "comments with odd spacing",
		body: "#\n#   a comment\t\n   # an indented comment\n# HELP a  two  spaces \na 1\n",
		want: map[string]float64{"a{}": 1}, kinds: map[string]string{"a": "untyped"}},
	{name: "# EOF", body: "a 1\n# EOF\n", want: map[string]float64{"a{}": 1}},
	{name: "missing HELP and TYPE", body: "vllm:x_total{engine=\"0\"} 12\n",
		want: map[string]float64{`vllm:x_total{engine="0"}`: 12}, kinds: map[string]string{"vllm:x_total": "untyped"}},
	{name: "non-finite values", body: "a NaN\nb +Inf \nc -Inf\t\nd Inf\ne inf\nf nan\n",
		want: map[string]float64{"a{}": math.NaN(), "b{}": math.Inf(1), "c{}": math.Inf(-1), "d{}": math.Inf(1), "e{}": math.Inf(1), "f{}": math.NaN()}},
	{name: "exponent values", body: "a 1e3\nb 1.5E-3 \nc -2e+2\nd .5\ne 5.\nf 6.634254336e+09 1700000000000 \n",
		want: map[string]float64{"a{}": 1000, "b{}": 0.0015, "c{}": -200, "d{}": 0.5, "e{}": 5, "f{}": 6.634254336e+09}},
	{name: "hexadecimal value", body: "a 0x10\n"},
	{name: "underscore in a value", body: "a 1_000\n"},
	{name: "fractional timestamp", body: "a 1 1.5\n"},
	{name: "two timestamps", body: "a 1 1 1\n"},
	{name: "no value", body: "a \n"},
	{name: "escaped label values", body: "a{l=\"q\\\"b\\\\s\\nn\"} 1 \n", want: map[string]float64{"a{l=\"q\\\"b\\\\s\\nn\"}": 1}},
	{name: "label value ending in spaces", body: "a{l=\"x  \"} 1 \n", want: map[string]float64{`a{l="x  "}`: 1}},
	{name: "trailing comma and spaces in labels", body: "a{ l = \"x\" , m=\"y\", } 1\n", want: map[string]float64{`a{l="x",m="y"}`: 1}},
	{name: "empty label set", body: "a{} 1 \n", want: map[string]float64{"a{}": 1}},
	{name: "quoted UTF-8 name", body: "{\"a.b\"} 1 \n", want: map[string]float64{"a.b{}": 1}},
}

func TestParseExpositionQuirks(t *testing.T) {
	for _, q := range quirks {
		t.Run(q.name, func(t *testing.T) {
			c, err := Parse([]byte(q.body), Limits{})
			if len(q.want) == 0 {
				if !errors.Is(err, ErrUnparseable) {
					t.Fatalf("%q: error %v, want unparseable response", q.body, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", q.body, err)
			}
			got := flatten(c)
			if len(got) != len(q.want) {
				t.Errorf("%q: %d values %v, want %d", q.body, len(got), got, len(q.want))
			}
			for k, w := range q.want {
				g, ok := got[k]
				if !ok || !(g == w || math.IsNaN(g) && math.IsNaN(w)) {
					t.Errorf("%q: %s = %v (present %v), want %v", q.body, k, g, ok, w)
				}
			}
			for fam, kind := range q.kinds {
				if c.Families[fam] != kind {
					t.Errorf("%q: %s is %q, want %q", q.body, fam, c.Families[fam], kind)
				}
			}
		})
	}
}

// HELP text is kept as written, its trailing whitespace included.
func TestParseKeepsHelpText(t *testing.T) {
	c, err := Parse([]byte("# HELP a  two  spaces \t\n# TYPE a gauge\na 1 \n"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Helps["a"]; h != "two  spaces \t" {
		t.Errorf("help %q", h)
	}
}

// The normalised body keeps every byte of a sample line up to its last
// token, so values and timestamps reach the parser as written, and keeps the
// line count, so parse errors name the body's own line numbers.
func TestNormaliseLines(t *testing.T) {
	for in, want := range map[string]string{
		"a 3 1700000000000 \n":            "a 3 1700000000000\n",
		"a{l=\"x \"}\t3\t\n# HELP a b \n": "a{l=\"x \"}\t3\n# HELP a b \n",
		"  \n\ta 1.5e+09 \t":              "\n\ta 1.5e+09\n",
		"a 1\r \n":                        "a 1\r\n",
	} {
		if got := string(normalise([]byte(in))); got != want {
			t.Errorf("normalise(%q) = %q, want %q", in, got, want)
		}
	}
	same := []byte("# TYPE a gauge\na 1\n")
	if got := normalise(same); &got[0] != &same[0] {
		t.Error("a body without trailing whitespace was copied")
	}
	_, err := Parse([]byte("a 1 \nb 2 \nc x \n"), Limits{})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %v, want one naming line 3", err)
	}
}

// flatten lists a compact scrape's values under the keys quirk.want uses.
func flatten(c *artifact.ScrapeSeries) map[string]float64 {
	out := map[string]float64{}
	for fam, byID := range c.Values {
		for id, v := range byID {
			key := fam + labelKey(c.LabelSets[id])
			if v.Dist == nil {
				out[key] = float64(v.Sample)
				continue
			}
			for _, b := range v.Dist.Buckets {
				out[key+"["+b.LE+"]"] = float64(b.Count)
			}
			if v.Dist.Sum != nil {
				out[key+".sum"] = float64(*v.Dist.Sum)
			}
			if v.Dist.Count != nil {
				out[key+".count"] = float64(*v.Dist.Count)
			}
		}
	}
	return out
}

// labelKey writes labels as {a="b",…} in name order, values escaped as in
// the exposition.
func labelKey(labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n + `="` + esc.Replace(labels[n]) + `"`)
	}
	b.WriteByte('}')
	return b.String()
}
