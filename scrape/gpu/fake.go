package gpu

import (
	"fmt"
	"sync"
)

// Fake is an in-memory Library for tests. Set its fields before use; use Set
// to change a device while a collector polls it. All methods are safe for
// concurrent use.
type Fake struct {
	mu sync.Mutex
	// InitErr is returned by Init (e.g. a wrapped ErrNotAvailable).
	InitErr error
	// Devices are listed in NVML index order.
	Devices []*FakeDevice
	inited  bool
	// Shutdowns counts successful Shutdown calls.
	Shutdowns int
}

// FakeDevice is one device of a Fake. Fields may be changed under Fake.Set.
type FakeDevice struct {
	// UUIDValue is what UUID returns; UUIDErr, when set, is returned instead.
	UUIDValue string
	UUIDErr   error
	// MIGInfo is returned by MIG (nil: a whole GPU).
	MIGInfo *MIGInfo
	MIGErr  error
	// Mem is the device's memory as the v2 call reports it (Version and
	// V1Reason are ignored; a nil ReservedBytes reads as 0). The v1 call
	// reports the same memory as v1 defines it: used includes reserved, and
	// no reserved figure.
	Mem Memory
	// NoV2 models a driver without nvmlDeviceGetMemoryInfo_v2 (the symbol is
	// absent).
	NoV2 bool
	// V2Err, when set, is the v2 call's answer (wrap ErrUnsupported to model
	// ERROR_NOT_SUPPORTED or ERROR_FUNCTION_NOT_FOUND at call time).
	V2Err error
	// MemErr, when set, is every memory call's answer (a lost GPU, say).
	MemErr error
	// Procs is returned by ComputeProcesses; ProcsErr instead when set.
	Procs    []Process
	ProcsErr error
	// EnergyMJ is the energy counter EnergyMillijoules reads (mJ); EnergyErr
	// instead when set (wrap ErrUnsupported for a GPU without the counter).
	// EnergyStepMJ is added to EnergyMJ after each reading, so a polling
	// collector sees the counter grow; set EnergyMJ lower to model a reset.
	EnergyMJ     uint64
	EnergyStepMJ uint64
	EnergyErr    error
	// PowerMW is what PowerMilliwatts reads (mW); PowerErr instead when set.
	PowerMW  uint32
	PowerErr error

	lib *Fake
}

// Set runs f with the Fake's lock held, so a test can change devices while
// another goroutine reads them.
func (f *Fake) Set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// Init returns InitErr or marks the Fake initialised.
func (f *Fake) Init() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.InitErr != nil {
		return f.InitErr
	}
	f.inited = true
	return nil
}

// Shutdown marks the Fake uninitialised; an error when it was not initialised.
func (f *Fake) Shutdown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.inited {
		return fmt.Errorf("fake NVML: shutdown before init")
	}
	f.inited = false
	f.Shutdowns++
	return nil
}

func (f *Fake) check() error {
	if !f.inited {
		return fmt.Errorf("fake NVML: not initialised")
	}
	return nil
}

// DeviceByIndex returns Devices[i].
func (f *Fake) DeviceByIndex(i int) (Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	if i < 0 || i >= len(f.Devices) {
		return nil, fmt.Errorf("%w: index %d (NVML lists %d devices)", ErrNotFound, i, len(f.Devices))
	}
	d := f.Devices[i]
	d.lib = f
	return fakeHandle{d}, nil
}

// DeviceByUUID returns the device whose UUIDValue is uuid.
func (f *Fake) DeviceByUUID(uuid string) (Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(); err != nil {
		return nil, err
	}
	for _, d := range f.Devices {
		if d.UUIDValue == uuid {
			d.lib = f
			return fakeHandle{d}, nil
		}
	}
	return nil, fmt.Errorf("%w: UUID %q", ErrNotFound, uuid)
}

type fakeHandle struct{ d *FakeDevice }

func (h fakeHandle) lock() func() {
	h.d.lib.mu.Lock()
	return h.d.lib.mu.Unlock
}

func (h fakeHandle) UUID() (string, error) {
	defer h.lock()()
	if h.d.UUIDErr != nil {
		return "", h.d.UUIDErr
	}
	return h.d.UUIDValue, nil
}

func (h fakeHandle) MIG() (*MIGInfo, error) {
	defer h.lock()()
	if h.d.MIGErr != nil {
		return nil, h.d.MIGErr
	}
	if h.d.MIGInfo == nil {
		return nil, nil
	}
	m := *h.d.MIGInfo
	return &m, nil
}

func (h fakeHandle) Memory() (Memory, error) {
	defer h.lock()()
	var v2 memoryCall
	if !h.d.NoV2 {
		v2 = h.memoryV2
	}
	return readMemory(v2, h.memoryV1)
}

// memoryV2 answers as nvmlDeviceGetMemoryInfo_v2 would.
func (h fakeHandle) memoryV2() (Memory, error) {
	switch {
	case h.d.MemErr != nil:
		return Memory{}, h.d.MemErr
	case h.d.V2Err != nil:
		return Memory{}, h.d.V2Err
	}
	m := h.d.Mem
	r := uint64(0)
	if m.ReservedBytes != nil {
		r = *m.ReservedBytes
	}
	return Memory{TotalBytes: m.TotalBytes, UsedBytes: m.UsedBytes, ReservedBytes: &r, FreeBytes: m.FreeBytes}, nil
}

// memoryV1 answers as nvmlDeviceGetMemoryInfo would: used includes reserved.
func (h fakeHandle) memoryV1() (Memory, error) {
	if h.d.MemErr != nil {
		return Memory{}, h.d.MemErr
	}
	m := h.d.Mem
	used := m.UsedBytes
	if m.ReservedBytes != nil {
		used += *m.ReservedBytes
	}
	return Memory{TotalBytes: m.TotalBytes, UsedBytes: used, FreeBytes: m.FreeBytes}, nil
}

func (h fakeHandle) ComputeProcesses() ([]Process, error) {
	defer h.lock()()
	if h.d.ProcsErr != nil {
		return nil, h.d.ProcsErr
	}
	return append([]Process(nil), h.d.Procs...), nil
}

func (h fakeHandle) EnergyMillijoules() (uint64, error) {
	defer h.lock()()
	if h.d.EnergyErr != nil {
		return 0, h.d.EnergyErr
	}
	v := h.d.EnergyMJ
	h.d.EnergyMJ += h.d.EnergyStepMJ
	return v, nil
}

func (h fakeHandle) PowerMilliwatts() (uint32, error) {
	defer h.lock()()
	if h.d.PowerErr != nil {
		return 0, h.d.PowerErr
	}
	return h.d.PowerMW, nil
}
