//go:build cgo && linux

package gpu

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockServer is go-nvml's 8×H200 mock with the calls it leaves unset filled in.
func mockServer(hasV2 bool) *server.Server {
	s := dgxh200.New()
	s.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlDeviceGetMemoryInfo_v2" && !hasV2 {
			return errors.New("symbol not found")
		}
		return nil
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 141 << 30, Used: uint64(i+1) << 30, Reserved: 600 << 20, Free: 141<<30 - uint64(i+1)<<30 - 600<<20}, nvml.SUCCESS
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 141 << 30, Used: uint64(i+2) << 30, Free: 141<<30 - uint64(i+2)<<30}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 77, UsedGpuMemory: 5 << 30}, {Pid: 78, UsedGpuMemory: math.MaxUint64}}, nvml.SUCCESS
		}
	}
	return s
}

func TestNVMLAdapterV2(t *testing.T) {
	s := mockServer(true)
	lib := NewNVML(s)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lib.Shutdown() }()
	d, err := lib.DeviceByIndex(3)
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.UUID()
	if err != nil || u != s.Devices[3].(*server.Device).UUID {
		t.Fatalf("UUID %q, %v", u, err)
	}
	byUUID, err := lib.DeviceByUUID(u)
	if err != nil {
		t.Fatal(err)
	}
	m, err := byUUID.Memory()
	if err != nil || m.Version != 2 || m.UsedBytes != 4<<30 || m.ReservedBytes == nil || *m.ReservedBytes != 600<<20 || m.FreeBytes != 137<<30-600<<20 || m.V1Reason != "" {
		t.Fatalf("memory %+v, %v", m, err)
	}
	if mig, err := d.MIG(); mig != nil || err != nil {
		t.Errorf("MIG = %+v, %v", mig, err)
	}
	ps, err := d.ComputeProcesses()
	if err != nil || len(ps) != 2 || ps[0].PID != 77 || *ps[0].UsedBytes != 5<<30 || ps[1].UsedBytes != nil {
		t.Fatalf("processes %+v, %v", ps, err)
	}
	if _, err := lib.DeviceByIndex(8); !errors.Is(err, ErrNotFound) {
		t.Errorf("index 8: %v", err)
	}
	if _, err := lib.DeviceByUUID("GPU-nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown UUID: %v", err)
	}
}

func TestNVMLAdapterV1Fallback(t *testing.T) {
	lib := NewNVML(mockServer(false))
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := lib.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Memory()
	if err != nil || m.Version != 1 || m.UsedBytes != 2<<30 || m.ReservedBytes != nil || m.FreeBytes != 139<<30 || !strings.Contains(m.V1Reason, "absent") {
		t.Fatalf("memory %+v, %v", m, err)
	}
}

// The v2 symbol exists but the call answers NOT_SUPPORTED or
// FUNCTION_NOT_FOUND: the reading comes from v1 and says why.
func TestNVMLAdapterV2UnsupportedAtCallTime(t *testing.T) {
	for _, r := range []nvml.Return{nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND} {
		s := mockServer(true)
		dev := s.Devices[0].(*server.Device)
		v2Calls := 0
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { v2Calls++; return nvml.Memory_v2{}, r }
		lib := NewNVML(s)
		if err := lib.Init(); err != nil {
			t.Fatal(err)
		}
		d, err := lib.DeviceByIndex(0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := d.Memory()
		if err != nil || m.Version != 1 || m.UsedBytes != 2<<30 || m.FreeBytes != 139<<30 || m.ReservedBytes != nil || v2Calls != 1 {
			t.Fatalf("return %d: memory %+v, %v (v2 called %d times)", int32(r), m, err, v2Calls)
		}
		if !strings.Contains(m.V1Reason, "nvmlDeviceGetMemoryInfo_v2") || !strings.Contains(m.V1Reason, nvml.ErrorString(r)) {
			t.Errorf("return %d: reason %q", int32(r), m.V1Reason)
		}
	}
	// Any other error is the reading's error.
	s := mockServer(true)
	s.Devices[0].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
	lib := NewNVML(s)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	d, _ := lib.DeviceByIndex(0)
	if _, err := d.Memory(); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("GPU lost: %v", err)
	}
}

