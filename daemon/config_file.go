package daemon

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Duration is a YAML duration: Go's form ("90s", "1h30m") or Prometheus's ("5m", "1d", "1w").
type Duration time.Duration

// UnmarshalYAML reads a duration string; a bare number is refused (units are required).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration with a unit (e.g. 30s, 5m, 1h), not a %s", n.Line, kindName(n.Kind))
	}
	if n.Tag == "!!int" && n.Value == "0" {
		*d = 0 // 0 needs no unit
		return nil
	}
	if n.Decode(&s) != nil || n.Tag != "!!str" {
		return fmt.Errorf("line %d: want a duration with a unit (e.g. 30s, 5m, 1h), not %q", n.Line, n.Value)
	}
	if v, err := time.ParseDuration(s); err == nil {
		*d = Duration(v)
		return nil
	}
	v, err := model.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 30s, 5m, 1h, 1d)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// Count is a YAML whole number: 2.5, 1e3 or "2" are refused rather than truncated.
type Count int

// UnmarshalYAML reads a plain integer scalar.
func (c *Count) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		return fmt.Errorf("line %d: want a whole number, not %q", n.Line, n.Value)
	}
	*c = Count(v)
	return nil
}

// File is the configuration file as written. Every field is optional except targets and
// probes; pointers distinguish "unset" (the default) from an explicit empty value.
type File struct {
	// Listen is the /metrics listener (default 127.0.0.1:9464).
	Listen *string `yaml:"listen"`
	// WebConfigFile is an exporter-toolkit web configuration (TLS, basic auth) applied to
	// /metrics and to the OTLP/HTTP receiver.
	WebConfigFile string        `yaml:"web_config_file"`
	Receiver      ReceiverFile  `yaml:"receiver"`
	Artifacts     ArtifactsFile `yaml:"artifacts"`
	SLOs          []SLOFile     `yaml:"slos"`
	Targets       []TargetFile  `yaml:"targets"`
	Probes        []ProbeFile   `yaml:"probes"`
}

// ReceiverFile is the receiver section.
type ReceiverFile struct {
	// HTTPListen / GRPCListen: OTLP listeners; "" disables one (defaults 127.0.0.1:4318 /
	// 127.0.0.1:4317).
	HTTPListen *string `yaml:"http_listen"`
	GRPCListen *string `yaml:"grpc_listen"`
}

// ArtifactsFile is the artifacts section. Dir is relative to the configuration file's
// directory unless absolute.
type ArtifactsFile struct {
	Dir string `yaml:"dir"`
	// Keep is the most artifacts kept per probe (0: no count limit; default 100).
	Keep *Count `yaml:"keep"`
	// MaxAge removes artifacts older than it (0: no age limit; default 7d).
	MaxAge *Duration `yaml:"max_age"`
}

// SLOFile is one SLO policy: criteria in the --slo form, or a policy file in analyze's format.
type SLOFile struct {
	Name     string   `yaml:"name"`
	Criteria []string `yaml:"criteria"`
	File     string   `yaml:"file"`
	// Objective is the attainment target the burn-rate alerts use when the policy has no
	// attainment_target (default 0.99).
	Objective *float64 `yaml:"objective"`
}

// TargetFile is one inference server.
type TargetFile struct {
	Name           string    `yaml:"name"`
	Endpoint       string    `yaml:"endpoint"`
	BaseURL        string    `yaml:"base_url"`
	Model          string    `yaml:"model"`
	APIKeyEnv      string    `yaml:"api_key_env"`
	MetricsURL     string    `yaml:"metrics_url"`
	ScrapeInterval *Duration `yaml:"scrape_interval"`
}

// ProbeFile is one probe: a workload on a schedule against a target. The workload mapping
// is kept as a node: loadProbe decodes it into a loadgen.Workload once it has refused the
// keys the daemon sets itself, and names the key and line of every error with it.
type ProbeFile struct {
	Name       string    `yaml:"name"`
	Kind       string    `yaml:"kind"`
	Target     string    `yaml:"target"`
	SLO        string    `yaml:"slo"`
	Every      *Duration `yaml:"every"`
	Continuous bool      `yaml:"continuous"`
	Workload   yaml.Node `yaml:"workload"`
	SpansDrain *Duration `yaml:"spans_drain"`
	// Tables writes each run's tables (inferprobe tables) beside its artifact (run probes
	// only).
	Tables bool `yaml:"tables"`
	// Search is a search probe's capacity search (kind: search only).
	Search *SearchFile `yaml:"search"`
}

// SearchFile is a search probe's search block: `inferprobe search`'s own flags by name
// (over, min, max, tolerance, confidence, quantile, max_probes, max_requests_per_probe,
// max_lag), same meanings and defaults. Every key is optional.
type SearchFile struct {
	Over                string    `yaml:"over" json:"over,omitempty"`
	Min                 *float64  `yaml:"min" json:"min,omitempty"`
	Max                 *float64  `yaml:"max" json:"max,omitempty"`
	Tolerance           *float64  `yaml:"tolerance" json:"tolerance,omitempty"`
	Confidence          *float64  `yaml:"confidence" json:"confidence,omitempty"`
	Quantile            *float64  `yaml:"quantile" json:"quantile,omitempty"`
	MaxProbes           *Count    `yaml:"max_probes" json:"max_probes,omitempty"`
	MaxRequestsPerProbe *Count    `yaml:"max_requests_per_probe" json:"max_requests_per_probe,omitempty"`
	MaxLag              *Duration `yaml:"max_lag" json:"max_lag,omitempty"`
}
