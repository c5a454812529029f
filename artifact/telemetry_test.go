package artifact

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func sampleTelemetry() TelemetrySample {
	return TelemetrySample{
		Scope:        ScopeGPUDevice,
		ClockDomain:  "gpu01/abc/unix_epoch_ns",
		CounterOwner: OwnerGPUDevice,
		RunID:        "run-1",
		Identity: TelemetryIdentity{
			Host: "gpu01", PID: 4242, ProcessStartNS: 1_700_000_000_000_000_000,
			DeviceUUID: Ptr("GPU-1"), Rank: Ptr(int64(0)), BootID: Ptr("abc"),
			GroupID: Ptr("g"), WorldSize: Ptr(int64(2)),
		},
		ObservedAtNS: 1_700_000_000_123_456_789,
		Metric:       MetricDeviceMemoryUsedBytes,
		ValueBytes:   Ptr(int64(81_000_000_000)),
		State:        SampleValid,
		Source:       "nvml.v2",
		IntervalMS:   100,
		Provenance:   ProvenanceObserved,
	}
}

func TestTelemetrySampleRoundTrip(t *testing.T) {
	s := sampleTelemetry()
	line, err := MarshalLine(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(line, []byte(`{"event_type":"infer.telemetry_sample","schema_version":1,"scope":"gpu_device"`)) {
		t.Fatalf("line starts wrong: %s", line)
	}
	for _, want := range []string{`"value_bytes":81000000000`, `"detail":null`, `"gpu_instance_id":null`, `"world_size":2`} {
		if !bytes.Contains(line, []byte(want)) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}
	var got []Record
	if _, err := Read(bytes.NewReader(line), func(r Line) error { got = append(got, r.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("records: %d", len(got))
	}
	ts, ok := got[0].(*TelemetrySample)
	if !ok {
		t.Fatalf("decoded as %T", got[0])
	}
	if !reflect.DeepEqual(*ts, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *ts, s)
	}
}

func TestTelemetrySampleFloatValueIsLineError(t *testing.T) {
	line := `{"event_type":"infer.telemetry_sample","schema_version":1,"value_bytes":1.5}`
	_, err := Read(strings.NewReader(line+"\n"), func(Line) error { return nil })
	le, ok := err.(*LineError)
	if !ok || le.Field != "value_bytes" {
		t.Fatalf("err = %v", err)
	}
}

func TestMetricScope(t *testing.T) {
	if s, o, ok := MetricScope(MetricProcessRSSBytes); !ok || s != ScopeServerProcess || o != OwnerOperatingSystemProcess {
		t.Fatal(s, o, ok)
	}
	if s, o, ok := MetricScope(MetricInstanceMemoryReservedBytes); !ok || s != ScopeGPUInstance || o != OwnerGPUInstance {
		t.Fatal(s, o, ok)
	}
	if _, _, ok := MetricScope("bogus"); ok {
		t.Fatal("bogus metric accepted")
	}
}