func TestNVMLAdapterInitErrors(t *testing.T) {
	for r, wantNA := range map[nvml.Return]bool{
		nvml.ERROR_LIBRARY_NOT_FOUND: true,
		nvml.ERROR_DRIVER_NOT_LOADED: true,
		nvml.ERROR_UNKNOWN:           false,
	} {
		s := mockServer(true)
		s.InitFunc = func() nvml.Return { return r }
		err := NewNVML(s).Init()
		if err == nil || errors.Is(err, ErrNotAvailable) != wantNA {
			t.Errorf("Init with %d: %v", int32(r), err)
		}
	}
}

func TestNVMLAdapterMIG(t *testing.T) {
	s := mockServer(true)
	parent := s.Devices[2].(*server.Device)
	mig := &server.Device{UUID: "MIG-0000aaaa-1111-2222-3333-444455556666"}
	mig.GetUUIDFunc = func() (string, nvml.Return) { return mig.UUID, nvml.SUCCESS }
	mig.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	mig.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	mig.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
	mig.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 18 << 30, Used: 3 << 30, Reserved: 1 << 20}, nvml.SUCCESS
	}
	s.Devices = append(s.Devices, mig)
	lib := NewNVML(s)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := lib.DeviceByUUID(mig.UUID)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := d.MIG()
	if err != nil || mi == nil || mi.ParentUUID != parent.UUID || mi.GPUInstanceID != 5 {
		t.Fatalf("MIG = %+v, %v", mi, err)
	}
	m, err := d.Memory()
	if err != nil || m.UsedBytes != 3<<30 || *m.ReservedBytes != 1<<20 {
		t.Fatalf("memory %+v, %v", m, err)
	}
}

// scripts/cgo-env.sh keeps go's C flags and adds the one that silences the deprecation
// warnings of NVIDIA's header, which go-nvml's cgo code triggers: a C file calling one of the
// header's deprecated functions compiles without a warning with the script's CGO_CFLAGS, and
// with a warning without them.
func TestCgoEnvSilencesNVMLDeprecations(t *testing.T) {
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	env := func(cflags string) []string {
		out := []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CGO_CFLAGS=") {
				out = append(out, kv)
			}
		}
		return append(out, "CGO_CFLAGS="+cflags)
	}
	script := filepath.Join("..", "..", "scripts", "cgo-env.sh")
	for given, want := range map[string]string{
		"":                                 "-O2 -g -Wno-deprecated-declarations",
		"-O1":                              "-O1 -Wno-deprecated-declarations",
		"-O2 -Wno-deprecated-declarations": "-O2 -Wno-deprecated-declarations",
	} {
		cmd := exec.Command("bash", "-c", `. "$0" && printf %s "$CGO_CFLAGS"`, script)
		cmd.Env = env(given)
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Fatalf("CGO_CFLAGS=%q: the script exports %q (%v), want %q", given, out, err, want)
		}
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "deprecated.c")
	code := "#include \"nvml.h\"\nnvmlReturn_t f(nvmlDevice_t d) { return nvmlDeviceFreezeNvLinkUtilizationCounter(d, 0, 0, NVML_FEATURE_ENABLED); }\n"
	if err := os.WriteFile(src, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	compile := func(cflags string) string {
		args := append(strings.Fields(cflags), "-I", filepath.Join(strings.TrimSpace(string(dir)), "pkg", "nvml"),
			"-c", src, "-o", src+".o")
		out, err := exec.Command(strings.TrimSpace(string(cc)), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
		}
		return string(out)
	}
	if out := compile("-O2 -g"); !strings.Contains(out, "-Wdeprecated-declarations") {
		t.Fatalf("without the flag the compiler gave no deprecation warning: %q", out)
	}
	if out := compile("-O2 -g -Wno-deprecated-declarations"); out != "" {
		t.Errorf("with the script's flags the compiler still says %q", out)
	}
}

// The energy counter (mJ) and power draw (mW) pass through; NOT_SUPPORTED wraps
// ErrUnsupported.
func TestNVMLAdapterEnergyAndPower(t *testing.T) {
	s := mockServer(true)
	dev := s.Devices[1].(*server.Device)
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 123_456_789, nvml.SUCCESS }
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 612_345, nvml.SUCCESS }
	lib := NewNVML(s)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lib.Shutdown() }()
	d, err := lib.DeviceByIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := d.EnergyMillijoules(); err != nil || e != 123_456_789 {
		t.Fatalf("energy %d, %v", e, err)
	}
	if p, err := d.PowerMilliwatts(); err != nil || p != 612_345 {
		t.Fatalf("power %d, %v", p, err)
	}
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	if _, err := d.EnergyMillijoules(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "nvmlDeviceGetTotalEnergyConsumption") {
		t.Fatalf("unsupported energy: %v", err)
	}
}
