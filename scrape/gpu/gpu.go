// Package gpu is inferprobe's small view of NVIDIA's management library (NVML):
// initialise, find a device by NVML index or by GPU/MIG UUID, read its memory
// (the v2 call, or v1 when the driver lacks v2 or v2 answers NOT_SUPPORTED or
// FUNCTION_NOT_FOUND for the device, and the reading says so), its cumulative
// energy counter and its power draw, list the processes running compute
// work on it, and re-read its UUID to detect a swapped device.
//
// The go-nvml implementation (Open) exists only in cgo builds on Linux; every
// other build, and any host without the NVIDIA driver library, gets
// ErrNotAvailable. Fake is an in-memory Library for tests. Readings mean what
// NVML defines, as go-nvml v0.13.4-1 exposes them (see Memory and Process).
package gpu

import (
	"errors"
	"fmt"
)

// ErrNotAvailable is returned (wrapped) by Open and Init when NVML cannot be
// used: a build without cgo, a non-Linux OS, no libnvidia-ml.so.1, or a
// driver that is not loaded.
var ErrNotAvailable = errors.New("NVML not available")

// ErrNotFound is returned (wrapped) when no device has the requested index or UUID.
var ErrNotFound = errors.New("GPU device not found")

// ErrUnsupported is wrapped by the error of an NVML call that NVML answers
// with ERROR_NOT_SUPPORTED or ERROR_FUNCTION_NOT_FOUND: the library has the
// call but not for this device or driver.
var ErrUnsupported = errors.New("NVML call not supported")

// Library is an initialised-or-not NVML instance. Init must succeed before
// any device lookup; Shutdown releases it. Implementations are safe for use
// by one goroutine at a time.
type Library interface {
	// Init loads and initialises NVML; errors wrap ErrNotAvailable when
	// the library or driver is missing.
	Init() error
	// Shutdown releases NVML. Calling it after a failed Init returns an error.
	Shutdown() error
	// DeviceByIndex returns the device at NVML index i (PCI bus order, not the
	// CUDA ordinal). Errors wrap ErrNotFound for an index out of range.
	DeviceByIndex(i int) (Device, error)
	// DeviceByUUID returns the device named by a GPU UUID ("GPU-…") or a MIG
	// device UUID ("MIG-…"). Errors wrap ErrNotFound for an unknown UUID.
	DeviceByUUID(uuid string) (Device, error)
}

// Device is one GPU or one MIG instance (a MIG device handle).
type Device interface {
	// UUID re-reads the device's UUID from NVML ("GPU-…" or "MIG-…").
	UUID() (string, error)
	// MIG reports the MIG identity when the device is a MIG instance, or
	// nil for a whole GPU.
	MIG() (*MIGInfo, error)
	// Memory reads the device's (or MIG instance's) memory counters.
	Memory() (Memory, error)
	// ComputeProcesses lists the processes that NVML reports running compute
	// work on the device (nvmlDeviceGetComputeRunningProcesses).
	ComputeProcesses() ([]Process, error)
	// EnergyMillijoules reads the GPU's total energy consumption since the
	// driver was last loaded, in millijoules
	// (nvmlDeviceGetTotalEnergyConsumption; Volta and newer). A driver reload
	// resets it. Errors wrap ErrUnsupported where the GPU has no energy counter.
	EnergyMillijoules() (uint64, error)
	// PowerMilliwatts reads the GPU's power draw in milliwatts
	// (nvmlDeviceGetPowerUsage). Errors wrap ErrUnsupported where the GPU does
	// not report it.
	PowerMilliwatts() (uint32, error)
}

// MIGInfo identifies a MIG instance.
type MIGInfo struct {
	// ParentUUID is the UUID ("GPU-…") of the physical GPU holding the instance.
	ParentUUID string
	// GPUInstanceID is NVML's GPU instance id (nvmlDeviceGetGpuInstanceId).
	GPUInstanceID int
}

// Memory is one reading of device memory, in bytes.
type Memory struct {
	// Version is 2 when nvmlDeviceGetMemoryInfo_v2 answered, 1 when
	// nvmlDeviceGetMemoryInfo (v1) was used instead (V1Reason says why).
	Version int
	// TotalBytes is the device's total framebuffer memory.
	TotalBytes uint64
	// UsedBytes is allocated memory. From v2 it excludes memory reserved for
	// the driver and firmware; from v1 it includes it (NVML's definitions).
	UsedBytes uint64
	// ReservedBytes is memory set aside for the driver and firmware; nil for v1,
	// which does not report it.
	ReservedBytes *uint64
	// FreeBytes is unallocated memory, NVML's own free figure (both
	// versions). From v2, TotalBytes − UsedBytes would count the reserved
	// bytes as free; FreeBytes does not.
	FreeBytes uint64
	// V1Reason says why v1 answered (the v2 symbol is absent from the driver,
	// or the v2 call's error); "" for a v2 reading.
	V1Reason string
}

// Process is one entry of a device's compute process list.
type Process struct {
	// PID is the process id as NVML reports it (inside a container this can
	// be a host PID).
	PID int
	// UsedBytes is the GPU memory the process uses, nil when NVML does not
	// report it (NVML_VALUE_NOT_AVAILABLE, e.g. under some MIG/WSL setups).
	UsedBytes *uint64
}

// memoryCall is one of NVML's memory queries for one device; the reader
// fills Version and V1Reason.
type memoryCall func() (Memory, error)

// readMemory is every Device's Memory rule: the v2 call answers unless it is
// nil (the driver lacks the symbol) or its error wraps ErrUnsupported, in
// which case v1 answers, with Version 1, no ReservedBytes and V1Reason saying
// why. Any other v2 error is returned as is, without trying v1 (a lost GPU
// fails both); a v1 error after an unsupported v2 names both.
func readMemory(v2, v1 memoryCall) (Memory, error) {
	reason := "nvmlDeviceGetMemoryInfo_v2 is absent from this driver"
	if v2 != nil {
		m, err := v2()
		if err == nil {
			m.Version, m.V1Reason = 2, ""
			return m, nil
		}
		if !errors.Is(err, ErrUnsupported) {
			return Memory{}, err
		}
		reason = err.Error()
	}
	m, err := v1()
	if err != nil {
		if v2 != nil {
			return Memory{}, fmt.Errorf("%s; v1 fallback: %w", reason, err)
		}
		return Memory{}, err
	}
	m.Version, m.ReservedBytes, m.V1Reason = 1, nil, reason
	return m, nil
}

// Open returns the NVML Library for this build. In builds without cgo or off
// Linux it returns ErrNotAvailable; otherwise the returned Library must still
// be Init-ed, and Init reports a missing driver as ErrNotAvailable.
func Open() (Library, error) { return openNVML() }

// notAvailable wraps ErrNotAvailable with a reason.
func notAvailable(reason string) error {
	return fmt.Errorf("%w: %s", ErrNotAvailable, reason)
}
