// Package daemon is `inferprobe serve`: the continuous-profiling daemon. It reads a YAML
// configuration (targets, probes, SLO policies, listeners, artifact retention), runs each
// probe on its schedule — one probe run is one artifact, written by the same writer and
// runner as `inferprobe profile` — keeps one OTLP span receiver open and routes every span to
// the probe run whose X-Request-Id it carries, scrapes each target's vLLM /metrics, and
// publishes everything through the exporter package on /metrics (TLS and basic auth through
// exporter-toolkit's web config file).
package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/inferprobe/inferprobe/artifact"
)

// Defaults of the configuration.
const (
	DefaultListen         = "127.0.0.1:9464"
	DefaultHTTPListen     = "127.0.0.1:4318"
	DefaultGRPCListen     = "127.0.0.1:4317"
	DefaultArtifactDir    = "inferprobe-artifacts"
	DefaultKeep           = 100
	DefaultMaxAge         = 7 * 24 * time.Hour
	DefaultScrapeInterval = 15 * time.Second
	DefaultSpansDrain     = 6 * time.Second
	DefaultObjective      = 0.99
	// MetricsURLDefault as a target's metrics_url means the endpoint's origin + /metrics.
	MetricsURLDefault = "default"
	// MaxConfigBytes bounds the configuration file.
	MaxConfigBytes = 4 << 20
)

// Config is a validated configuration.
type Config struct {
	Path          string
	Listen        string
	WebConfigFile string
	HTTPListen    string
	GRPCListen    string
	ArtifactDir   string
	Keep          int
	MaxAge        time.Duration
	Targets       []*Target
	Probes        []*Probe
	raw           []byte
}

// Load reads and validates the configuration file at path; every error is a *ConfigError
// naming the key (exit 2), or an error reading the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, &ConfigError{Msg: fmt.Sprintf("reading %s: %v", path, err)}
	}
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{Msg: fmt.Sprintf("%s is larger than %d bytes", path, MaxConfigBytes)}
	}
	c, err := parseIn(data, filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Parse validates a configuration document (see Load); relative paths in it (slos[].file,
// artifacts.dir, web_config_file) are relative to the working directory. Load makes them
// relative to the file's directory, as Prometheus does for its rule files.
func Parse(data []byte) (*Config, error) {
	return parseIn(data, "")
}

func parseIn(data []byte, baseDir string) (*Config, error) {
	f, err := decodeFile(data, baseDir)
	if err != nil {
		return nil, err
	}
	c, err := load(f, data)
	if err != nil {
		return nil, withLine(data, err)
	}
	return c, nil
}

// load validates the decoded file f (the document data) into a Config. Its errors are
// *ConfigError values naming the key; parseIn adds the key's line.
func load(f *File, data []byte) (*Config, error) {
	c := &Config{Listen: DefaultListen, HTTPListen: DefaultHTTPListen, GRPCListen: DefaultGRPCListen,
		ArtifactDir: DefaultArtifactDir, Keep: DefaultKeep, MaxAge: DefaultMaxAge, WebConfigFile: f.WebConfigFile, raw: data}
	for _, step := range []func(*File) error{c.loadListeners, c.loadWebConfig, c.loadArtifacts} {
		if err := step(f); err != nil {
			return nil, err
		}
	}
	slos, err := loadSLOs(f.SLOs)
	if err != nil {
		return nil, err
	}
	targets, err := c.loadTargets(f.Targets)
	if err != nil {
		return nil, err
	}
	if err := c.loadProbes(f.Probes, targets, slos); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeFile decodes the one YAML document of data, unknown keys refused, and makes its
// relative paths relative to baseDir.
func decodeFile(data []byte, baseDir string) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{Msg: "the file is empty"}
		}
		return nil, yamlError(data, err)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) || baseDir == "" {
			return p
		}
		return filepath.Join(baseDir, p)
	}
	f.WebConfigFile = rel(f.WebConfigFile)
	f.Artifacts.Dir = rel(f.Artifacts.Dir)
	for i := range f.SLOs {
		f.SLOs[i].File = rel(f.SLOs[i].File)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &ConfigError{Msg: "the file holds more than one YAML document"}
	}
	return &f, nil
}

// loadListeners sets the /metrics and OTLP listeners: HOST:PORT each, two never the same
// (":0" aside).
func (c *Config) loadListeners(f *File) error {
	if f.Listen != nil {
		c.Listen = *f.Listen
	}
	if err := checkAddr("listen", c.Listen, false); err != nil {
		return err
	}
	if f.Receiver.HTTPListen != nil {
		c.HTTPListen = *f.Receiver.HTTPListen
	}
	if f.Receiver.GRPCListen != nil {
		c.GRPCListen = *f.Receiver.GRPCListen
	}
	if err := checkAddr("receiver.http_listen", c.HTTPListen, true); err != nil {
		return err
	}
	if err := checkAddr("receiver.grpc_listen", c.GRPCListen, true); err != nil {
		return err
	}
	for _, pair := range [][2]string{{"listen", "receiver.http_listen"}, {"listen", "receiver.grpc_listen"}, {"receiver.http_listen", "receiver.grpc_listen"}} {
		addr := map[string]string{"listen": c.Listen, "receiver.http_listen": c.HTTPListen, "receiver.grpc_listen": c.GRPCListen}
		a, b := addr[pair[0]], addr[pair[1]]
		if a != "" && a == b && !strings.HasSuffix(a, ":0") {
			return cfgErr(pair[1], "%s is %s's address too", b, pair[0])
		}
	}
	return nil
}

