package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ParsePolicyFile reads and validates a policy document file (--slo-file). Errors name the
// file and the first rule broken; the CLI maps them to exit 5 (invalid input). Files larger
// than MaxPolicyBytes are refused.
func ParsePolicyFile(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("SLO policy %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("SLO policy %s: %w", path, err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("SLO policy %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy validates a stormlog.infer.slo v1 document:
//   - one JSON object, at most MaxPolicyBytes, no duplicate keys, nothing after it;
//   - only the fields format, version, name, criteria, attainment_target, population,
//     unknown_policy and interval (exact, case-sensitive names; likewise inside criteria and
//     interval) — anything else is refused so a later version is never read as version 1;
//   - format "stormlog.infer.slo"; version the integer 1 (not true, not 1.0);
//   - name matching ^[a-z][a-z0-9_]{0,63}$;
//   - criteria a non-empty list of {metric, boundary, max_ms, attainment_target?} with a known
//     key (client.itl is refused: chunks are not tokens), each key at most once, max_ms a
//     finite number > 0 (not a string or bool);
//   - attainment targets numbers in (0, 1] or null; population "offered" and unknown_policy
//     "bounds" when present;
//   - interval {"kind":"measured_window"} (no seconds) or {"kind":"sliding","seconds":>0}.
//
// The error names the first rule the document breaks.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("the policy is larger than %d bytes", MaxPolicyBytes)
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, fmt.Errorf("not valid JSON (%v)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("not valid JSON (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON (data after the policy object)")
	}
	doc, ok := tree.(map[string]any)
	if !ok {
		return nil, errors.New("the policy must be a JSON object")
	}
	if err := strictFields(data); err != nil {
		return nil, err
	}
	if err := rejectUnknown(doc, "the policy", "format", "version", "name", "criteria", "attainment_target", "population", "unknown_policy", "interval"); err != nil {
		return nil, err
	}
	if s, ok := doc["format"].(string); !ok || s != PolicyFormat {
		return nil, fmt.Errorf("format must be %q", PolicyFormat)
	}
	if n, ok := doc["version"].(json.Number); !ok || string(n) != strconv.Itoa(PolicyVersion) {
		return nil, fmt.Errorf("version must be the integer %d", PolicyVersion)
	}
	if v, present := doc["population"]; present {
		if s, ok := v.(string); !ok || s != PopulationOffered {
			return nil, fmt.Errorf("population must be %q in version 1", PopulationOffered)
		}
	}
	if v, present := doc["unknown_policy"]; present {
		if s, ok := v.(string); !ok || s != UnknownPolicyBound {
			return nil, fmt.Errorf("unknown_policy must be %q in version 1", UnknownPolicyBound)
		}
	}
	list, ok := doc["criteria"].([]any)
	if !ok {
		return nil, errors.New("criteria must be a list")
	}
	criteria := make([]Criterion, 0, len(list))
	for i, item := range list {
		c, err := criterionFromDocument(item, i)
		if err != nil {
			return nil, err
		}
		criteria = append(criteria, c)
	}
	target, err := targetValue(doc["attainment_target"], "attainment_target")
	if err != nil {
		return nil, err
	}
	interval := PolicyInterval{Kind: IntervalMeasuredWindow}
	if v, present := doc["interval"]; present {
		if interval, err = intervalFromDocument(v); err != nil {
			return nil, err
		}
	}
	return newPolicy(doc["name"], criteria, target, interval)
}

// ParseSLOFlags builds the "cli" policy from --slo KEY:MS values such as "ttft:500" or
// "server.ttft:400": each value splits on its last colon; a key without a
// dot is a client criterion; MS is a decimal number of milliseconds, finite and > 0. Flag
// policies have no targets and judge the measured window. Errors (the CLI maps them to exit
// 2, usage): no values, a value that is not one KEY:MS (ttft:100:200 is two limits), an
// unknown criterion, client.itl (chunks
// are not tokens), a repeated key, or a limit that is not a number, beyond float64's range
// ("1e400 is out of range") or not > 0.
func ParseSLOFlags(items []string) (*Policy, error) {
	if len(items) == 0 {
		return nil, errors.New("--slo: give at least one KEY:MS criterion, such as ttft:500")
	}
	criteria := make([]Criterion, 0, len(items))
	for _, item := range items {
		c, err := criterionFromFlag(item)
		if err != nil {
			return nil, err
		}
		criteria = append(criteria, c)
	}
	p, err := newPolicy(FlagPolicyName, criteria, nil, PolicyInterval{Kind: IntervalMeasuredWindow})
	if err != nil {
		return nil, fmt.Errorf("--slo: %w", err)
	}
	return p, nil
}

var decimalPattern = regexp.MustCompile(`^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

func criterionFromFlag(item string) (Criterion, error) {
	if len(item) > maxFlagLength {
		return Criterion{}, fmt.Errorf("--slo: a value longer than %d characters", maxFlagLength)
	}
	i := strings.LastIndexByte(item, ':')
	if i <= 0 {
		return Criterion{}, fmt.Errorf("--slo %q: expected KEY:MS, such as ttft:500", item)
	}
	key, raw := item[:i], item[i+1:]
	if strings.ContainsRune(key, ':') {
		return Criterion{}, fmt.Errorf("--slo %q: expected one KEY:MS, such as ttft:500 (one criterion per --slo: repeat the flag)", item)
	}
	boundary, metric, dotted := strings.Cut(key, ".")
	if !dotted {
		boundary, metric = BoundaryClient, key
	}
	if neg, ok := strings.CutPrefix(raw, "-"); ok && decimalPattern.MatchString(neg) {
		return Criterion{}, fmt.Errorf("--slo %q: the limit must be > 0 milliseconds, not %s", item, raw)
	}
	if !decimalPattern.MatchString(raw) {
		return Criterion{}, fmt.Errorf("--slo %q: %q is not a number of milliseconds", item, raw)
	}
	limit, err := artifact.ParseNumber(raw)
	if err == nil {
		if err = limitRange.Check(limit); err != nil {
			err = fmt.Errorf("the limit %w", err)
		}
	}
	if err != nil {
		return Criterion{}, fmt.Errorf("--slo %q: %w", item, err)
	}
	if err := knownCriterion(boundary, metric); err != nil {
		return Criterion{}, fmt.Errorf("--slo %q: %w", item, err)
	}
	return Criterion{Metric: metric, Boundary: boundary, MaxMs: limit}, nil
}

// ErrClientITL explains why client.itl is refused.
var ErrClientITL = errors.New("client.itl does not exist: streamed chunks are not tokens, so chunk gaps are not inter-token latency. Use client.tpot for a per-token mean, or server.itl for vLLM's own")

func knownCriterion(boundary, metric string) error {
	key := boundary + "." + metric
	if _, ok := criterionDef(key); ok {
		return nil
	}
	if key == BoundaryClient+".itl" {
		return ErrClientITL
	}
	return fmt.Errorf("unknown criterion %s; known: %s", strconvQuoteSafe(key), knownKeys())
}

// strconvQuoteSafe quotes a key for an error message only when it needs it.
func strconvQuoteSafe(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

func criterionFromDocument(item any, index int) (Criterion, error) {
	label := fmt.Sprintf("criteria[%d]", index)
	m, ok := item.(map[string]any)
	if !ok {
		return Criterion{}, fmt.Errorf("%s must be an object", label)
	}
	if err := rejectUnknown(m, label, "metric", "boundary", "max_ms", "attainment_target"); err != nil {
		return Criterion{}, err
	}
	boundary, ok1 := m["boundary"].(string)
	metric, ok2 := m["metric"].(string)
	if !ok1 || !ok2 {
		return Criterion{}, fmt.Errorf("%s needs a boundary and a metric", label)
	}
	if err := knownCriterion(boundary, metric); err != nil {
		return Criterion{}, fmt.Errorf("%s: %w", label, err)
	}
	limit, err := limitValue(m["max_ms"], label+".max_ms")
	if err != nil {
		return Criterion{}, err
	}
	target, err := targetValue(m["attainment_target"], label+".attainment_target")
	if err != nil {
		return Criterion{}, err
	}
	return Criterion{Metric: metric, Boundary: boundary, MaxMs: limit, AttainmentTarget: target}, nil
}

func intervalFromDocument(v any) (PolicyInterval, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return PolicyInterval{}, errors.New("interval must be an object")
	}
	if err := rejectUnknown(m, "interval", "kind", "seconds"); err != nil {
		return PolicyInterval{}, err
	}
	kind, _ := m["kind"].(string)
	seconds, hasSeconds := m["seconds"]
	switch kind {
	case IntervalMeasuredWindow:
		if hasSeconds && seconds != nil {
			return PolicyInterval{}, errors.New("a measured_window interval takes no seconds")
		}
		return PolicyInterval{Kind: IntervalMeasuredWindow}, nil
	case IntervalSliding:
		s, ok := finiteNumber(seconds)
		if !ok || s <= 0 {
			return PolicyInterval{}, errors.New("a sliding interval needs seconds > 0")
		}
		return PolicyInterval{Kind: IntervalSliding, Seconds: &s}, nil
	}
	return PolicyInterval{}, fmt.Errorf("interval.kind must be %q or %q", IntervalMeasuredWindow, IntervalSliding)
}

func newPolicy(name any, criteria []Criterion, target *float64, interval PolicyInterval) (*Policy, error) {
	s, ok := name.(string)
	if !ok || !namePattern.MatchString(s) {
		return nil, errors.New("name must start with a lowercase letter and use only lowercase letters, digits and underscores, at most 64 characters")
	}
	if len(criteria) == 0 {
		return nil, errors.New("a policy needs at least one criterion")
	}
	seen := map[string]int{}
	var repeated []string
	for _, c := range criteria {
		seen[c.Key()]++
		if seen[c.Key()] == 2 {
			repeated = append(repeated, c.Key())
		}
	}
	if len(repeated) > 0 {
		sort.Strings(repeated)
		return nil, fmt.Errorf("criterion %s is given more than once", strings.Join(repeated, ", "))
	}
	return &Policy{
		Name:             s,
		Criteria:         criteria,
		AttainmentTarget: target,
		Population:       PopulationOffered,
		UnknownPolicy:    UnknownPolicyBound,
		Interval:         interval,
	}, nil
}

// limitRange is the rule of a criterion's limit (max_ms, an --slo KEY:MS): above 0 ms.
var limitRange = artifact.Range{Min: 0, MinExclusive: true, Max: math.MaxFloat64, Unit: "milliseconds"}

// limitValue reads a policy document's max_ms (label names it): a JSON number within
// float64's range (1e999 "is out of range") and limitRange.
func limitValue(v any, label string) (float64, error) {
	if n, ok := v.(json.Number); ok {
		if _, err := artifact.ParseNumber(string(n)); errors.Is(err, artifact.ErrOutOfRange) {
			return 0, fmt.Errorf("%s %w", label, err)
		}
	}
	f, ok := finiteNumber(v)
	if !ok {
		return 0, fmt.Errorf("%s must be a positive number of milliseconds", label)
	}
	if err := limitRange.Check(f); err != nil {
		return 0, fmt.Errorf("%s %w", label, err)
	}
	return f, nil
}

// finiteNumber accepts a number (json.Number, float64, or the int64 of an OTLP intValue span
// attribute) with a finite value; strings, booleans and null are not numbers.
func finiteNumber(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case int:
		f = float64(x)
	case json.Number:
		var err error
		f, err = strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, false
		}
	case float64:
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func targetValue(v any, label string) (*float64, error) {
	if v == nil {
		return nil, nil
	}
	f, ok := finiteNumber(v)
	if !ok || !(f > 0 && f <= 1) {
		return nil, fmt.Errorf("%s must be a fraction above 0 and at most 1", label)
	}
	return &f, nil
}
