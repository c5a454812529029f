package join

// Reading and validating server telemetry files: JSONL of infer.telemetry_sample v1, one
// counter reading per line, taken by a collector on the server host.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/inferprobe/inferprobe/artifact"
)

// ErrInvalidTelemetry marks a --server-telemetry file that is missing, unreadable,
// unparsable or breaks the schema, and a malformed clock alignment (flags or
// infer.clock_alignment records). It is invalid input: the command exits 5. Test with
// errors.Is.
var ErrInvalidTelemetry = errors.New("invalid server telemetry")

// Limits of ReadTelemetry: a line over MaxTelemetryLineBytes or a file with
// more than MaxTelemetrySamples records is invalid input.
const (
	MaxTelemetryLineBytes = 64 << 10
	MaxTelemetrySamples   = 10_000_000
)

// ReadTelemetryFile reads a collector file (JSONL of infer.telemetry_sample v1); see
// ReadTelemetry. Every error wraps ErrInvalidTelemetry and names the file.
func ReadTelemetryFile(path string) ([]artifact.TelemetrySample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
	}
	defer f.Close()
	out, err := ReadTelemetry(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ReadTelemetry reads JSONL of infer.telemetry_sample v1 records. Blank lines are skipped;
// any other kind, a line over MaxTelemetryLineBytes, a truncated last line, a float where
// the schema wants an integer, or a sample that fails ValidateSample is an error wrapping
// ErrInvalidTelemetry. A file without samples is invalid too.
func ReadTelemetry(r io.Reader) ([]artifact.TelemetrySample, error) {
	var out []artifact.TelemetrySample
	st, err := artifact.Reader{MaxLineBytes: MaxTelemetryLineBytes}.Read(r, func(rec artifact.Line) error {
		s, ok := rec.Value.(*artifact.TelemetrySample)
		if !ok {
			return fmt.Errorf("line %d: %s is not an infer.telemetry_sample v1 record", rec.Line, rec.Kind)
		}
		if err := strictSampleJSON(rec.Raw); err != nil {
			return fmt.Errorf("line %d: %w", rec.Line, err)
		}
		if err := ValidateSample(s); err != nil {
			return fmt.Errorf("line %d: %w", rec.Line, err)
		}
		if len(out) >= MaxTelemetrySamples {
			return fmt.Errorf("more than %d samples", MaxTelemetrySamples)
		}
		out = append(out, *s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTelemetry, err)
	}
	if st.Truncated != nil {
		return nil, fmt.Errorf("%w: line %d is cut short (%d bytes, no trailing newline); a telemetry file must end with a complete line", ErrInvalidTelemetry, st.Truncated.Line, st.Truncated.Bytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no infer.telemetry_sample records", ErrInvalidTelemetry)
	}
	return out, nil
}

// Keys of infer.telemetry_sample v1: the first sampleRequired top-level keys are required,
// value_millijoules and value_milliwatts (the energy and power readings) are allowed, and no
// other is (additionalProperties false); identity needs the first eight of its keys and
// allows group_id and world_size.
var (
	sampleKeys = []string{"event_type", "schema_version", "scope", "clock_domain", "counter_owner", "run_id", "identity",
		"observed_at_ns", "metric", "value_bytes", "state", "source", "interval_ms", "detail", "provenance",
		"value_millijoules", "value_milliwatts"}
	identityKeys = []string{"host", "pid", "process_start_ns", "device_uuid", "gpu_instance_id", "replica_id", "rank", "boot_id",
		"group_id", "world_size"}
)

// sampleRequired is how many of sampleKeys every sample must have.
const sampleRequired = 15

// strictSampleJSON checks the key sets the schema fixes (the typed decode has already
// checked every value's type, and encoding/json would read a missing key as zero).
func strictSampleJSON(raw []byte) error {
	if err := keySet(raw, sampleKeys, sampleRequired, ""); err != nil {
		return err
	}
	var top struct {
		Identity json.RawMessage `json:"identity"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return err
	}
	return keySet(top.Identity, identityKeys, 8, "identity.")
}

// keySet checks that the object in raw has the first nRequired of keys and no key outside
// keys; errors name the key with prefix before it.
func keySet(raw []byte, keys []string, nRequired int, prefix string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%sobject expected: %w", prefix, err)
	}
	for i, k := range keys {
		if _, ok := m[k]; !ok && i < nRequired {
			return fmt.Errorf("missing field %s%s", prefix, k)
		}
	}
	if len(m) > len(keys) || len(m) > nRequired {
		for k := range m {
			if !slices.Contains(keys, k) {
				return fmt.Errorf("unknown field %s%s", prefix, k)
			}
		}
	}
	return nil
}

// ValidateSample checks what the infer.telemetry_sample v1 schema and the loader require
// of one sample (a record that passes the schema's types can still fail here): enums, the
// metric's scope and counter owner, a value exactly when the state is valid, non-negative
// bytes, positive times, pid and interval, the identity rules of validateIdentity, and a
// clock_domain that is exactly {host}/{boot_id}/unix_epoch_ns ({host}/unix_epoch_ns
// without a boot id). The error says which rule failed; it does not wrap
// ErrInvalidTelemetry.
func ValidateSample(s *artifact.TelemetrySample) error {
	scope, owner, ok := artifact.MetricScope(s.Metric)
	if !ok {
		return fmt.Errorf("unknown metric %q", s.Metric)
	}
	if s.Scope != scope || s.CounterOwner != owner {
		return fmt.Errorf("metric %s needs scope %s and counter_owner %s, got %q and %q", s.Metric, scope, owner, s.Scope, s.CounterOwner)
	}
	if err := validateValue(s); err != nil {
		return err
	}
	switch s.Provenance {
	case artifact.ProvenanceObserved, artifact.ProvenanceReported, artifact.ProvenanceEstimated:
	default:
		return fmt.Errorf("unknown provenance %q", s.Provenance)
	}
	if s.RunID == "" || s.Source == "" {
		return errors.New("run_id and source must be non-empty")
	}
	if s.ObservedAtNS < 1 || s.IntervalMS < 1 {
		return errors.New("observed_at_ns and interval_ms must be at least 1")
	}
	if err := validateIdentity(s); err != nil {
		return err
	}
	if want := artifact.ClockDomain(s.Identity.Host, s.Identity.BootID); s.ClockDomain != want {
		return fmt.Errorf("clock_domain %q must be %q", s.ClockDomain, want)
	}
	return nil
}

// validateValue checks the value/state rule: a valid sample has its metric's value field
// (artifact.ValueField) set and ≥ 0, every other state has it null, and the other value
// fields are always null (absent).
func validateValue(s *artifact.TelemetrySample) error {
	values := map[string]*int64{"value_bytes": s.ValueBytes, "value_millijoules": s.ValueMillijoules, "value_milliwatts": s.ValueMilliwatts}
	field := artifact.ValueField(s.Metric)
	for name, v := range values {
		if name != field && v != nil {
			return fmt.Errorf("metric %s carries its reading in %s, not %s", s.Metric, field, name)
		}
	}
	v := values[field]
	switch s.State {
	case artifact.SampleValid:
		if v == nil {
			return fmt.Errorf("a valid sample needs %s", field)
		}
		if *v < 0 {
			return fmt.Errorf("%s %d is negative", field, *v)
		}
	case artifact.SampleMissing, artifact.SampleStale, artifact.SampleInvalid:
		if v != nil {
			return fmt.Errorf("a %s sample must have a null %s", s.State, field)
		}
	default:
		return fmt.Errorf("unknown state %q", s.State)
	}
	return nil
}

// validateIdentity checks a sample's identity: host, pid ≥ 1 and process_start_ns ≥ 1;
// optional strings null or non-empty; rank ≥ 0; a device_uuid for every metric but process
// RSS; device_uuid and gpu_instance_id together for a GPU instance; and a group member
// (group_id set) with rank and world_size, rank < world_size, world_size only with a
// group_id.
func validateIdentity(s *artifact.TelemetrySample) error {
	id := &s.Identity
	if id.Host == "" || id.PID < 1 || id.ProcessStartNS < 1 {
		return errors.New("identity needs host, pid ≥ 1 and process_start_ns ≥ 1")
	}
	for i, p := range [...]*string{id.DeviceUUID, id.GPUInstanceID, id.ReplicaID, id.BootID, id.GroupID} {
		if p != nil && *p == "" {
			return fmt.Errorf("identity.%s must be null or non-empty", [...]string{"device_uuid", "gpu_instance_id", "replica_id", "boot_id", "group_id"}[i])
		}
	}
	if id.Rank != nil && *id.Rank < 0 {
		return errors.New("identity.rank must be ≥ 0")
	}
	if s.Metric != artifact.MetricProcessRSSBytes && id.DeviceUUID == nil {
		return fmt.Errorf("metric %s needs identity.device_uuid", s.Metric)
	}
	if (id.GPUInstanceID != nil || s.Scope == artifact.ScopeGPUInstance) && (id.DeviceUUID == nil || id.GPUInstanceID == nil) {
		return errors.New("a GPU instance needs device_uuid and gpu_instance_id")
	}
	if id.GroupID != nil {
		if id.Rank == nil || id.WorldSize == nil {
			return errors.New("a group member needs rank and world_size")
		}
		if *id.WorldSize < 1 || *id.Rank >= *id.WorldSize {
			return fmt.Errorf("rank %d must be below world_size %d", *id.Rank, *id.WorldSize)
		}
	} else if id.WorldSize != nil {
		return errors.New("world_size needs group_id")
	}
	return nil
}
