//go:build cgo && linux

package gpu

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func openNVML() (Library, error) { return NewNVML(nvml.New()), nil }

// NewNVML adapts a go-nvml Interface (the real library from nvml.New, or a
// mock from go-nvml's mock packages) to Library. Only in cgo builds on Linux.
func NewNVML(lib nvml.Interface) Library { return &nvmlLibrary{lib: lib} }

type nvmlLibrary struct {
	lib   nvml.Interface
	hasV2 bool
	ready bool // Init succeeded: calling into an unloaded library kills the process
}

// errNotInitialized is returned by every call made before a successful Init.
var errNotInitialized = notAvailable("NVML is not initialised (call Init first)")

// retErr turns an NVML return code into an error (nil for SUCCESS); one
// wraps ErrUnsupported for ERROR_NOT_SUPPORTED and ERROR_FUNCTION_NOT_FOUND.
func retErr(call string, r nvml.Return) error {
	switch r {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return fmt.Errorf("%s: %w (%s)", call, ErrUnsupported, nvml.ErrorString(r))
	}
	return fmt.Errorf("%s: %s", call, nvml.ErrorString(r))
}

func (l *nvmlLibrary) Init() (err error) {
	defer func() {
		// go-nvml panics when the symbol table cannot be loaded on some
		// platforms; report it as NVML being unavailable.
		if p := recover(); p != nil {
			err = notAvailable(fmt.Sprint(p))
		}
	}()
	switch r := l.lib.Init(); r {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
		return notAvailable(safeErrorString(r))
	default:
		return fmt.Errorf("nvmlInit: %s", safeErrorString(r))
	}
	// The binding calls the C symbol directly; an old driver without
	// nvmlDeviceGetMemoryInfo_v2 would crash, so look it up first.
	l.hasV2 = l.lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	l.ready = true
	return nil
}

// safeErrorString describes r without calling into a library that may not be loaded.
func safeErrorString(r nvml.Return) string {
	switch r {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA kernel driver not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to use NVML"
	}
	return fmt.Sprintf("NVML error %d", int32(r))
}

func (l *nvmlLibrary) Shutdown() error {
	if !l.ready {
		return nil
	}
	l.ready = false
	return retErr("nvmlShutdown", l.lib.Shutdown())
}

func (l *nvmlLibrary) DeviceByIndex(i int) (Device, error) {
	if !l.ready {
		return nil, errNotInitialized
	}
	n, r := l.lib.DeviceGetCount()
	if err := retErr("nvmlDeviceGetCount", r); err != nil {
		return nil, err
	}
	if i < 0 || i >= n {
		return nil, fmt.Errorf("%w: index %d (NVML lists %d devices)", ErrNotFound, i, n)
	}
	d, r := l.lib.DeviceGetHandleByIndex(i)
	if err := retErr("nvmlDeviceGetHandleByIndex", r); err != nil {
		return nil, err
	}
	return &nvmlDevice{d: d, hasV2: l.hasV2}, nil
}

func (l *nvmlLibrary) DeviceByUUID(uuid string) (Device, error) {
	if !l.ready {
		return nil, errNotInitialized
	}
	d, r := l.lib.DeviceGetHandleByUUID(uuid)
	switch r {
	case nvml.SUCCESS:
		return &nvmlDevice{d: d, hasV2: l.hasV2}, nil
	case nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
		return nil, fmt.Errorf("%w: UUID %q", ErrNotFound, uuid)
	}
	return nil, retErr("nvmlDeviceGetHandleByUUID", r)
}

type nvmlDevice struct {
	d     nvml.Device
	hasV2 bool
}

func (d *nvmlDevice) UUID() (string, error) {
	u, r := d.d.GetUUID()
	return u, retErr("nvmlDeviceGetUUID", r)
}

func (d *nvmlDevice) MIG() (*MIGInfo, error) {
	isMIG, r := d.d.IsMigDeviceHandle()
	if r == nvml.ERROR_NOT_SUPPORTED {
		return nil, nil
	}
	if err := retErr("nvmlDeviceIsMigDeviceHandle", r); err != nil {
		return nil, err
	}
	if !isMIG {
		return nil, nil
	}
	parent, r := d.d.GetDeviceHandleFromMigDeviceHandle()
	if err := retErr("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", r); err != nil {
		return nil, err
	}
	pu, r := parent.GetUUID()
	if err := retErr("nvmlDeviceGetUUID(parent)", r); err != nil {
		return nil, err
	}
	gi, r := d.d.GetGpuInstanceId()
	if err := retErr("nvmlDeviceGetGpuInstanceId", r); err != nil {
		return nil, err
	}
	return &MIGInfo{ParentUUID: pu, GPUInstanceID: gi}, nil
}

func (d *nvmlDevice) Memory() (Memory, error) {
	var v2 memoryCall
	if d.hasV2 {
		v2 = d.memoryV2
	}
	return readMemory(v2, d.memoryV1)
}

// memoryV2 calls nvmlDeviceGetMemoryInfo_v2; only when the symbol exists.
func (d *nvmlDevice) memoryV2() (Memory, error) {
	m, r := d.d.GetMemoryInfo_v2()
	if err := retErr("nvmlDeviceGetMemoryInfo_v2", r); err != nil {
		return Memory{}, err
	}
	res := m.Reserved
	return Memory{TotalBytes: m.Total, UsedBytes: m.Used, ReservedBytes: &res, FreeBytes: m.Free}, nil
}

// memoryV1 calls nvmlDeviceGetMemoryInfo.
func (d *nvmlDevice) memoryV1() (Memory, error) {
	m, r := d.d.GetMemoryInfo()
	if err := retErr("nvmlDeviceGetMemoryInfo", r); err != nil {
		return Memory{}, err
	}
	return Memory{TotalBytes: m.Total, UsedBytes: m.Used, FreeBytes: m.Free}, nil
}

func (d *nvmlDevice) ComputeProcesses() ([]Process, error) {
	ps, r := d.d.GetComputeRunningProcesses()
	if err := retErr("nvmlDeviceGetComputeRunningProcesses", r); err != nil {
		return nil, err
	}
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		q := Process{PID: int(p.Pid)}
		// NVML_VALUE_NOT_AVAILABLE is -1 as unsigned long long.
		if p.UsedGpuMemory != math.MaxUint64 {
			u := p.UsedGpuMemory
			q.UsedBytes = &u
		}
		out = append(out, q)
	}
	return out, nil
}

func (d *nvmlDevice) EnergyMillijoules() (uint64, error) {
	e, r := d.d.GetTotalEnergyConsumption()
	if err := retErr("nvmlDeviceGetTotalEnergyConsumption", r); err != nil {
		return 0, err
	}
	return e, nil
}

func (d *nvmlDevice) PowerMilliwatts() (uint32, error) {
	p, r := d.d.GetPowerUsage()
	if err := retErr("nvmlDeviceGetPowerUsage", r); err != nil {
		return 0, err
	}
	return p, nil
}
