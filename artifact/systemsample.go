package artifact

// SystemSample is an infer.system_sample v1 record: one client-local reading. Device fields
// are null when no device was read; it is never server memory. Device memory is in bytes:
// free is the reader's own free figure (NVML's, or nvidia-smi's), never total − used.
type SystemSample struct {
	SessionID        string  `json:"session_id"`
	TimestampNS      int64   `json:"timestamp_ns"`
	Sampler          string  `json:"sampler"`
	DeviceID         *string `json:"device_id"`
	DeviceName       *string `json:"device_name"`
	DeviceUsedBytes  *int64  `json:"device_used_bytes"`
	DeviceFreeBytes  *int64  `json:"device_free_bytes"`
	DeviceTotalBytes *int64  `json:"device_total_bytes"`
	// DeviceMemorySource names the call that read the device memory fields, spelled as
	// infer.telemetry_sample's source: "nvml.v2" (used excludes driver-reserved memory),
	// "nvml.v1" (used includes it), "nvidia-smi"; null when no device memory was read.
	DeviceMemorySource    *string        `json:"device_memory_source"`
	GPUUtilizationPercent *float64       `json:"gpu_utilization_percent"`
	ProcessRSSBytes       *int64         `json:"process_rss_bytes"`
	Metadata              map[string]any `json:"metadata"`
	ObservationScope      string         `json:"observation_scope"` // always "client_local"
}

// ScopeClientLocal is the observation_scope of an infer.system_sample.
const ScopeClientLocal = "client_local"

func (SystemSample) selfEncoding() {}

// RecordKind returns KindSystemSample.
func (SystemSample) RecordKind() Kind { return KindSystemSample }

// MarshalJSON writes the record with its event_type and schema_version; nil
// metadata is written as {}.
func (s SystemSample) MarshalJSON() ([]byte, error) {
	type plain SystemSample
	p := plain(s)
	if p.Metadata == nil {
		p.Metadata = map[string]any{}
	}
	return withKind(KindSystemSample, p)
}
