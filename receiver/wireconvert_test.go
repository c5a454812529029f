package receiver

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/inferprobe/inferprobe/artifact"
)

// wireOptions are the receiver's conversion options with a receive time and a peer.
func wireOptions() convertOptions {
	now := int64(1790960617000000000)
	return convertOptions{sessionID: "s", runID: "r", source: artifact.SpanSourceHTTP,
		receivedAtNS: &now, peer: "10.0.0.7", strict: true}
}

// checkWireConversion asserts convertProto's rule on body: when it converts, pdata decodes
// the body and convertTraces makes records equal to its own, none rejected.
func checkWireConversion(t *testing.T, body []byte) (int, bool) {
	t.Helper()
	o := wireOptions()
	got, ok := convertProto(body, o, 0)
	if !ok {
		return 0, false
	}
	ereq := newExportRequest()
	if err := ereq.UnmarshalProto(body); err != nil {
		t.Fatalf("converted %d spans of a body pdata refuses: %v", len(got.records), err)
	}
	want := convertTraces(ereq.Traces(), o)
	if want.rejected != 0 {
		t.Fatalf("converted %d spans of a body conversion rejects %d of: %s", len(got.records), want.rejected, want.reason)
	}
	if len(got.records) != len(want.records) {
		t.Fatalf("%d records, pdata path %d", len(got.records), len(want.records))
	}
	for i := range want.records {
		if !reflect.DeepEqual(got.records[i], want.records[i]) {
			t.Fatalf("record %d:\n wire %+v\npdata %+v", i, got.records[i], want.records[i])
		}
	}
	return len(got.records), true
}

// variedTraces exercises every value type, repeated keys, host.name, statuses, kinds,
// dropped counts, events, links and two resources.
func variedTraces() ptrace.Traces {
	td := vllmTraces(0, 3)
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutStr("host.name", "gpu-node/7")
	sp := rs.ScopeSpans().At(0).Spans().At(1)
	a := sp.Attributes()
	a.PutBool("b", true)
	a.PutDouble("nan", math.NaN())
	a.PutDouble("inf", math.Inf(-1))
	a.PutEmptyBytes("raw").FromRaw([]byte{0, 0xff})
	a.PutStr("bad-utf8\xff", "v\xfe")
	a.PutEmpty("empty")
	sl := a.PutEmptySlice("list")
	sl.AppendEmpty().SetInt(-3)
	sl.AppendEmpty().SetEmptyMap().PutStr("k", "v")
	sl.AppendEmpty()
	a.PutEmptyMap("map").PutDouble("x", 1.5)
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("boom")
	sp.SetKind(ptrace.SpanKind(9))
	sp.SetDroppedAttributesCount(2)
	sp.SetDroppedLinksCount(1)
	addEventAndLink(sp)
	sp.TraceState().FromRaw("k=v")
	sp.SetFlags(1)
	sp.SetParentSpanID(pcommon.SpanID{})
	sp.SetEndTimestamp(0)
	rs.ScopeSpans().At(0).Scope().SetVersion("0.11")
	rs.ScopeSpans().At(0).Scope().Attributes().PutStr("sa", "x")
	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutInt("host.name", 3) // not a string: the peer names the domain
	ss2 := rs2.ScopeSpans().AppendEmpty()
	addSpan(ss2, vllmSpec(1, 0))
	rs2.ScopeSpans().AppendEmpty() // a scope with no spans
	return td
}

func TestConvertProtoMatchesPdata(t *testing.T) {
	for name, c := range map[string]struct {
		td    ptrace.Traces
		spans int
	}{
		"vLLM export of 512": {vllmTraces(0, 512), 512},
		"varied":             {variedTraces(), 4},
		"nested 20 deep":     {nestedTraces(t, 10), 1},
		"empty export":       {ptrace.NewTraces(), 0},
	} {
		n, ok := checkWireConversion(t, protoBody(t, c.td))
		if !ok || n != c.spans {
			t.Errorf("%s: converted %d spans, %v; want %d", name, n, ok, c.spans)
		}
	}
	// Domains: host.name where it is a string, else the peer.
	conv, _ := convertProto(protoBody(t, variedTraces()), wireOptions(), 4)
	if d0, d3 := conv.records[0].ClockDomain, conv.records[3].ClockDomain; d0 != "gpu-node_7/unix_epoch_ns" || d3 != "10.0.0.7/unix_epoch_ns" {
		t.Errorf("clock domains %q, %q", d0, d3)
	}
}

