// Package collect is the polling loop of `inferprobe collect-server`: every
// interval it reads the server process's RSS and, with a GPU, the device's (or
// MIG instance's) memory, the process's GPU memory, and (a whole GPU only) the
// GPU's cumulative energy counter and power draw, and emits one
// artifact.TelemetrySample (an infer.telemetry_sample v1 record) per counter.
//
// A failed reading becomes a "missing" sample with a null value and the
// collection goes on. The loop ends on its duration, on context
// cancellation (Ctrl+C, SIGTERM), when the server process exits (one
// "invalid" sample) or when the device's UUID changes (one "invalid" sample).
package collect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
)

// Sources recorded in TelemetrySample.Source.
const (
	// SourcePsutil: RSS from the OS process table via gopsutil (psutil's Go port).
	SourcePsutil = "psutil"
	// SourceNVMLv2: nvmlDeviceGetMemoryInfo_v2.
	SourceNVMLv2 = "nvml.v2"
	// SourceNVMLv1: nvmlDeviceGetMemoryInfo, when the driver lacks v2 or v2 answers
	// NOT_SUPPORTED or FUNCTION_NOT_FOUND for the device. Its used includes the
	// driver-reserved memory, which it does not report apart.
	SourceNVMLv1 = "nvml.v1"
	// SourceNVMLProcesses: nvmlDeviceGetComputeRunningProcesses.
	SourceNVMLProcesses = "nvml.compute_processes"
	// SourceNVMLEnergy: nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded).
	SourceNVMLEnergy = "nvml.total_energy_consumption"
	// SourceNVMLPower: nvmlDeviceGetPowerUsage (mW).
	SourceNVMLPower = "nvml.power_usage"
)

// Process is the server process being watched (scrape/proc.Process satisfies it).
type Process interface {
	// PID is the process id (≥ 1).
	PID() int
	// StartNS is the process start time, Unix epoch ns (≥ 1).
	StartNS() int64
	// RSSBytes reads the resident set size in bytes.
	RSSBytes(ctx context.Context) (uint64, error)
	// Running reports whether the same process (PID and start time) still runs.
	Running(ctx context.Context) (bool, error)
	// Descendants lists up to limit PIDs of the process's descendants.
	Descendants(ctx context.Context, limit int) []int
}

// Config describes one collection.
type Config struct {
	// RunID is the run the samples belong to (required).
	RunID string
	// Interval is the polling interval (≥ 1 ms).
	Interval time.Duration
	// Duration ends the collection after this long; 0 runs until the
	// context is cancelled.
	Duration time.Duration
	// Host is the machine identity and clock domain source.
	Host artifact.Host
	// ReplicaID, GroupID, Rank and WorldSize are the operator's identity
	// labels; nil when not given. GroupID requires Rank and WorldSize,
	// WorldSize requires GroupID, and 0 ≤ Rank < WorldSize.
	ReplicaID *string
	GroupID   *string
	Rank      *int64
	WorldSize *int64
	// Process is the server process (required).
	Process Process
	// Device is the GPU or MIG instance to read; nil collects RSS only (--no-gpu).
	Device gpu.Device
	// Sink receives each sample as a *artifact.TelemetrySample; a Write
	// error ends the collection with that error. The collector never closes it.
	Sink artifact.Sink
	// Warn receives human-readable warnings (without a "Warning:" prefix); may be nil.
	Warn func(string)
	// Now returns the wall clock; nil means time.Now.
	Now func() time.Time
}

// Outcome says why a collection ended.
type Outcome int

const (
	// Stopped: the context was cancelled (Ctrl+C, SIGTERM).
	Stopped Outcome = iota
	// DurationElapsed: Config.Duration passed.
	DurationElapsed
	// ServerExited: the server process ended; one invalid sample was written.
	ServerExited
	// DeviceChanged: the device's UUID changed; one invalid sample was written.
	DeviceChanged
)

