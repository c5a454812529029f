package dashboards

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// PromQL keywords that are not metric names: binary set operators, vector-matching and
// aggregation modifiers, the offset/@ modifiers and float literals.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// labelListKeywords are followed by a parenthesised label list, not an expression.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// maxExprLen bounds the lexer's input (every expression here is far shorter).
const maxExprLen = 64 << 10

// metricNames lists, in order of appearance, the metric names a PromQL expression selects: bare
// identifiers that are not functions, aggregations, keywords or label lists, plus
// {__name__="…"} matchers. Label matchers, strings, ranges/subqueries, numbers, durations and
// Grafana variables ($x, ${x}, [[x]]) are skipped. It is a lexer, not a parser: it rejects
// unbalanced brackets and unterminated strings with an error, and accepts some invalid PromQL
// (promtool checks syntax).
func metricNames(expr string) ([]string, error) {
	if len(expr) > maxExprLen {
		return nil, fmt.Errorf("expression of %d bytes exceeds %d", len(expr), maxExprLen)
	}
	var names []string
	i, n, parens := 0, len(expr), 0
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
			j++
		}
		return j
	}
	// skipString returns the index after the closing quote of the string starting at j.
	skipString := func(j int) (int, error) {
		q := expr[j]
		for k := j + 1; k < n; k++ {
			switch {
			case expr[k] == '\\' && q != '`':
				k++
			case expr[k] == q:
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at offset %d", j)
	}
	// skipGroup returns the index after the bracket closing the one at j, skipping strings; in
	// a {…} group it records the value of a __name__="…" matcher.
	skipGroup := func(j int) (int, error) {
		open, close := expr[j], map[byte]byte{'(': ')', '{': '}', '[': ']'}[expr[j]]
		depth := 0
		for k := j; k < n; k++ {
			switch c := expr[k]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(k)
				if err != nil {
					return 0, err
				}
				k = end - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					if open == '{' {
						ns, err := nameMatchers(expr[j+1 : k])
						if err != nil {
							return 0, err
						}
						names = append(names, ns...)
					}
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %q at offset %d", open, j)
	}
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '(':
			parens++
			i++
		case c == ')':
			if parens == 0 {
				return nil, fmt.Errorf("unbalanced %q at offset %d", c, i)
			}
			parens--
			i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at offset %d", c, i)
		case c == '$':
			// Grafana variable: $name or ${name[:format]}.
			i++
			if i < n && expr[i] == '{' {
				end, err := skipGroup(i)
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < n && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// Number or duration (1, 0.99, 1e3, 0x1f, 5m, 1h30m).
			for i < n && (isIdent(expr[i], false) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < n && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			lower := strings.ToLower(word)
			switch {
			case labelListKeywords[lower] && k < n && expr[k] == '(':
				end, err := skipGroup(k)
				if err != nil {
					return nil, err
				}
				j = end
			case promqlKeywords[lower]:
			case k < n && expr[k] == '(':
				// Function call or aggregation: its arguments are lexed as expressions.
			case isAggregation(lower) && k < n && (strings.HasPrefix(expr[k:], "by") || strings.HasPrefix(expr[k:], "without")):
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	if parens != 0 {
		return nil, fmt.Errorf("%d unclosed '('", parens)
	}
	return names, nil
}

// nameMatchers parses a selector's label-matcher list (label op "string", …) and returns the
// values of its __name__ matchers. A malformed list is an error.
func nameMatchers(body string) ([]string, error) {
	var out []string
	i, n := 0, len(body)
	space := func() {
		for i < n && strings.IndexByte(" \t\r\n", body[i]) >= 0 {
			i++
		}
	}
	for {
		space()
		if i == n {
			return out, nil
		}
		j := i
		for j < n && isIdent(body[j], j == i) && body[j] != ':' {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("label matcher expected at %q", body[i:])
		}
		label := body[i:j]
		i = j
		space()
		op := ""
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(body[i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, fmt.Errorf("matcher operator expected after %s", label)
		}
		i += len(op)
		space()
		if i == n || strings.IndexByte("\"'`", body[i]) < 0 {
			return nil, fmt.Errorf("quoted value expected after %s%s", label, op)
		}
		q, k := body[i], i+1
		for k < n && body[k] != q {
			if body[k] == '\\' && q != '`' {
				k++
			}
			k++
		}
		if k >= n {
			return nil, fmt.Errorf("unterminated value of %s", label)
		}
		if label == "__name__" {
			out = append(out, body[i+1:k])
		}
		i = k + 1
		space()
		if i < n {
			if body[i] != ',' {
				return nil, fmt.Errorf("',' expected after the %s matcher", label)
			}
			i++
		}
	}
}

func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func isAggregation(w string) bool {
	return slices.Contains([]string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
		"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}, w)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(http_requests_total{job="a", code=~"5.."}[5m])`, []string{"http_requests_total"}},
		{`sum by (le, probe) (rate(inferprobe_ttft_seconds_bucket{target=~"$target"}[$__rate_interval]))`,
			[]string{"inferprobe_ttft_seconds_bucket"}},
		{`histogram_quantile(0.99, sum(rate(vllm:time_to_first_token_seconds_bucket{model_name=~"${model:regex}"}[5m])) by (le))`,
			[]string{"vllm:time_to_first_token_seconds_bucket"}},
		{`a > on (target, model) group_left (slo) (14.4 * b) and ignoring (x) c or d unless e`,
			[]string{"a", "b", "c", "d", "e"}},
		{`DCGM_FI_DEV_FB_USED * 1048576 + 1e3 - 0x1f offset 5m`, []string{"DCGM_FI_DEV_FB_USED"}},
		{`time() - (x > 0) > bool 3 * y`, []string{"x", "y"}},
		{`{__name__="foo", job="and or"} + bar{label="unless(" }`, []string{"foo", "bar"}},
		{`max without (instance) (m1) / count(m2)`, []string{"m1", "m2"}},
		{`label_replace(m3, "dst", "$1", "src", "(.*)")`, []string{"m3"}},
		{`m4[1h:5m] @ start()`, []string{"m4"}},
		{`sum(rate(m5[5m])) by (le) / sum(rate(m6[5m])) without (x)`, []string{"m5", "m6"}},
		{`m7 or Inf or NaN`, []string{"m7"}},
		{`m8{a="x,__name__=\"y\"", b!~'z',} or {__name__=~"m9"}`, []string{"m8", "m9"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil {
			t.Errorf("metricNames(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`rate(x[5m]`, `x{a="b"`, `x{a="b}`, `sum(x))`, `x]`, `"open`,
		`{__name__(000""}`, `x{a}`, `x{a=b}`, `x{a="b" c="d"}`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q): no error for malformed input", bad)
		}
	}
	if _, err := metricNames(strings.Repeat("x", maxExprLen+1)); err == nil {
		t.Error("metricNames: no error for oversized input")
	}
}

func FuzzMetricNames(f *testing.F) {
	for _, s := range []string{
		`sum by (le) (rate(a_bucket{x=~"$y"}[$__rate_interval]))`,
		`a > on (b) group_left () (1 * c) and d`,
		`{__name__="x"}`, `"\"`, `${a`, `[[`, `1e+`, `` + "`" + ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := metricNames(s)
		if err != nil {
			return
		}
		again, _ := metricNames(s)
		if !slices.Equal(names, again) {
			t.Fatalf("metricNames(%q) not deterministic: %q then %q", s, names, again)
		}
		if strings.Contains(s, "__name__") {
			return // __name__ values are arbitrary strings
		}
		for _, n := range names {
			if n == "" || !isIdent(n[0], true) || strings.ContainsFunc(n, func(r rune) bool { return r > 127 || !isIdent(byte(r), false) }) {
				t.Fatalf("metricNames(%q) returned %q, not an identifier", s, n)
			}
		}
	})
}
