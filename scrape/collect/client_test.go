package collect

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
)

func TestClientSamplerPsutil(t *testing.T) {
	var mu sync.Mutex
	var got []*artifact.SystemSample
	emit := artifact.SinkFunc(func(rec artifact.Record) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, rec.(*artifact.SystemSample))
		return nil
	})
	s, err := NewClientSampler(context.Background(), SamplerPsutil, "s1", 20*time.Millisecond, emit)
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	time.Sleep(110 * time.Millisecond)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 {
		t.Fatalf("%d samples", len(got))
	}
	for _, r := range got {
		if r.RecordKind() != artifact.KindSystemSample || r.ObservationScope != "client_local" || r.ProcessRSSBytes == nil || *r.ProcessRSSBytes <= 0 {
			t.Fatalf("sample %+v", r)
		}
		if r.DeviceUsedBytes != nil {
			t.Fatal("psutil samples read no device")
		}
	}
	if s, err := NewClientSampler(context.Background(), SamplerNone, "s1", time.Second, emit); s != nil || err != nil {
		t.Fatal("none gives no sampler")
	}
	if _, err := NewClientSampler(context.Background(), "bogus", "s1", time.Second, emit); err == nil {
		t.Fatal("unknown sampler accepted")
	}
}

// NVML samples take free memory from NVML's own free figure (v2's used
// excludes the reserved bytes, so total − used would count them as free)
// and say which memory call answered.
func TestClientSamplerNVMLMemory(t *testing.T) {
	const total, used, reserved = 80 << 30, 50 << 30, 600 << 20
	for _, tc := range []struct {
		name, source string
		v2Err        error
		used         int64
	}{
		{"v2", SourceNVMLv2, nil, used},
		{"v2 not supported", SourceNVMLv1, fmt.Errorf("nvmlDeviceGetMemoryInfo_v2: %w (Not Supported)", gpu.ErrUnsupported), used + reserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := uint64(reserved)
			f := &gpu.Fake{Devices: []*gpu.FakeDevice{{UUIDValue: "GPU-cccc", V2Err: tc.v2Err,
				Mem: gpu.Memory{TotalBytes: total, UsedBytes: used, ReservedBytes: &res, FreeBytes: total - used - reserved}}}}
			var got []*artifact.SystemSample
			emit := artifact.SinkFunc(func(rec artifact.Record) error {
				got = append(got, rec.(*artifact.SystemSample))
				return nil
			})
			s, err := newClientSampler(context.Background(), SamplerAuto, "s1", time.Hour, emit, func() (gpu.Library, error) { return f, nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d samples", len(got))
			}
			r := got[0]
			if r.Sampler != "nvml" || r.DeviceID == nil || *r.DeviceID != "GPU-cccc" {
				t.Errorf("sampler %q device %v", r.Sampler, r.DeviceID)
			}
			for name, c := range map[string]struct {
				got  *int64
				want int64
			}{
				"used": {r.DeviceUsedBytes, tc.used}, "free": {r.DeviceFreeBytes, total - used - reserved}, "total": {r.DeviceTotalBytes, total},
			} {
				if c.got == nil || *c.got != c.want {
					t.Errorf("%s = %v, want %d", name, deref(c.got), c.want)
				}
			}
			if r.DeviceMemorySource == nil || *r.DeviceMemorySource != tc.source {
				t.Errorf("device_memory_source %v, want %s", deref(r.DeviceMemorySource), tc.source)
			}
		})
	}
}

// deref shows a nullable field's value, or "null".
func deref[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}
