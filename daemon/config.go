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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/scrape/vllm"
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

// ProbeFile is one probe: a workload on a schedule against a target.
type ProbeFile struct {
	Name       string         `yaml:"name"`
	Target     string         `yaml:"target"`
	SLO        string         `yaml:"slo"`
	Every      *Duration      `yaml:"every"`
	Continuous bool           `yaml:"continuous"`
	Workload   map[string]any `yaml:"workload"`
	SpansDrain *Duration      `yaml:"spans_drain"`
}

// WorkloadParser turns profile flags (["--arrival=poisson", "--rate=2", …], including
// --endpoint, --model and --api-key) into a validated loadgen configuration and its
// tokenizer, with exactly `inferprobe profile`'s rules; its error message names the flag.
type WorkloadParser func(args []string) (*loadgen.Config, prompt.Tokenizer, string, error)

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

// Target is a validated target.
type Target struct {
	Name           string
	Endpoint       string
	Model          string
	apiKey         string
	MetricsURL     string // "" when not scraped
	ScrapeInterval time.Duration
}

// SLO is a validated policy with its objective.
type SLO struct {
	Name      string
	Source    string // analyze.SourceFlags or analyze.SourceFile
	Policy    *analyze.Policy
	Objective float64
}

// Probe is a validated probe.
type Probe struct {
	Name   string
	Target *Target
	SLO    *SLO // nil without one
	Every  time.Duration
	// Continuous starts each run when the previous one ends; after a run that could not
	// start or had no successful request, the next waits 1 s, doubling up to 1 min.
	Continuous bool
	SpansDrain time.Duration
	Workload   *loadgen.Config
	Tokenizer  prompt.Tokenizer
	TokName    string
	// key identifies the probe's whole definition: a reload restarts a probe whose key changed.
	key string
}

// ConfigError is a configuration that cannot be used; Key names where (e.g.
// "probes[1].workload.rate"). The CLI maps it to exit code 2.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config: " + e.Msg
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

func cfgErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// sloNameRe is analyze's rule for a policy name (stormlog.infer.slo v1 "name"): an SLO's name
// becomes the name of the policy recorded in every run's infer.slo record, which analysis
// (the daemon's own, and `inferprobe analyze`) parses again and refuses otherwise.
var sloNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedWorkload are profile flags a probe's workload may not set: the daemon sets them
// from the target, the probe and its own listeners.
var reservedWorkload = map[string]string{
	"endpoint": "the target's endpoint", "base-url": "the target's base_url", "model": "the target's model",
	"api-key": "the target's api_key_env", "run-id": "a new run id per run", "output": "the artifact directory",
	"quiet": "", "slo": "the probe's slo", "slo-file": "the probe's slo", "vllm-metrics": "the target's metrics_url",
	"vllm-metrics-interval": "the target's scrape_interval", "vllm-spans-listen": "receiver.http_listen",
	"vllm-spans-grpc-listen": "receiver.grpc_listen", "vllm-spans-drain": "the probe's spans_drain",
	"system-sampler": "", "sample-interval": "", "help": "",
}

