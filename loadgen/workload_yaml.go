package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inferprobe/inferprobe/artifact"
)

// KeyError is a workload mapping entry that cannot be used. Key is the key as written
// (profile's flag name without dashes; "" for the mapping itself), Line its line in the
// YAML document.
type KeyError struct {
	Key  string
	Line int
	Msg  string
}

func (e *KeyError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s (line %d)", e.Msg, e.Line)
	}
	return fmt.Sprintf("%s: %s (line %d)", e.Key, e.Msg, e.Line)
}

// workloadKeys are a workload mapping's keys (profile's flag names) and the fields they set.
var workloadKeys = map[string]func(w *Workload) any{
	"timeout":             func(w *Workload) any { return &w.Timeout },
	"drain-timeout":       func(w *Workload) any { return &w.DrainTimeout },
	"stream":              func(w *Workload) any { return &w.Stream },
	"no-stream":           func(w *Workload) any { return &w.NoStream },
	"stream-usage":        func(w *Workload) any { return &w.StreamUsage },
	"no-stream-usage":     func(w *Workload) any { return &w.NoStreamUsage },
	"max-tokens-field":    func(w *Workload) any { return &w.MaxTokensField },
	"extra-body":          func(w *Workload) any { return &w.ExtraBody },
	"seed":                func(w *Workload) any { return &w.Seed },
	"concurrency":         func(w *Workload) any { return &w.Concurrency },
	"input-tokens":        func(w *Workload) any { return &w.InputTokens },
	"output-tokens":       func(w *Workload) any { return &w.OutputTokens },
	"requests":            func(w *Workload) any { return &w.Requests },
	"duration":            func(w *Workload) any { return &w.Duration },
	"warmup-requests":     func(w *Workload) any { return &w.WarmupRequests },
	"arrival":             func(w *Workload) any { return &w.Arrival },
	"rate":                func(w *Workload) any { return &w.Rates },
	"burst-size":          func(w *Workload) any { return &w.BurstSize },
	"burst-interval":      func(w *Workload) any { return &w.BurstInterval },
	"arrival-trace":       func(w *Workload) any { return &w.ArrivalTrace },
	"arrival-trace-case":  func(w *Workload) any { return &w.ArrivalTraceCase },
	"max-in-flight":       func(w *Workload) any { return &w.MaxInFlight },
	"overflow":            func(w *Workload) any { return &w.Overflow },
	"prompt-mode":         func(w *Workload) any { return &w.PromptMode },
	"shared-prefix-ratio": func(w *Workload) any { return &w.SharedPrefixRatio },
	"prefix-groups":       func(w *Workload) any { return &w.PrefixGroups },
	"cache-state":         func(w *Workload) any { return &w.CacheState },
	"cache-reset-url":     func(w *Workload) any { return &w.CacheResetURL },
	"cache-reset-timeout": func(w *Workload) any { return &w.CacheResetTimeout },
	"tokenizer":           func(w *Workload) any { return &w.Tokenizer },
	"tiktoken-encoding":   func(w *Workload) any { return &w.TiktokenEncoding },
	"strict-token-counts": func(w *Workload) any { return &w.StrictTokenCounts },
}

// UnmarshalYAML sets w from a probe's workload mapping. Each key is one of profile's
// workload flags without its dashes and sets that flag's field; keys not given keep w's
// values. A value is what the flag takes, written as a scalar (numbers, strings, booleans;
// a number may be quoted) or a list of scalars, which a list flag (input-tokens, rate, …)
// reads item by item — an item may itself be a comma-separated string, as the flag's value
// is — and any other flag reads joined with commas. Seconds are numbers; extra-body is a
// mapping or a JSON string. A null workload sets nothing. Every error is a *KeyError.
func (w *Workload) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &KeyError{Line: n.Line, Msg: "want a mapping of profile flags (e.g. requests: 10), not " + nodeKind(n)}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return &KeyError{Line: k.Line, Msg: "want a flag name as the key (e.g. input-tokens), not " + nodeKind(k)}
		}
		if first, ok := seen[k.Value]; ok {
			return &KeyError{Key: k.Value, Line: k.Line, Msg: fmt.Sprintf("is given twice (first on line %d)", first)}
		}
		seen[k.Value] = k.Line
		field, ok := workloadKeys[k.Value]
		if !ok {
			return &KeyError{Key: k.Value, Line: k.Line, Msg: fmt.Sprintf("unknown key %q", k.Value)}
		}
		val, err := readValue(v, k.Value == "extra-body")
		if err == nil {
			err = val.setField(field(w))
		}
		if err != nil {
			e := err.(*KeyError)
			e.Key = k.Value
			return e
		}
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

// yamlValue is a workload value as text: one item for a scalar, one per list entry.
type yamlValue struct{ items []yamlItem }