// loadWebConfig checks the exporter-toolkit web configuration file.
func (c *Config) loadWebConfig(*File) error {
	if c.WebConfigFile == "" {
		return nil
	}
	// web.Validate reads the whole file: refuse what is not a regular file of a sane size
	// (a FIFO or /dev/zero would block or exhaust memory) before it does.
	fi, err := os.Stat(c.WebConfigFile)
	switch {
	case err != nil:
		return cfgErr("web_config_file", "%v", err)
	case !fi.Mode().IsRegular():
		return cfgErr("web_config_file", "%s is not a regular file", c.WebConfigFile)
	case fi.Size() > MaxConfigBytes:
		return cfgErr("web_config_file", "%s is larger than %d bytes", c.WebConfigFile, MaxConfigBytes)
	}
	if err := web.Validate(c.WebConfigFile); err != nil {
		return cfgErr("web_config_file", "%v", err)
	}
	return nil
}

// maxAgeRange is the range of artifacts.max_age: 0 (no age limit) or more.
var maxAgeRange = artifact.Range{Min: 0, Max: math.Inf(1), Unit: "seconds"}

// loadArtifacts sets the artifact directory and retention.
func (c *Config) loadArtifacts(f *File) error {
	if f.Artifacts.Dir != "" {
		c.ArtifactDir = f.Artifacts.Dir
	}
	if fi, err := os.Stat(c.ArtifactDir); err == nil && !fi.IsDir() {
		return cfgErr("artifacts.dir", "%s exists and is not a directory", c.ArtifactDir)
	}
	if f.Artifacts.Keep != nil {
		if *f.Artifacts.Keep < 0 {
			return cfgErr("artifacts.keep", "must be ≥ 0 (0: no count limit)")
		}
		c.Keep = int(*f.Artifacts.Keep)
	}
	if f.Artifacts.MaxAge != nil {
		if err := maxAgeRange.CheckDuration(time.Duration(*f.Artifacts.MaxAge)); err != nil {
			return cfgErr("artifacts.max_age", "%v (0: no age limit)", err)
		}
		c.MaxAge = time.Duration(*f.Artifacts.MaxAge)
	}
	return nil
}

// loadSLOs validates the SLO policies, by name.
func loadSLOs(files []SLOFile) (map[string]*SLO, error) {
	slos := map[string]*SLO{}
	for i, s := range files {
		key := fmt.Sprintf("slos[%d]", i)
		slo, err := loadSLO(key, s)
		if err != nil {
			return nil, err
		}
		if slos[s.Name] != nil {
			return nil, cfgErr(key+".name", "%q is used twice", s.Name)
		}
		slos[s.Name] = slo
	}
	return slos, nil
}

// loadTargets validates the targets (at least one) and returns them by name.
func (c *Config) loadTargets(files []TargetFile) (map[string]*Target, error) {
	if len(files) == 0 {
		return nil, cfgErr("targets", "at least one target is required")
	}
	targets := map[string]*Target{}
	for i, t := range files {
		key := fmt.Sprintf("targets[%d]", i)
		tg, err := loadTarget(key, t)
		if err != nil {
			return nil, err
		}
		if targets[t.Name] != nil {
			return nil, cfgErr(key+".name", "%q is used twice", t.Name)
		}
		targets[t.Name] = tg
		c.Targets = append(c.Targets, tg)
	}
	return targets, nil
}

// loadProbes validates the probes (at least one). Without a span receiver, no probe waits
// for spans after its runs.
func (c *Config) loadProbes(files []ProbeFile, targets map[string]*Target, slos map[string]*SLO) error {
	if len(files) == 0 {
		return cfgErr("probes", "at least one probe is required")
	}
	seen := map[string]bool{}
	for i, p := range files {
		key := fmt.Sprintf("probes[%d]", i)
		pr, err := loadProbe(key, p, targets, slos)
		if err != nil {
			return err
		}
		if seen[p.Name] {
			return cfgErr(key+".name", "%q is used twice", p.Name)
		}
		seen[p.Name] = true
		if pr.SpansDrain > 0 && c.HTTPListen == "" && c.GRPCListen == "" {
			pr.SpansDrain = 0
		}
		c.Probes = append(c.Probes, pr)
	}
	return nil
}

func checkAddr(key, addr string, optional bool) error {
	if addr == "" && optional {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
		return cfgErr(key, "want HOST:PORT with a port within 0..65535, not %q", addr)
	}
	return nil
}

// Thresholds returns the SLO limits of every probe's policy in seconds, by criterion key
// (the exporter's bucket boundaries).
func (c *Config) Thresholds() map[string][]float64 {
	out := map[string][]float64{}
	for _, p := range c.Probes {
		if p.SLO == nil {
			continue
		}
		for _, cr := range p.SLO.Policy.Criteria {
			out[cr.Key()] = append(out[cr.Key()], cr.MaxMs/1000)
		}
	}
	for k := range out {
		sort.Float64s(out[k])
		out[k] = slices.Compact(out[k]) // two probes sharing a policy is one set of buckets
	}
	return out
}