// Load reads and validates the configuration file at path; every error is a *ConfigError
// naming the key (exit 2), or an error reading the file.
func Load(path string, parse WorkloadParser) (*Config, error) {
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
	c, err := parseIn(data, parse, filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Parse validates a configuration document (see Load); relative paths in it (slos[].file,
// artifacts.dir, web_config_file) are relative to the working directory. Load makes them
// relative to the file's directory, as Prometheus does for its rule files.
func Parse(data []byte, parse WorkloadParser) (*Config, error) {
	return parseIn(data, parse, "")
}

func parseIn(data []byte, parse WorkloadParser, baseDir string) (*Config, error) {
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
	c := &Config{Listen: DefaultListen, HTTPListen: DefaultHTTPListen, GRPCListen: DefaultGRPCListen,
		ArtifactDir: DefaultArtifactDir, Keep: DefaultKeep, MaxAge: DefaultMaxAge, WebConfigFile: f.WebConfigFile, raw: data}
	if f.Listen != nil {
		c.Listen = *f.Listen
	}
	if err := checkAddr("listen", c.Listen, false); err != nil {
		return nil, err
	}
	if f.Receiver.HTTPListen != nil {
		c.HTTPListen = *f.Receiver.HTTPListen
	}
	if f.Receiver.GRPCListen != nil {
		c.GRPCListen = *f.Receiver.GRPCListen
	}
	if err := checkAddr("receiver.http_listen", c.HTTPListen, true); err != nil {
		return nil, err
	}
	if err := checkAddr("receiver.grpc_listen", c.GRPCListen, true); err != nil {
		return nil, err
	}
	for _, pair := range [][2]string{{"listen", "receiver.http_listen"}, {"listen", "receiver.grpc_listen"}, {"receiver.http_listen", "receiver.grpc_listen"}} {
		addr := map[string]string{"listen": c.Listen, "receiver.http_listen": c.HTTPListen, "receiver.grpc_listen": c.GRPCListen}
		a, b := addr[pair[0]], addr[pair[1]]
		if a != "" && a == b && !strings.HasSuffix(a, ":0") {
			return nil, cfgErr(pair[1], "%s is %s's address too", b, pair[0])
		}
	}
	if c.WebConfigFile != "" {
		// web.Validate reads the whole file: refuse what is not a regular file of a sane size
		// (a FIFO or /dev/zero would block or exhaust memory) before it does.
		fi, err := os.Stat(c.WebConfigFile)
		switch {
		case err != nil:
			return nil, cfgErr("web_config_file", "%v", err)
		case !fi.Mode().IsRegular():
			return nil, cfgErr("web_config_file", "%s is not a regular file", c.WebConfigFile)
		case fi.Size() > MaxConfigBytes:
			return nil, cfgErr("web_config_file", "%s is larger than %d bytes", c.WebConfigFile, MaxConfigBytes)
		}
		if err := web.Validate(c.WebConfigFile); err != nil {
			return nil, cfgErr("web_config_file", "%v", err)
		}
	}
	if f.Artifacts.Dir != "" {
		c.ArtifactDir = f.Artifacts.Dir
	}
	if fi, err := os.Stat(c.ArtifactDir); err == nil && !fi.IsDir() {
		return nil, cfgErr("artifacts.dir", "%s exists and is not a directory", c.ArtifactDir)
	}
	if f.Artifacts.Keep != nil {
		if *f.Artifacts.Keep < 0 {
			return nil, cfgErr("artifacts.keep", "must be ≥ 0 (0: no count limit)")
		}
		c.Keep = int(*f.Artifacts.Keep)
	}
	if f.Artifacts.MaxAge != nil {
		if *f.Artifacts.MaxAge < 0 {
			return nil, cfgErr("artifacts.max_age", "must be ≥ 0 (0: no age limit)")
		}
		c.MaxAge = time.Duration(*f.Artifacts.MaxAge)
	}

	slos := map[string]*SLO{}
	for i, s := range f.SLOs {
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

	if len(f.Targets) == 0 {
		return nil, cfgErr("targets", "at least one target is required")
	}
	targets := map[string]*Target{}
	for i, t := range f.Targets {
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

	if len(f.Probes) == 0 {
		return nil, cfgErr("probes", "at least one probe is required")
	}
	seen := map[string]bool{}
	for i, p := range f.Probes {
		key := fmt.Sprintf("probes[%d]", i)
		pr, err := loadProbe(key, p, targets, slos, parse)
		if err != nil {
			return nil, err
		}
		if seen[p.Name] {
			return nil, cfgErr(key+".name", "%q is used twice", p.Name)
		}
		seen[p.Name] = true
		if pr.SpansDrain > 0 && c.HTTPListen == "" && c.GRPCListen == "" {
			pr.SpansDrain = 0
		}
		c.Probes = append(c.Probes, pr)
	}
	return c, nil
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

func loadSLO(key string, s SLOFile) (*SLO, error) {
	if !sloNameRe.MatchString(s.Name) {
		return nil, cfgErr(key+".name", "want a lowercase letter, then up to 63 lowercase letters, digits or '_' (an SLO policy name), not %q", s.Name)
	}
	out := &SLO{Name: s.Name}
	var err error
	switch {
	case len(s.Criteria) > 0 && s.File != "":
		return nil, cfgErr(key, "criteria and file are mutually exclusive")
	case len(s.Criteria) > 0:
		out.Source = analyze.SourceFlags
		if out.Policy, err = analyze.ParseSLOFlags(s.Criteria); err != nil {
			return nil, cfgErr(key+".criteria", "%v", err)
		}
		out.Policy.Name = s.Name // the policy (and the slo label) takes the configured name
	case s.File != "":
		out.Source = analyze.SourceFile
		if out.Policy, err = analyze.ParsePolicyFile(s.File); err != nil {
			return nil, cfgErr(key+".file", "%v", err)
		}
		if out.Policy.Name != s.Name {
			return nil, cfgErr(key+".name", "must equal the name of the policy in %s (%q)", s.File, out.Policy.Name)
		}
		if out.Policy.Interval.Kind != analyze.IntervalMeasuredWindow {
			return nil, cfgErr(key+".file", "probes judge over the measured window (interval.kind %q)", out.Policy.Interval.Kind)
		}
	default:
		return nil, cfgErr(key, "criteria or file is required")
	}
	out.Objective = DefaultObjective
	if out.Policy.AttainmentTarget != nil {
		out.Objective = *out.Policy.AttainmentTarget
	}
	if s.Objective != nil {
		if out.Policy.AttainmentTarget != nil {
			return nil, cfgErr(key+".objective", "the policy sets its attainment_target already")
		}
		if o := *s.Objective; !(o > 0 && o < 1) || math.IsNaN(o) {
			return nil, cfgErr(key+".objective", "must be within (0, 1), not %v", o)
		}
		out.Objective = *s.Objective
	}
	if out.Objective >= 1 {
		return nil, cfgErr(key, "an attainment target of 1 leaves no error budget for burn-rate alerts")
	}
	return out, nil
}

func loadTarget(key string, t TargetFile) (*Target, error) {
	if !nameRe.MatchString(t.Name) {
		return nil, cfgErr(key+".name", "want 1-64 letters, digits, '_', '.', '-', not %q", t.Name)
	}
	if (t.Endpoint == "") == (t.BaseURL == "") {
		return nil, cfgErr(key, "exactly one of endpoint and base_url is required")
	}
	if t.Model == "" {
		return nil, cfgErr(key+".model", "required")
	}
	for _, u := range []struct{ key, v string }{{"endpoint", t.Endpoint}, {"base_url", t.BaseURL}} {
		if u.v == "" {
			continue
		}
		pu, err := url.Parse(u.v)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, cfgErr(key+"."+u.key, "want an absolute http(s) URL, not %q", artifact.RedactURL(u.v))
		}
	}
	tg := &Target{Name: t.Name, Endpoint: t.Endpoint, Model: t.Model, ScrapeInterval: DefaultScrapeInterval}
	if t.BaseURL != "" {
		tg.Endpoint = strings.TrimRight(t.BaseURL, "/") + "/chat/completions"
		if strings.HasSuffix(strings.TrimRight(t.BaseURL, "/"), "/chat/completions") {
			return nil, cfgErr(key+".base_url", "is the /v1 base (…/v1); give a full …/chat/completions URL as endpoint")
		}
	}
	if t.APIKeyEnv != "" {
		if !envNameRe.MatchString(t.APIKeyEnv) {
			return nil, cfgErr(key+".api_key_env", "%q is not an environment variable name", t.APIKeyEnv)
		}
		v, ok := os.LookupEnv(t.APIKeyEnv)
		if !ok || v == "" {
			return nil, cfgErr(key+".api_key_env", "$%s is not set", t.APIKeyEnv)
		}
		tg.apiKey = v
	}
	if t.ScrapeInterval != nil {
		tg.ScrapeInterval = time.Duration(*t.ScrapeInterval)
		if tg.ScrapeInterval < 100*time.Millisecond || tg.ScrapeInterval > time.Hour {
			return nil, cfgErr(key+".scrape_interval", "must be between 100ms and 1h")
		}
	}
	switch t.MetricsURL {
	case "":
	case MetricsURLDefault:
		u, err := vllm.DefaultMetricsURL(tg.Endpoint)
		if err != nil {
			return nil, cfgErr(key+".metrics_url", "%v", err)
		}
		tg.MetricsURL = u
	default:
		tg.MetricsURL = t.MetricsURL
	}
	if tg.MetricsURL != "" {
		if _, err := tg.scraper(); err != nil {
			return nil, cfgErr(key+".metrics_url", "%v", err)
		}
	}
	return tg, nil
}

// scrapeConfig is the target's vLLM /metrics scraper configuration (a run's pipeline adds
// its session, run and clock domain).
func (t *Target) scrapeConfig() vllm.Config {
	return vllm.Config{
		URL: t.MetricsURL, Endpoint: t.Endpoint, APIKey: t.apiKey, Timeout: min(t.ScrapeInterval, 10*time.Second),
		Interval: t.ScrapeInterval,
	}
}

// scraper returns a vLLM /metrics scraper of the target for the health loop.
func (t *Target) scraper() (*vllm.Scraper, error) { return vllm.NewScraper(t.scrapeConfig()) }

func loadProbe(key string, p ProbeFile, targets map[string]*Target, slos map[string]*SLO, parse WorkloadParser) (*Probe, error) {
	if !nameRe.MatchString(p.Name) {
		return nil, cfgErr(key+".name", "want 1-64 letters, digits, '_', '.', '-', not %q", p.Name)
	}
	pr := &Probe{Name: p.Name, Continuous: p.Continuous, SpansDrain: DefaultSpansDrain}
	if pr.Target = targets[p.Target]; pr.Target == nil {
		return nil, cfgErr(key+".target", "no target is named %q", p.Target)
	}
	if p.SLO != "" {
		if pr.SLO = slos[p.SLO]; pr.SLO == nil {
			return nil, cfgErr(key+".slo", "no slo is named %q", p.SLO)
		}
	}
	switch {
	case p.Every != nil && p.Continuous:
		return nil, cfgErr(key, "every and continuous are mutually exclusive")
	case p.Every != nil:
		pr.Every = time.Duration(*p.Every)
		if pr.Every < time.Second {
			return nil, cfgErr(key+".every", "must be at least 1s")
		}
	case !p.Continuous:
		return nil, cfgErr(key, "a schedule is required: every: DURATION, or continuous: true")
	}
	if p.SpansDrain != nil {
		pr.SpansDrain = time.Duration(*p.SpansDrain)
		if pr.SpansDrain < 0 || pr.SpansDrain > 10*time.Minute {
			return nil, cfgErr(key+".spans_drain", "must be between 0s and 10m")
		}
	}
	args, err := workloadArgs(key+".workload", p.Workload)
	if err != nil {
		return nil, err
	}
	tg := pr.Target
	all := append([]string{"--endpoint=" + tg.Endpoint, "--model=" + tg.Model, "--api-key=" + tg.apiKey}, args...)
	if parse == nil {
		return nil, errors.New("daemon: no workload parser")
	}
	cfg, tok, tokName, err := parse(all)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "config: ")
		if tg.apiKey != "" {
			// The parser sees the key as a flag; its message must not carry it on.
			msg = strings.ReplaceAll(msg, tg.apiKey, "<redacted>")
		}
		// Name the workload key when the message is about one flag, and drop Go's parser
		// internals ("strconv.ParseFloat: parsing …: invalid syntax").
		msg = strconvRe.ReplaceAllString(msg, "")
		wkey := key + ".workload"
		if m := flagNameRe.FindStringSubmatch(msg); m != nil {
			if _, ok := p.Workload[m[1]]; ok {
				wkey += "." + m[1]
			}
		}
		return nil, cfgErr(wkey, "%s", msg)
	}
	if pr.Continuous && cfg.Duration == 0 && cfg.Requests <= 1 && len(cfg.Trace) == 0 {
		return nil, cfgErr(key+".workload", "a continuous probe needs duration or requests (> 1) per run")
	}
	// The key is the target's api_key_env or none: never profile's $OPENAI_API_KEY fallback,
	// which would send a key the configuration does not name.
	cfg.APIKey = tg.apiKey
	pr.Workload, pr.Tokenizer, pr.TokName = cfg, tok, tokName
	pr.key = strings.Join(all, "\x1f") + fmt.Sprintf("\x1f%v\x1f%v\x1f%v", pr.Every, pr.Continuous, pr.SpansDrain)
	if pr.SLO != nil {
		pr.key += "\x1f" + pr.SLO.Policy.Digest() + fmt.Sprint(pr.SLO.Objective)
	}
	// The target's name is a label of every series of the probe: renaming it restarts the probe.
	pr.key += "\x1f" + tg.Name + "\x1f" + tg.MetricsURL + tg.ScrapeInterval.String()
	return pr, nil
}

// workloadArgs turns a workload mapping into profile flags, in key order. Values: scalars, or
// lists of scalars (joined with commas, as profile's list flags take them).
func workloadArgs(key string, w map[string]any) ([]string, error) {
	names := make([]string, 0, len(w))
	for k := range w {
		names = append(names, k)
	}
	sort.Strings(names)
	var args []string
	for _, k := range names {
		kk := key + "." + k
		if why, ok := reservedWorkload[k]; ok {
			if why == "" {
				return nil, cfgErr(kk, "is not a probe setting")
			}
			return nil, cfgErr(kk, "is set by %s", why)
		}
		if strings.HasPrefix(k, "-") || k == "" || strings.ContainsAny(k, "= ") {
			return nil, cfgErr(kk, "write the flag's name without dashes (e.g. input-tokens)")
		}
		if _, isMap := w[k].(map[string]any); isMap && k != "extra-body" {
			return nil, cfgErr(kk, "want a number, a string, a boolean or a list of them, not a mapping")
		}
		v, err := flagValue(w[k])
		if err != nil {
			return nil, cfgErr(kk, "%v", err)
		}
		args = append(args, "--"+k+"="+v)
	}
	return args, nil
}

func flagValue(v any) (string, error) {
	switch x := v.(type) {
	case map[string]any:
		// A mapping is a JSON flag's value written as YAML (extra-body).
		b, err := json.Marshal(x)
		if err != nil {
			return "", fmt.Errorf("the mapping cannot be written as JSON: %v", err)
		}
		return string(b), nil
	case []any:
		if len(x) == 0 {
			return "", errors.New("an empty list")
		}
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := scalar(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	default:
		return scalar(v)
	}
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case nil:
		return "", errors.New("a value is required")
	case []any:
		return "", errors.New("want a number, a string or a boolean here, not a list inside a list")
	default:
		return "", errors.New("want a number, a string, a boolean or a list of them (quote dates and other values)")
	}
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

var (
	strconvRe    = regexp.MustCompile(`: strconv\.\w+: parsing "[^"]*": \w[\w ]*`)
	flagNameRe   = regexp.MustCompile(`(?:^|"|\s)--([a-z][a-z0-9-]*)\b`)
	lineRe       = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRe    = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	unmarshalRe  = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	typeNameOf   = map[string]string{"int": "a whole number", "float64": "a number", "string": "a string", "bool": "true or false", "[]string": "a list of strings"}
	yamlKindName = map[string]string{"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean", "seq": "a list", "map": "a mapping", "null": "null"}
)

// yamlError turns a YAML decoding error into a ConfigError that names the key at the line
// of its first problem ("probes[0].every") and says what was wanted in the configuration's
// terms rather than Go's.
func yamlError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var root yaml.Node
	paths := map[int]string{}
	if yaml.Unmarshal(data, &root) == nil {
		linePaths(&root, "", paths)
	}
	var parts []string
	key := ""
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := lineRe.FindStringSubmatch(line)
		if m == nil {
			parts = append(parts, line)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		text := m[2]
		if u := unknownRe.FindStringSubmatch(text); u != nil {
			text = fmt.Sprintf("unknown key %q", u[1])
		} else if u := unmarshalRe.FindStringSubmatch(text); u != nil {
			want := typeNameOf[u[3]]
			switch {
			case want != "":
			case strings.HasPrefix(u[3], "[]"):
				want = "a list"
			case strings.HasPrefix(u[3], "map[") || strings.HasPrefix(u[3], "daemon."):
				want = "a mapping"
			default:
				want = "another kind of value"
			}
			got := yamlKindName[u[1]]
			if got == "" {
				got = u[1]
			}
			if u[2] != "" {
				text = fmt.Sprintf("want %s, not %s %q", want, got, u[2])
			} else {
				text = fmt.Sprintf("want %s, not %s", want, got)
			}
		}
		p := paths[n]
		if strings.HasPrefix(p, "[") {
			p = "" // the document itself is not a mapping
		}
		switch {
		case len(parts) == 0 && p != "":
			key = p
			parts = append(parts, fmt.Sprintf("%s (line %d)", text, n))
		case p != "":
			parts = append(parts, fmt.Sprintf("%s (line %d): %s", p, n, text))
		default:
			parts = append(parts, fmt.Sprintf("line %d: %s", n, text))
		}
	}
	return &ConfigError{Key: key, Msg: strings.Join(parts, "; ")}
}

// linePaths records, for every line that holds a key or a list item, the key's path
// ("probes[1].workload.rate"); the innermost key of a line wins over outer keys and over
// list items. Aliases are not followed.
func linePaths(n *yaml.Node, path string, m map[int]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			linePaths(c, path, m)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			m[k.Line] = p
			if v.Line != k.Line {
				if _, ok := m[v.Line]; !ok {
					m[v.Line] = p
				}
			}
			linePaths(v, p, m)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := m[c.Line]; !ok { // a key on the line names it better than an item
				m[c.Line] = p
			}
			linePaths(c, p, m)
		}
	}
}
