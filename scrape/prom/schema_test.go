package prom

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// A small validator for the subset of JSON Schema 2020-12 that
// inference_vllm_v1.schema.json uses (type, const, enum, required,
// properties, additionalProperties, items, prefixItems, min/maxItems, oneOf,
// $ref, minimum, minLength, pattern), so records are checked against the
// contract's own schema file.
type schemaValidator struct{ defs map[string]any }

func (v *schemaValidator) check(s map[string]any, x any, path string) error {
	if ref, ok := s["$ref"].(string); ok {
		return v.check(v.defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any), x, path)
	}
	if one, ok := s["oneOf"].([]any); ok {
		n := 0
		var errs []string
		for _, alt := range one {
			if err := v.check(alt.(map[string]any), x, path); err == nil {
				n++
			} else {
				errs = append(errs, err.Error())
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %d of %d oneOf alternatives match (%s)", path, n, len(one), strings.Join(errs, "; "))
		}
	}
	if t, ok := s["type"]; ok {
		types := []any{t}
		if list, ok := t.([]any); ok {
			types = list
		}
		match := false
		for _, tt := range types {
			match = match || typeMatches(tt.(string), x)
		}
		if !match {
			return fmt.Errorf("%s: %v is not of type %v", path, x, t)
		}
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(x) {
		return fmt.Errorf("%s: %v is not %v", path, x, c)
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, c := range e {
			found = found || c == x
		}
		if !found {
			return fmt.Errorf("%s: %v not in %v", path, x, e)
		}
	}
	if min, ok := s["minimum"].(float64); ok {
		if n, isNum := x.(json.Number); isNum {
			if f, _ := n.Float64(); f < min {
				return fmt.Errorf("%s: %v < %v", path, x, min)
			}
		}
	}
	if str, ok := x.(string); ok {
		if ml, ok := s["minLength"].(float64); ok && len([]rune(str)) < int(ml) {
			return fmt.Errorf("%s: %q shorter than %v", path, str, ml)
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
	}
	if obj, ok := x.(map[string]any); ok {
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if _, ok := obj[k.(string)]; !ok {
					return fmt.Errorf("%s: lacks %s", path, k)
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, val := range obj {
			if ps, ok := props[k]; ok {
				if err := v.check(ps.(map[string]any), val, path+"."+k); err != nil {
					return err
				}
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: unexpected property %q", path, k)
				}
			case map[string]any:
				if err := v.check(ap, val, path+"."+k); err != nil {
					return err
				}
			}
		}
	}
	if arr, ok := x.([]any); ok {
		if m, ok := s["minItems"].(float64); ok && len(arr) < int(m) {
			return fmt.Errorf("%s: fewer than %v items", path, m)
		}
		if m, ok := s["maxItems"].(float64); ok && len(arr) > int(m) {
			return fmt.Errorf("%s: more than %v items", path, m)
		}
		prefix, _ := s["prefixItems"].([]any)
		for i, item := range arr {
			if i < len(prefix) {
				if err := v.check(prefix[i].(map[string]any), item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			} else if is, ok := s["items"].(map[string]any); ok {
				if err := v.check(is, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func typeMatches(t string, x any) bool {
	switch t {
	case "null":
		return x == nil
	case "object":
		_, ok := x.(map[string]any)
		return ok
	case "array":
		_, ok := x.([]any)
		return ok
	case "string":
		_, ok := x.(string)
		return ok
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "number":
		_, ok := x.(json.Number)
		return ok
	case "integer":
		n, ok := x.(json.Number)
		if !ok || strings.ContainsAny(n.String(), ".eE") {
			return false
		}
		f, _ := n.Float64()
		return f == math.Trunc(f)
	}
	return false
}

func loadSchema(t *testing.T) *schemaValidator {
	raw, err := os.ReadFile(filepath.Join(fixtureDir, "stormlog/schemas/inference_vllm_v1.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return &schemaValidator{defs: s["$defs"].(map[string]any)}
}

func validateLine(t *testing.T, v *schemaValidator, rec artifact.MetricsScrape) error {
	t.Helper()
	line, err := artifact.MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		t.Fatal(err)
	}
	return v.check(v.defs["scrape"].(map[string]any), x, "record")
}

// Every kind of record the scraper writes conforms to the infer.vllm_scrape
// v1 JSON schema.
func TestRecordsMatchTheSchema(t *testing.T) {
	v := loadSchema(t)
	srv := newMetricsServer(t, textBody(preText+"nan_gauge NaN\n"))
	s := newScraper(t, Config{URL: srv.URL + "/metrics", Interval: 250 * time.Millisecond})
	bad := newMetricsServer(t, textBody("<html></html>"))
	sBad := newScraper(t, Config{URL: bad.URL + "/metrics"})
	recs := []artifact.MetricsScrape{
		s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c1", "measured"),
		s.Scrape(context.Background(), artifact.ScrapeMarkerManual, "", ""),
		sBad.Scrape(context.Background(), artifact.ScrapeMarkerPhaseEnd, "c1", "warmup"),
		failedScrape(artifact.ScrapeMarkerInterval, 5),
	}
	for i, r := range recs {
		if err := validateLine(t, v, r); err != nil {
			t.Errorf("record %d (%s %s): %v", i, r.Marker, r.Status, err)
		}
	}
	// The validator does reject what the schema forbids.
	broken := recs[0]
	broken.IntervalMS = 0
	if err := validateLine(t, v, broken); err == nil {
		t.Error("interval_ms 0 passed the schema")
	}
	broken = recs[0]
	broken.Marker = "later"
	if err := validateLine(t, v, broken); err == nil {
		t.Error("an unknown marker passed the schema")
	}
}