type yamlItem struct {
	text string
	line int
}

func valueErr(line int, format string, args ...any) error {
	return &KeyError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// readValue reads a value's scalars as text, the way YAML types them (2.50 is "2.5", 0x10
// is "16", true is "true"); a mapping is taken only as JSON (extra-body).
func readValue(n *yaml.Node, jsonMapping bool) (yamlValue, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		if !jsonMapping {
			return yamlValue{}, valueErr(n.Line, "want a number, a string, a boolean or a list of them, not a mapping")
		}
		var m any
		if err := n.Decode(&m); err != nil {
			return yamlValue{}, valueErr(n.Line, "the mapping cannot be written as JSON: %v", err)
		}
		if _, ok := m.(map[string]any); !ok {
			return yamlValue{}, valueErr(n.Line, "want a number, a string, a boolean or a list of them (quote dates and other values)")
		}
		b, err := json.Marshal(m)
		if err != nil {
			return yamlValue{}, valueErr(n.Line, "the mapping cannot be written as JSON: %v", err)
		}
		return yamlValue{items: []yamlItem{{string(b), n.Line}}}, nil
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return yamlValue{}, valueErr(n.Line, "an empty list")
		}
		var v yamlValue
		for _, e := range n.Content {
			s, err := scalarText(e)
			if err != nil {
				return yamlValue{}, err
			}
			v.items = append(v.items, yamlItem{s, e.Line})
		}
		return v, nil
	}
	s, err := scalarText(n)
	return yamlValue{items: []yamlItem{{s, n.Line}}}, err
}

// scalarText is a scalar's text as YAML types it.
func scalarText(n *yaml.Node) (string, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return "", valueErr(n.Line, "want a number, a string or a boolean, not %q", n.Value)
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case nil:
		return "", valueErr(n.Line, "a value is required")
	case []any:
		return "", valueErr(n.Line, "want a number, a string or a boolean here, not a list inside a list")
	}
	return "", valueErr(n.Line, "want a number, a string, a boolean or a list of them (quote dates and other values)")
}

// joined is the value as one flag value: a list's items joined with commas.
func (v yamlValue) joined() (string, int) {
	parts := make([]string, len(v.items))
	for i, it := range v.items {
		parts[i] = it.text
	}
	return strings.Join(parts, ","), v.items[0].line
}

// setField parses the value into the field dst points to (see workloadKeys), as profile's
// flag of that type parses its value.
func (v yamlValue) setField(dst any) error {
	s, line := v.joined()
	switch p := dst.(type) {
	case *string:
		*p = s
	case **string:
		*p = &s
	case *bool, **bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return valueErr(line, "want true or false, not %q", s)
		}
		setOr(dst, b)
	case *int, **int, **int64:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return valueErr(line, "want a whole number, not %q", s)
		}
		if q, ok := dst.(**int64); ok {
			*q = &n
		} else {
			setOr(dst, int(n))
		}
	case *float64, **float64:
		f, err := parseNumber(s, line)
		if err != nil {
			return err
		}
		setOr(dst, f)
	case *[]int:
		return v.eachPart(func(part string, line int) error {
			n, err := strconv.Atoi(part)
			if err != nil {
				return valueErr(line, "want a whole number, not %q", part)
			}
			*p = append(*p, n)
			return nil
		}, func() { *p = []int{} })
	case *[]float64:
		return v.eachPart(func(part string, line int) error {
			f, err := parseNumber(part, line)
			if err != nil {
				return err
			}
			*p = append(*p, f)
			return nil
		}, func() { *p = []float64{} })
	default:
		panic(fmt.Sprintf("loadgen: workload field of type %T", dst))
	}
	return nil
}

// parseNumber reads a number value (artifact.ParseNumber): text that is not one is
// "want a number, not "fast"", one beyond float64 "1e400 is out of range (…)".
func parseNumber(s string, line int) (float64, error) {
	f, err := artifact.ParseNumber(s)
	switch {
	case errors.Is(err, artifact.ErrOutOfRange):
		return 0, valueErr(line, "%v", err)
	case err != nil:
		return 0, valueErr(line, "want a number, not %q", s)
	}
	return f, nil
}

// setOr sets *dst (a *T) or allocates **dst (a **T) to x.
func setOr[T any](dst any, x T) {
	switch p := dst.(type) {
	case *T:
		*p = x
	case **T:
		*p = &x
	}
}

// eachPart calls parse for every comma-separated part of every item, after reset.
func (v yamlValue) eachPart(parse func(part string, line int) error, reset func()) error {
	reset()
	for _, it := range v.items {
		for _, part := range strings.Split(it.text, ",") {
			if err := parse(part, it.line); err != nil {
				return err
			}
		}
	}
	return nil
}
