package artifact

// Scopes of infer.telemetry_sample (inference_telemetry_v1.schema.json
// "scope"): what the counter measures.
const (
	ScopeServerProcess = "server_process"
	ScopeGPUDevice     = "gpu_device"
	ScopeGPUInstance   = "gpu_instance"
)

// Counter owners of infer.telemetry_sample ("counter_owner"): who keeps the
// counter.
const (
	OwnerOperatingSystemProcess = "operating_system_process"
	OwnerGPUProcess             = "gpu_process"
	OwnerAllocator              = "allocator"
	OwnerEngineCache            = "engine_cache"
	OwnerGPUDevice              = "gpu_device"
	OwnerGPUInstance            = "gpu_instance"
)

// Metrics of infer.telemetry_sample ("metric"). The memory metrics' values are bytes
// (value_bytes); the GPU's cumulative energy counter is millijoules (value_millijoules) and
// its power draw milliwatts (value_milliwatts).
const (
	MetricProcessRSSBytes             = "process_rss_bytes"
	MetricProcessGPUUsedBytes         = "process_gpu_used_bytes"
	MetricAllocatorAllocatedBytes     = "allocator_allocated_bytes"
	MetricAllocatorReservedBytes      = "allocator_reserved_bytes"
	MetricEngineCacheOccupiedBytes    = "engine_cache_occupied_bytes"
	MetricDeviceMemoryUsedBytes       = "device_memory_used_bytes"
	MetricDeviceMemoryReservedBytes   = "device_memory_reserved_bytes"
	MetricInstanceMemoryUsedBytes     = "instance_memory_used_bytes"
	MetricInstanceMemoryReservedBytes = "instance_memory_reserved_bytes"
	// MetricDeviceEnergyMillijoules is the GPU's total energy consumption since the driver
	// was last loaded (NVML nvmlDeviceGetTotalEnergyConsumption, mJ): a cumulative counter
	// that a driver reload resets.
	MetricDeviceEnergyMillijoules = "device_energy_consumed_millijoules"
	// MetricDevicePowerMilliwatts is the GPU's power draw (NVML nvmlDeviceGetPowerUsage,
	// mW), as the driver averages it over its own short window.
	MetricDevicePowerMilliwatts = "device_power_usage_milliwatts"
)

// ValueField names the field of infer.telemetry_sample that carries a metric's reading:
// "value_millijoules" for the energy counter, "value_milliwatts" for power, "value_bytes"
// for every memory metric.
func ValueField(metric string) string {
	switch metric {
	case MetricDeviceEnergyMillijoules:
		return "value_millijoules"
	case MetricDevicePowerMilliwatts:
		return "value_milliwatts"
	}
	return "value_bytes"
}

// Sample states of infer.telemetry_sample ("state"). Only SampleValid
// carries a value; every other state has a null value_bytes.
const (
	SampleValid   = "valid"
	SampleMissing = "missing"
	SampleStale   = "stale"
	SampleInvalid = "invalid"
)

// Provenances of infer.telemetry_sample ("provenance").
const (
	ProvenanceObserved  = "observed"
	ProvenanceReported  = "reported"
	ProvenanceEstimated = "estimated"
)

// MetricScope returns the scope and counter owner the schema ties to a
// metric (inference_telemetry_v1.schema.json allOf), and false for an
// unknown metric.
func MetricScope(metric string) (scope, owner string, ok bool) {
	switch metric {
	case MetricProcessRSSBytes:
		return ScopeServerProcess, OwnerOperatingSystemProcess, true
	case MetricProcessGPUUsedBytes:
		return ScopeServerProcess, OwnerGPUProcess, true
	case MetricAllocatorAllocatedBytes, MetricAllocatorReservedBytes:
		return ScopeServerProcess, OwnerAllocator, true
	case MetricEngineCacheOccupiedBytes:
		return ScopeServerProcess, OwnerEngineCache, true
	case MetricDeviceMemoryUsedBytes, MetricDeviceMemoryReservedBytes, MetricDeviceEnergyMillijoules, MetricDevicePowerMilliwatts:
		return ScopeGPUDevice, OwnerGPUDevice, true
	case MetricInstanceMemoryUsedBytes, MetricInstanceMemoryReservedBytes:
		return ScopeGPUInstance, OwnerGPUInstance, true
	}
	return "", "", false
}

