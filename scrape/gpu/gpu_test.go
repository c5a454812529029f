package gpu

import (
	"errors"
	"testing"
)

func TestOpenWithoutDriverIsNotAvailable(t *testing.T) {
	// This machine has no NVIDIA driver: in cgo builds Init fails with
	// ERROR_LIBRARY_NOT_FOUND; in other builds Open itself fails.
	lib, err := Open()
	if err == nil {
		err = lib.Init()
		if err == nil {
			_ = lib.Shutdown()
			t.Skip("an NVIDIA driver is present on this host")
		}
	}
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("got %v, want ErrNotAvailable", err)
	}
	if got := err.Error(); len(got) <= len(ErrNotAvailable.Error()) {
		t.Errorf("error %q gives no reason", got)
	}
}

func TestFakeLookups(t *testing.T) {
	res := uint64(5)
	f := &Fake{Devices: []*FakeDevice{
		{UUIDValue: "GPU-a", Mem: Memory{Version: 2, TotalBytes: 100, UsedBytes: 40, ReservedBytes: &res}},
		{UUIDValue: "MIG-b", MIGInfo: &MIGInfo{ParentUUID: "GPU-a", GPUInstanceID: 3}},
	}}
	if _, err := f.DeviceByIndex(0); err == nil {
		t.Fatal("lookup before Init succeeded")
	}
	if err := f.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := f.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Memory()
	if err != nil || m.UsedBytes != 40 || m.ReservedBytes == nil || *m.ReservedBytes != 5 {
		t.Fatalf("memory = %+v, %v", m, err)
	}
	if _, err := f.DeviceByIndex(2); !errors.Is(err, ErrNotFound) {
		t.Errorf("index 2: %v, want ErrNotFound", err)
	}
	if _, err := f.DeviceByUUID("GPU-z"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GPU-z: %v, want ErrNotFound", err)
	}
	mig, err := f.DeviceByUUID("MIG-b")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := mig.MIG()
	if err != nil || mi == nil || mi.ParentUUID != "GPU-a" || mi.GPUInstanceID != 3 {
		t.Fatalf("MIG = %+v, %v", mi, err)
	}
	f.Set(func() { f.Devices[0].UUIDValue = "GPU-new" })
	if u, _ := d.UUID(); u != "GPU-new" {
		t.Errorf("UUID after change = %q", u)
	}
	if err := f.Shutdown(); err != nil || f.Shutdowns != 1 {
		t.Fatalf("shutdown: %v, %d", err, f.Shutdowns)
	}
}
