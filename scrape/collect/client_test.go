package collect

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
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
