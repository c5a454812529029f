package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

func rejectUnknown(m map[string]any, label string, allowed ...string) error {
	var unknown []string
	for k := range m {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			unknown = append(unknown, strconvQuoteSafe(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("%s has unknown fields: %s", label, strings.Join(unknown, ", "))
}

// strictFields decodes the document into structs with DisallowUnknownFields as a second,
// independent guard against unknown fields (the exact, case-sensitive key check above is the
// one that names them).
func strictFields(data []byte) error {
	type interval struct {
		Kind    any `json:"kind"`
		Seconds any `json:"seconds"`
	}
	type criterion struct {
		Metric           any `json:"metric"`
		Boundary         any `json:"boundary"`
		MaxMs            any `json:"max_ms"`
		AttainmentTarget any `json:"attainment_target"`
	}
	type doc struct {
		Format           any             `json:"format"`
		Version          any             `json:"version"`
		Name             any             `json:"name"`
		Criteria         json.RawMessage `json:"criteria"`
		AttainmentTarget any             `json:"attainment_target"`
		Population       any             `json:"population"`
		UnknownPolicy    any             `json:"unknown_policy"`
		Interval         json.RawMessage `json:"interval"`
	}
	strict := func(raw []byte, v any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	var d doc
	if err := strict(data, &d); err != nil {
		return fieldError("the policy", err)
	}
	var list []json.RawMessage
	if len(d.Criteria) > 0 && json.Unmarshal(d.Criteria, &list) == nil {
		for i, raw := range list {
			var c criterion
			if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
				if err := strict(raw, &c); err != nil {
					return fieldError(fmt.Sprintf("criteria[%d]", i), err)
				}
			}
		}
	}
	if bytes.HasPrefix(bytes.TrimSpace(d.Interval), []byte("{")) {
		var iv interval
		if err := strict(d.Interval, &iv); err != nil {
			return fieldError("interval", err)
		}
	}
	return nil
}

func fieldError(label string, err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "unknown field "); i >= 0 {
		return fmt.Errorf("%s has unknown fields: %s", label, strings.Trim(msg[i+len("unknown field "):], `"`))
	}
	return nil // type mismatches are reported by the exact checks
}

// jsonFrame is one open object or array while checkDuplicateKeys walks a document.
type jsonFrame struct {
	object    bool
	keys      map[string]bool
	expectKey bool
}

// checkDuplicateKeys walks the JSON tokens and refuses an object that names a key twice:
// which one a reader keeps is not defined, so such a policy is ambiguous.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*jsonFrame
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
			top := stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("key %s appears twice in one object", strconvQuoteSafe(k))
			}
			top.keys[k] = true
			top.expectKey = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &jsonFrame{object: true, keys: map[string]bool{}, expectKey: true})
		case '[':
			stack = append(stack, &jsonFrame{})
		case ']', '}':
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}
