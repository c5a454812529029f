package artifact

import (
	"fmt"
	"reflect"
)

// sharedMaps is the encoding of the Resource and Scope maps that the spans
// of one export share: `,"resource":{...},"scope":{...}` as appendContent
// writes it.
type sharedMaps struct {
	resource, scope map[string]any
	enc             []byte
}

// ShareSpanMaps encodes once the Resource and Scope maps that consecutive
// records share (the same map values, as the receiver's conversion of one
// export produces them), so that MarshalJSON and ContentDigest of each
// record copy those bytes instead of sorting and encoding the maps again.
// The output is byte for byte what it would be without. The maps must not
// change after this call (they are read-only already: see Span); a
// record whose Resource or Scope is later replaced by another map is
// encoded from its own maps. Maps that do not encode (nested too deep, an
// invalid number) are left unshared, so the error still surfaces at
// MarshalJSON.
func ShareSpanMaps(recs []Span) {
	var cur *sharedMaps
	for i := range recs {
		r := &recs[i]
		if cur == nil || !sameMap(cur.resource, r.Resource) || !sameMap(cur.scope, r.Scope) {
			cur = encodeShared(r.Resource, r.Scope)
		}
		r.shared = cur
	}
}

// encodeShared encodes resource and scope, or returns nil when either does
// not encode.
func encodeShared(resource, scope map[string]any) *sharedMaps {
	b := append(make([]byte, 0, 512), `,"resource":`...)
	b, err := appendMap(b, resource, 0)
	if err != nil {
		return nil
	}
	b = append(b, `,"scope":`...)
	if b, err = appendMap(b, scope, 0); err != nil {
		return nil
	}
	return &sharedMaps{resource: resource, scope: scope, enc: b}
}

// sameMap reports whether a and b are the same map value (not merely equal
// contents).
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// appendResourceScope writes `,"resource":...,"scope":...` for r: the
// shared encoding when r still holds the maps it was made from.
func (r *Span) appendResourceScope(b []byte) ([]byte, error) {
	if s := r.shared; s != nil && sameMap(s.resource, r.Resource) && sameMap(s.scope, r.Scope) {
		return append(b, s.enc...), nil
	}
	var err error
	b = append(b, `,"resource":`...)
	if b, err = appendMap(b, r.Resource, 0); err != nil {
		return nil, fmt.Errorf("artifact: span %q resource: %w", r.Name, err)
	}
	b = append(b, `,"scope":`...)
	if b, err = appendMap(b, r.Scope, 0); err != nil {
		return nil, fmt.Errorf("artifact: span %q scope: %w", r.Name, err)
	}
	return b, nil
}

// resourceScopeEncoding returns `,"resource":…,"scope":…` for r: the shared
// encoding when r still holds the maps it was made from (not to be
// modified), else a fresh one.
func (r *Span) resourceScopeEncoding() ([]byte, error) {
	if s := r.shared; s != nil && sameMap(s.resource, r.Resource) && sameMap(s.scope, r.Scope) {
		return s.enc, nil
	}
	return r.appendResourceScope(make([]byte, 0, 512))
}
