package gpu

import (
	"errors"
	"fmt"
	"strings"
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

// readMemory's rule, call by call.
func TestReadMemory(t *testing.T) {
	res := uint64(7)
	v2 := Memory{TotalBytes: 100, UsedBytes: 40, ReservedBytes: &res, FreeBytes: 53}
	v1 := Memory{TotalBytes: 100, UsedBytes: 47, FreeBytes: 53}
	unsupported := fmt.Errorf("nvmlDeviceGetMemoryInfo_v2: %w (Not Supported)", ErrUnsupported)
	answer := func(m Memory, err error, calls *int) memoryCall {
		return func() (Memory, error) { *calls++; return m, err }
	}
	for _, tc := range []struct {
		name           string
		noV2           bool
		v2Err, v1Err   error
		version        int
		used           uint64
		reason, errSub string
		v1Calls        int
	}{
		{name: "v2 answers", version: 2, used: 40},
		{name: "no v2 symbol", noV2: true, version: 1, used: 47, reason: "absent", v1Calls: 1},
		{name: "v2 not supported", v2Err: unsupported, version: 1, used: 47, reason: "Not Supported", v1Calls: 1},
		{name: "v2 fails otherwise", v2Err: errors.New("GPU is lost"), errSub: "GPU is lost"},
		{name: "both unsupported", v2Err: unsupported, v1Err: errors.New("v1 says no"), errSub: "(Not Supported); v1 fallback: v1 says no", v1Calls: 1},
		{name: "no v2 and v1 fails", noV2: true, v1Err: errors.New("v1 says no"), errSub: "v1 says no", v1Calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n2, n1 int
			var call2 memoryCall
			if !tc.noV2 {
				call2 = answer(v2, tc.v2Err, &n2)
			}
			m, err := readMemory(call2, answer(v1, tc.v1Err, &n1))
			if n1 != tc.v1Calls {
				t.Errorf("v1 called %d times, want %d", n1, tc.v1Calls)
			}
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("error %v, want one containing %q", err, tc.errSub)
				}
				return
			}
			if err != nil || m.Version != tc.version || m.UsedBytes != tc.used || m.FreeBytes != 53 || m.TotalBytes != 100 ||
				(m.ReservedBytes != nil) != (tc.version == 2) || !strings.Contains(m.V1Reason, tc.reason) || (m.V1Reason == "") != (tc.version == 2) {
				t.Fatalf("memory %+v, %v", m, err)
			}
		})
	}
}

// The fake answers v1 as NVML defines it: used includes reserved.
func TestFakeMemoryVersions(t *testing.T) {
	res := uint64(5)
	f := &Fake{Devices: []*FakeDevice{{UUIDValue: "GPU-a", Mem: Memory{TotalBytes: 100, UsedBytes: 40, ReservedBytes: &res, FreeBytes: 55}}}}
	if err := f.Init(); err != nil {
		t.Fatal(err)
	}
	d, _ := f.DeviceByIndex(0)
	for _, tc := range []struct {
		name          string
		set           func()
		version       int
		used          uint64
		reservedValid bool
	}{
		{"v2", func() {}, 2, 40, true},
		{"no v2", func() { f.Devices[0].NoV2 = true }, 1, 45, false},
		{"v2 unsupported", func() { f.Devices[0].NoV2, f.Devices[0].V2Err = false, ErrUnsupported }, 1, 45, false},
	} {
		f.Set(tc.set)
		m, err := d.Memory()
		if err != nil || m.Version != tc.version || m.UsedBytes != tc.used || m.FreeBytes != 55 || (m.ReservedBytes != nil) != tc.reservedValid {
			t.Errorf("%s: memory %+v, %v", tc.name, m, err)
		}
	}
}
