package artifact

import (
	"bytes"
	"strings"
	"testing"
)

// Records sharing their Resource and Scope maps encode byte for byte as
// without ShareSpanMaps; a record given another map afterwards is encoded
// from it; maps that do not encode stay unshared and still fail.
func TestShareSpanMaps(t *testing.T) {
	resource := map[string]any{"service.name": "vllm", "host.name": "gpu-1", "vllm.process_id": int64(7), "z": []any{1.5, "x"}}
	scope := map[string]any{"name": "vllm.llm_engine"}
	other := map[string]any{"service.name": "other"}
	recs := make([]Span, 4)
	for i := range recs {
		recs[i] = sampleRecord()
		recs[i].Resource, recs[i].Scope = resource, scope
	}
	recs[2].Resource = other // a second group within the same export
	var want [][]byte
	for i := range recs {
		line, err := recs[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, line)
	}
	digest := recs[0].ContentDigest()
	ShareSpanMaps(recs)
	if recs[0].shared == nil || recs[1].shared != recs[0].shared || recs[2].shared == recs[0].shared || recs[3].shared == recs[2].shared {
		t.Fatalf("sharing groups wrong: %p %p %p %p", recs[0].shared, recs[1].shared, recs[2].shared, recs[3].shared)
	}
	for i := range recs {
		got, err := recs[i].MarshalJSON()
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("record %d shared:\n%s\nwant\n%s (%v)", i, got, want[i], err)
		}
	}
	if recs[0].ContentDigest() != digest {
		t.Fatal("digest changed by sharing")
	}
	recs[1].Resource = other // replaced after sharing: encoded from the new map
	got, _ := recs[1].MarshalJSON()
	if !bytes.Contains(got, []byte(`"resource":{"service.name":"other"}`)) {
		t.Fatalf("replaced map not used: %s", got)
	}
	deep := any("leaf")
	for i := 0; i <= MaxSpanValueDepth; i++ {
		deep = []any{deep}
	}
	bad := []Span{sampleRecord()}
	bad[0].Resource = map[string]any{"deep": deep}
	ShareSpanMaps(bad)
	if _, err := bad[0].MarshalJSON(); err == nil || !strings.Contains(err.Error(), "resource") {
		t.Fatalf("too deep resource: %v", err)
	}
}

// The dropped counts' fast path writes what the sorted path writes.
func TestDroppedOrder(t *testing.T) {
	rec := sampleRecord()
	rec.Dropped = map[string]int64{"links": 3, "attributes": 1, "events": 2}
	line, err := rec.MarshalJSON()
	if err != nil || !bytes.Contains(line, []byte(`"dropped":{"attributes":1,"events":2,"links":3}`)) {
		t.Fatalf("%s %v", line, err)
	}
	rec.Dropped = map[string]int64{"links": 3, "attributes": 1, "other": 2}
	line, _ = rec.MarshalJSON()
	if !bytes.Contains(line, []byte(`"dropped":{"attributes":1,"links":3,"other":2}`)) {
		t.Fatalf("%s", line)
	}
}