func (o Outcome) String() string {
	switch o {
	case Stopped:
		return "stopped"
	case DurationElapsed:
		return "duration_elapsed"
	case ServerExited:
		return "server_exited"
	case DeviceChanged:
		return "device_changed"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Collector polls one process and, optionally, one device.
type Collector struct {
	cfg        Config
	identity   artifact.TelemetryIdentity
	clock      string
	intervalMS int64
	deviceUUID string // the UUID the device had at start ("GPU-…" or "MIG-…")
	mig        bool
	warnedV1   bool
	memSource  string // source of the last memory reading
	// noEnergy and noPower are set once NVML answered that the device has no energy
	// counter or power reading (ErrUnsupported, warned once): they are not read again.
	noEnergy, noPower bool
}

// OpenDevice initialises nothing; it looks up the device named by uuid (a GPU
// or MIG UUID) or, when uuid is "", by NVML index. lib must be Init-ed.
// Errors wrap gpu.ErrNotFound for an unknown device.
func OpenDevice(lib gpu.Library, uuid string, index int) (gpu.Device, error) {
	if uuid != "" {
		return lib.DeviceByUUID(uuid)
	}
	return lib.DeviceByIndex(index)
}

// New validates cfg, reads the device identity, and checks that NVML lists
// the process on the device (a warning through cfg.Warn naming a descendant
// PID that owns the device, if any; never an error). Errors describe an
// unusable configuration or an unreadable device identity.
func New(ctx context.Context, cfg Config) (*Collector, error) {
	switch {
	case cfg.RunID == "":
		return nil, errors.New("run id is required")
	case cfg.Interval < time.Millisecond:
		return nil, fmt.Errorf("interval %v is below 1 ms", cfg.Interval)
	case cfg.Duration < 0:
		return nil, fmt.Errorf("duration %v is negative", cfg.Duration)
	case cfg.Process == nil || cfg.Process.PID() < 1 || cfg.Process.StartNS() < 1:
		return nil, errors.New("a running server process is required")
	case cfg.Sink == nil:
		return nil, errors.New("emit is required")
	}
	if err := checkGroup(cfg); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Warn == nil {
		cfg.Warn = func(string) {}
	}
	c := &Collector{
		cfg:        cfg,
		clock:      cfg.Host.ClockDomain(),
		memSource:  SourceNVMLv2,
		intervalMS: max(1, int64(cfg.Interval/time.Millisecond)),
		identity: artifact.TelemetryIdentity{
			Host:           cfg.Host.Name,
			PID:            int64(cfg.Process.PID()),
			ProcessStartNS: cfg.Process.StartNS(),
			ReplicaID:      cfg.ReplicaID,
			Rank:           cfg.Rank,
			BootID:         cfg.Host.BootID,
			GroupID:        cfg.GroupID,
			WorldSize:      cfg.WorldSize,
		},
	}
	if cfg.Device != nil {
		if err := c.readDeviceIdentity(); err != nil {
			return nil, err
		}
		c.checkProcessOnDevice(ctx)
		if c.mig {
			cfg.Warn(fmt.Sprintf("%s is a MIG instance: NVML's energy counter and power draw are the whole GPU's, so neither is recorded", c.deviceUUID))
		}
	}
	return c, nil
}

func checkGroup(cfg Config) error {
	if cfg.Rank != nil && *cfg.Rank < 0 {
		return fmt.Errorf("rank %d is negative", *cfg.Rank)
	}
	if cfg.GroupID == nil {
		if cfg.WorldSize != nil {
			return errors.New("world size needs a group id")
		}
		return nil
	}
	if *cfg.GroupID == "" {
		return errors.New("group id is empty")
	}
	if cfg.Rank == nil || cfg.WorldSize == nil {
		return errors.New("a group id needs a rank and a world size")
	}
	if *cfg.WorldSize < 1 {
		return fmt.Errorf("world size %d is below 1", *cfg.WorldSize)
	}
	if *cfg.Rank >= *cfg.WorldSize {
		return fmt.Errorf("rank %d is not below world size %d", *cfg.Rank, *cfg.WorldSize)
	}
	return nil
}

// readDeviceIdentity fills device_uuid (the physical GPU's UUID) and, for a
// MIG instance, gpu_instance_id (the MIG device UUID).
func (c *Collector) readDeviceIdentity() error {
	u, err := c.cfg.Device.UUID()
	if err != nil {
		return fmt.Errorf("reading device UUID: %w", err)
	}
	if u == "" {
		return errors.New("device reports an empty UUID")
	}
	mig, err := c.cfg.Device.MIG()
	if err != nil {
		return fmt.Errorf("reading MIG identity of %s: %w", u, err)
	}
	c.deviceUUID = u
	if mig != nil {
		if mig.ParentUUID == "" {
			return fmt.Errorf("MIG device %s reports no parent GPU UUID", u)
		}
		c.mig = true
		parent, inst := mig.ParentUUID, u
		c.identity.DeviceUUID, c.identity.GPUInstanceID = &parent, &inst
	} else {
		dev := u
		c.identity.DeviceUUID = &dev
	}
	return nil
}

func (c *Collector) checkProcessOnDevice(ctx context.Context) {
	pid := c.cfg.Process.PID()
	procs, err := c.cfg.Device.ComputeProcesses()
	if err != nil {
		c.cfg.Warn(fmt.Sprintf("could not check that NVML lists PID %d on %s: %v", pid, c.deviceUUID, err))
		return
	}
	listed := make([]int, 0, len(procs))
	for _, p := range procs {
		if p.PID == pid {
			return
		}
		listed = append(listed, p.PID)
	}
	msg := fmt.Sprintf("NVML does not list PID %d on %s", pid, c.deviceUUID)
	var owners []int
	for _, d := range c.cfg.Process.Descendants(ctx, 256) {
		if slices.Contains(listed, d) {
			owners = append(owners, d)
		}
	}
	if len(owners) > 0 {
		msg += fmt.Sprintf("; its child PID %d owns GPU work there — pass --pid %d to measure that worker", owners[0], owners[0])
	} else {
		msg += " (inside a container NVML can report host PIDs; check the PID and device)"
	}
	c.cfg.Warn(msg)
}

// Identity returns the identity block written on every sample.
func (c *Collector) Identity() artifact.TelemetryIdentity { return c.identity }

// IntervalMS returns the interval recorded on every sample, in whole ms (≥ 1).
func (c *Collector) IntervalMS() int64 { return c.intervalMS }

// Run polls once immediately and then every Interval until the context is
// cancelled, Duration has passed, the process exits or the device changes.
// A non-nil error (from the sink) comes with the outcome reached so far.
func (c *Collector) Run(ctx context.Context) (Outcome, error) {
	var deadline <-chan time.Time
	if c.cfg.Duration > 0 {
		t := time.NewTimer(c.cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return Stopped, nil
		}
		if out, done, err := c.Poll(ctx); err != nil || done {
			return out, err
		}
		select {
		case <-ctx.Done():
			return Stopped, nil
		case <-deadline:
			return DurationElapsed, nil
		case <-tick.C:
		}
	}
}

// Poll takes one round of readings and emits their samples. done is true
// when the collection must end (ServerExited or DeviceChanged, after the one
// invalid sample); err is the sink's error.
func (c *Collector) Poll(ctx context.Context) (out Outcome, done bool, err error) {
	now := c.cfg.Now().UnixNano()
	pid := c.cfg.Process.PID()
	running, rerr := c.cfg.Process.Running(ctx)
	if rerr == nil && !running {
		detail := fmt.Sprintf("server process %d (started %d ns) exited; collection stopped", pid, c.identity.ProcessStartNS)
		return ServerExited, true, c.emit(now, artifact.MetricProcessRSSBytes, SourcePsutil, artifact.SampleInvalid, 0, &detail)
	}
	rss, err := c.cfg.Process.RSSBytes(ctx)
	if err != nil {
		if rerr != nil {
			err = fmt.Errorf("%w (liveness check: %v)", err, rerr)
		}
		err = c.missing(now, artifact.MetricProcessRSSBytes, SourcePsutil, err)
	} else {
		err = c.value(now, artifact.MetricProcessRSSBytes, SourcePsutil, rss, nil)
	}
	if err != nil || c.cfg.Device == nil {
		return Stopped, false, err
	}
	return c.pollDevice(now)
}

func (c *Collector) pollDevice(now int64) (Outcome, bool, error) {
	usedM, resM := artifact.MetricDeviceMemoryUsedBytes, artifact.MetricDeviceMemoryReservedBytes
	if c.mig {
		usedM, resM = artifact.MetricInstanceMemoryUsedBytes, artifact.MetricInstanceMemoryReservedBytes
	}
	u, err := c.cfg.Device.UUID()
	if err == nil && u != c.deviceUUID {
		detail := fmt.Sprintf("GPU UUID changed from %s to %s; collection stopped", c.deviceUUID, u)
		return DeviceChanged, true, c.emit(now, usedM, c.memSource, artifact.SampleInvalid, 0, &detail)
	}
	if err != nil {
		// Without the UUID the readings cannot be tied to the device.
		err = fmt.Errorf("reading device UUID: %w", err)
		for _, m := range []string{usedM, resM, artifact.MetricProcessGPUUsedBytes} {
			if e := c.missing(now, m, c.sourceFor(m), err); e != nil {
				return Stopped, false, e
			}
		}
		return Stopped, false, nil
	}
	if err := c.pollMemory(now, usedM, resM); err != nil {
		return Stopped, false, err
	}
	if err := c.pollProcessGPU(now); err != nil {
		return Stopped, false, err
	}
	return Stopped, false, c.pollEnergy(now)
}

// pollEnergy reads the GPU's energy counter and power draw (not for a MIG instance, whose
// readings would be the whole GPU's). A device that does not support one is warned about
// once and not read again; any other error is a missing sample.
func (c *Collector) pollEnergy(now int64) error {
	if c.mig {
		return nil
	}
	if !c.noEnergy {
		mj, err := c.cfg.Device.EnergyMillijoules()
		switch {
		case errors.Is(err, gpu.ErrUnsupported):
			c.noEnergy = true
			c.cfg.Warn(fmt.Sprintf("NVML has no energy counter for %s (%v): energy is not recorded", c.deviceUUID, err))
		case err != nil:
			if e := c.missing(now, artifact.MetricDeviceEnergyMillijoules, SourceNVMLEnergy, err); e != nil {
				return e
			}
		default:
			if e := c.value(now, artifact.MetricDeviceEnergyMillijoules, SourceNVMLEnergy, mj, nil); e != nil {
				return e
			}
		}
	}
	if c.noPower {
		return nil
	}
	mw, err := c.cfg.Device.PowerMilliwatts()
	switch {
	case errors.Is(err, gpu.ErrUnsupported):
		c.noPower = true
		c.cfg.Warn(fmt.Sprintf("NVML reports no power draw for %s (%v): power is not recorded", c.deviceUUID, err))
		return nil
	case err != nil:
		return c.missing(now, artifact.MetricDevicePowerMilliwatts, SourceNVMLPower, err)
	}
	return c.value(now, artifact.MetricDevicePowerMilliwatts, SourceNVMLPower, uint64(mw), nil)
}

// sourceFor names the reader of a GPU metric: the process list, or the
// memory call last used (v2 until a reading came from v1).
func (c *Collector) sourceFor(metric string) string {
	if metric == artifact.MetricProcessGPUUsedBytes {
		return SourceNVMLProcesses
	}
	return c.memSource
}

func (c *Collector) pollMemory(now int64, usedM, resM string) error {
	mem, err := c.cfg.Device.Memory()
	if err != nil {
		if e := c.missing(now, usedM, c.memSource, err); e != nil {
			return e
		}
		return c.missing(now, resM, c.memSource, err)
	}
	if mem.Version == 2 && mem.ReservedBytes != nil {
		c.memSource = SourceNVMLv2
		if err := c.value(now, usedM, SourceNVMLv2, mem.UsedBytes, nil); err != nil {
			return err
		}
		return c.value(now, resM, SourceNVMLv2, *mem.ReservedBytes, nil)
	}
	c.memSource = SourceNVMLv1
	if !c.warnedV1 {
		c.warnedV1 = true
		c.cfg.Warn(fmt.Sprintf("NVML memory v2 unavailable on %s (%s); falling back to v1: used memory includes driver-reserved memory and reserved memory is not reported", c.deviceUUID, mem.V1Reason))
	}
	detail := fmt.Sprintf("v1 fallback (%s): used includes driver-reserved memory", mem.V1Reason)
	if err := c.value(now, usedM, SourceNVMLv1, mem.UsedBytes, &detail); err != nil {
		return err
	}
	rd := fmt.Sprintf("v1 fallback (%s) does not report reserved memory", mem.V1Reason)
	return c.emit(now, resM, SourceNVMLv1, artifact.SampleMissing, 0, &rd)
}

func (c *Collector) pollProcessGPU(now int64) error {
	m := artifact.MetricProcessGPUUsedBytes
	procs, err := c.cfg.Device.ComputeProcesses()
	if err != nil {
		return c.missing(now, m, SourceNVMLProcesses, err)
	}
	pid := c.cfg.Process.PID()
	for _, p := range procs {
		if p.PID != pid {
			continue
		}
		if p.UsedBytes == nil {
			d := "NVML does not report this process's GPU memory (value not available)"
			return c.emit(now, m, SourceNVMLProcesses, artifact.SampleMissing, 0, &d)
		}
		return c.value(now, m, SourceNVMLProcesses, *p.UsedBytes, nil)
	}
	d := fmt.Sprintf("NVML does not list PID %d among the device's compute processes", pid)
	return c.emit(now, m, SourceNVMLProcesses, artifact.SampleMissing, 0, &d)
}

func (c *Collector) missing(now int64, metric, source string, err error) error {
	d := err.Error()
	return c.emit(now, metric, source, artifact.SampleMissing, 0, &d)
}

func (c *Collector) value(now int64, metric, source string, v uint64, detail *string) error {
	if v > math.MaxInt64 {
		d := fmt.Sprintf("reading %d does not fit a signed 64-bit integer", v)
		return c.emit(now, metric, source, artifact.SampleInvalid, 0, &d)
	}
	return c.emit(now, metric, source, artifact.SampleValid, int64(v), detail)
}

// emit writes one sample; value is used only for the valid state.
func (c *Collector) emit(now int64, metric, source, state string, value int64, detail *string) error {
	scope, owner, _ := artifact.MetricScope(metric)
	s := artifact.TelemetrySample{
		Scope:        scope,
		ClockDomain:  c.clock,
		CounterOwner: owner,
		RunID:        c.cfg.RunID,
		Identity:     c.identity,
		ObservedAtNS: now,
		Metric:       metric,
		State:        state,
		Source:       source,
		IntervalMS:   c.intervalMS,
		Detail:       detail,
		Provenance:   artifact.ProvenanceObserved,
	}
	if state == artifact.SampleValid {
		switch artifact.ValueField(metric) {
		case "value_millijoules":
			s.ValueMillijoules = &value
		case "value_milliwatts":
			s.ValueMilliwatts = &value
		default:
			s.ValueBytes = &value
		}
	}
	return c.cfg.Sink.Write(&s)
}