// TelemetrySample is the infer.telemetry_sample v1 record: one reading of
// one server-side counter, written by `inferprobe collect-server`
// in the format of Stormlog's inference_telemetry_v1 JSON Schema, whose
// field names it keeps, extended by two optional fields for the GPU's energy
// counter and power draw (value_millijoules, value_milliwatts: present only on
// those metrics' samples). Times are Unix epoch nanoseconds in ClockDomain;
// memory values are bytes. The semantic checks of the schema (enums, the value/state rule,
// the metric→scope/owner rule) belong to the join package, which reads
// these files.
type TelemetrySample struct {
	// Scope is one of the Scope* constants.
	Scope string `json:"scope"`
	// ClockDomain is "{host}/{boot_id}/unix_epoch_ns", or
	// "{host}/unix_epoch_ns" without a boot id (see ClockDomain).
	ClockDomain string `json:"clock_domain"`
	// CounterOwner is one of the Owner* constants.
	CounterOwner string `json:"counter_owner"`
	// RunID is the run the collector was started for (--run-id).
	RunID    string            `json:"run_id"`
	Identity TelemetryIdentity `json:"identity"`
	// ObservedAtNS is when the reading was taken (Unix epoch ns).
	ObservedAtNS int64 `json:"observed_at_ns"`
	// Metric is one of the Metric* constants.
	Metric string `json:"metric"`
	// ValueBytes is a memory reading in bytes; null unless State is SampleValid, and
	// always null for the energy and power metrics.
	ValueBytes *int64 `json:"value_bytes"`
	// ValueMillijoules is the energy counter's reading (MetricDeviceEnergyMillijoules),
	// millijoules; omitted on every other metric's sample and when the state is not valid.
	ValueMillijoules *int64 `json:"value_millijoules,omitempty"`
	// ValueMilliwatts is the power reading (MetricDevicePowerMilliwatts), milliwatts;
	// omitted on every other metric's sample and when the state is not valid.
	ValueMilliwatts *int64 `json:"value_milliwatts,omitempty"`
	// State is one of the Sample* state constants.
	State string `json:"state"`
	// Source names the reader ("psutil", "nvml.v2", "nvml.v1", ...).
	Source string `json:"source"`
	// IntervalMS is the polling interval in milliseconds (≥ 1).
	IntervalMS int64 `json:"interval_ms"`
	// Detail explains a non-valid state or a fallback; null when none.
	Detail *string `json:"detail"`
	// Provenance is one of the Provenance* constants.
	Provenance string `json:"provenance"`
}

// TelemetryIdentity is the identity block of infer.telemetry_sample: which
// process, GPU and replica the sample belongs to. Unknown values are null.
// GroupID set requires Rank and WorldSize; without GroupID, WorldSize is
// null.
type TelemetryIdentity struct {
	Host string `json:"host"`
	// PID is the server process id (≥ 1).
	PID int64 `json:"pid"`
	// ProcessStartNS is the process start time, Unix epoch ns (≥ 1).
	ProcessStartNS int64   `json:"process_start_ns"`
	DeviceUUID     *string `json:"device_uuid"`
	// GPUInstanceID names a MIG instance; it requires DeviceUUID.
	GPUInstanceID *string `json:"gpu_instance_id"`
	ReplicaID     *string `json:"replica_id"`
	Rank          *int64  `json:"rank"`
	BootID        *string `json:"boot_id"`
	GroupID       *string `json:"group_id,omitempty"`
	WorldSize     *int64  `json:"world_size,omitempty"`
}

func (TelemetrySample) selfEncoding() {}

// RecordKind returns KindTelemetrySample.
func (TelemetrySample) RecordKind() Kind { return KindTelemetrySample }

// MarshalJSON writes the record with its event_type and schema_version.
func (t TelemetrySample) MarshalJSON() ([]byte, error) {
	type plain TelemetrySample
	return withKind(KindTelemetrySample, plain(t))
}