// Bodies the direct path cannot vouch for take the pdata path.
func TestConvertProtoDeclines(t *testing.T) {
	spoiled := map[string]func(ptrace.Span){
		"no name":          func(s ptrace.Span) { s.SetName("") },
		"zero span id":     func(s ptrace.Span) { s.SetSpanID([8]byte{}) },
		"end before start": func(s ptrace.Span) { s.SetEndTimestamp(s.StartTimestamp() - 1) },
		"nested 40 deep":   nil, // beyond maxSkipDepth
	}
	for name, spoil := range spoiled {
		td := vllmTraces(0, 3)
		if spoil == nil {
			td = nestedTraces(t, 20)
		} else {
			spoil(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1))
		}
		if _, ok := convertProto(protoBody(t, td), wireOptions(), 3); ok {
			t.Errorf("%s: converted", name)
		}
	}
	one := protoBody(t, vllmTraces(0, 1))
	// A second resource in the ResourceSpans (field 1 of field 1): proto would merge the two.
	it := fieldsOf(one)
	rs, ok := it.next()
	if !ok || rs.num != 1 {
		t.Fatal("no ResourceSpans in the test body")
	}
	twoRes := protowire.AppendTag(append([]byte(nil), rs.v...), 1, protowire.BytesType)
	twoRes = protowire.AppendBytes(twoRes, []byte{0x10, 0x01})
	twoResources := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), twoRes)
	if _, ok := convertProto(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs.v), wireOptions(), 1); !ok {
		t.Fatal("the re-wrapped ResourceSpans does not convert")
	}
	for name, b := range map[string][]byte{
		"truncated":       one[:len(one)-1],
		"unknown field":   append(append([]byte(nil), one...), 0x10, 0x01),
		"two resources":   twoResources,
		"two-field value": {0x0a, 0x1a, 0x0a, 0x18, 0x0a, 0x16, 0x0a, 0x01, 'k', 0x12, 0x11, 0x18, 0x01, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x01, 'x', 0x10, 0x01, 0x10, 0x00},
	} {
		if _, ok := convertProto(b, wireOptions(), 1); ok {
			t.Errorf("%s: converted", name)
		}
	}
	lenient := wireOptions()
	lenient.strict = false
	if _, ok := convertProto(protoBody(t, vllmTraces(0, 1)), lenient, 1); ok {
		t.Error("converted in lenient mode")
	}
}

// FuzzConvertProto: whatever the direct path converts, pdata decodes and convertTraces
// converts into equal records.
func FuzzConvertProto(f *testing.F) {
	f.Add(protoBody(f, vllmTraces(0, 2)))
	f.Add(protoBody(f, variedTraces()))
	f.Add(protoBody(f, nestedTraces(f, 3)))
	f.Add([]byte{0x0a, 0x0a, 0x12, 0x08, 0x12, 0x06, 0x0a, 0x03, 1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) { checkWireConversion(t, body) })
}

// Both protobuf transports take the direct path for a vLLM export and deliver the records
// the pdata path makes; OTLP JSON and a body the direct path declines are decoded first.
func TestReceiverConvertsProtobufDirectly(t *testing.T) {
	sink := newCollector()
	r := startReceiver(t, Options{SessionID: "s", RunID: "r", Sink: sink})
	if resp, _ := post(t, tracesURL(r), protoBody(t, vllmTraces(0, 5)), protoHdr); resp.StatusCode != 200 {
		t.Fatalf("protobuf export: %d", resp.StatusCode)
	}
	cc, err := grpc.NewClient(r.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(vllmTraces(1, 3))); err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, tracesURL(r), jsonBody(t, vllmTraces(2, 2)), jsonHdr); resp.StatusCode != 200 {
		t.Fatalf("JSON export: %d", resp.StatusCode)
	}
	td := vllmTraces(3, 2)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName("") // rejected: pdata path
	if resp, _ := post(t, tracesURL(r), protoBody(t, td), protoHdr); resp.StatusCode != 200 {
		t.Fatalf("partial export: %d", resp.StatusCode)
	}
	got := sink.wait(t, 11, 10*time.Second)
	st := r.Stats()
	if st.ExportsDirect != 2 || st.ExportsAccepted != 4 || st.SpansRejected != 1 {
		t.Errorf("direct %d, accepted %d, rejected spans %d; want 2, 4, 1", st.ExportsDirect, st.ExportsAccepted, st.SpansRejected)
	}
	var grpcSpans int
	for _, s := range got {
		if s.Source == artifact.SpanSourceGRPC {
			grpcSpans++
			if s.ClockDomain != "127.0.0.1/unix_epoch_ns" || s.RequestID == nil || s.ReceivedAtNS == nil {
				t.Errorf("gRPC record: domain %q, request id %v, received %v", s.ClockDomain, s.RequestID, s.ReceivedAtNS)
			}
		}
	}
	if grpcSpans != 3 {
		t.Errorf("%d gRPC records, want 3", grpcSpans)
	}
}
