package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/exporter"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
)

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
	// Search is set for a search probe (kind: search): each start runs a capacity search
	// instead of one run of Workload.
	Search    *SearchProbe
	Tokenizer prompt.Tokenizer
	TokName   string
	// RunSeed is set when the workload gives no seed: each run then draws its prompts,
	// nonces and Poisson gaps from a seed of its own (loadgen.RunSeed of its run id), so
	// that no run finds the previous run's prompts in the server's prefix cache. An
	// explicit seed is every run's seed.
	RunSeed bool
	// Tables: each run also writes its tables (package tables: sangam's CSVs, pictures,
	// index.html, timeline.json) into TablesDir of its artifact, when the run ends.
	Tables bool
	// key identifies what the probe sends and where: its workload, its target and the
	// target's scrape. A reload restarts a probe whose key changed (its running run stops
	// gracefully).
	key string
	// settings identifies the rest of its definition: schedule, span drain, tables and SLO. A reload
	// that changes only these hands them to the running loop: they take effect from the
	// next run (the schedule from the next start), without interrupting the running one.
	settings string
}

// labels are the probe's exporter labels.
func (p *Probe) labels() exporter.Labels {
	return exporter.Labels{Target: p.Target.Name, Model: p.Target.Model, Probe: p.Name}
}

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

// baseWorkload is the workload a probe's mapping is laid over: profile's defaults. Tests
// replace it with a smaller one.
var baseWorkload = func() loadgen.Workload { return loadgen.Workload{} }

func loadProbe(key string, p ProbeFile, targets map[string]*Target, slos map[string]*SLO) (*Probe, error) {
	pr, err := loadSchedule(key, p, targets, slos)
	if err != nil {
		return nil, err
	}
	tg := pr.Target
	wkey, node := key+".workload", &p.Workload
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	w := baseWorkload()
	if err := decodeWorkload(wkey, node, &w); err != nil {
		return nil, err
	}
	// The key is the target's api_key_env or none: never profile's $OPENAI_API_KEY fallback,
	// which would send a key the configuration does not name.
	w.Endpoint, w.Model, w.APIKey = tg.Endpoint, tg.Model, tg.apiKey
	kind, err := kindOf(key, p)
	if err != nil {
		return nil, err
	}
	var cfg *loadgen.Config
	if kind == KindSearch {
		cfg, err = loadSearch(key, p, pr, wkey, node, w)
	} else if cfg, err = w.Config(); err != nil {
		err = workloadError(wkey, node, err)
	}
	if err != nil {
		return nil, err
	}
	if pr.Tokenizer, pr.TokName, err = w.NewTokenizer(); err != nil {
		return nil, workloadError(wkey, node, err)
	}
	if pr.Continuous && cfg.Duration == 0 && cfg.Requests <= 1 && len(cfg.Trace) == 0 {
		return nil, workloadError(wkey, node, errors.New("a continuous probe needs duration or requests (> 1) per run"))
	}
	pr.Workload, pr.RunSeed = cfg, w.Seed == nil
	def, err := json.Marshal(w) // the workload as given, with the target's endpoint, model and key
	if err != nil {
		return nil, err
	}
	// The target's name is a label of every series of the probe: renaming it restarts the probe.
	pr.key = string(def) + "\x1f" + tg.Name + "\x1f" + tg.MetricsURL + "\x1f" + tg.ScrapeInterval.String() + "\x1f" + kind + searchKey(p.Search)
	pr.settings = fmt.Sprintf("%v\x1f%v\x1f%v\x1f%v", pr.Every, pr.Continuous, pr.SpansDrain, pr.Tables)
	if pr.SLO != nil {
		pr.settings += "\x1f" + pr.SLO.Name + "\x1f" + pr.SLO.Policy.Digest() + "\x1f" + fmt.Sprint(pr.SLO.Objective)
	}
	return pr, nil
}

// The ranges of a probe's durations, in seconds: every at least 1 s, spans_drain up to 10 min.
var (
	everyRange      = artifact.Range{Min: 1, Max: math.Inf(1), Unit: "seconds"}
	spansDrainRange = artifact.Range{Min: 0, Max: 600, Unit: "seconds"}
)

// loadSchedule checks a probe's name, target, SLO, schedule, span drain and tables (run
// probes only).
func loadSchedule(key string, p ProbeFile, targets map[string]*Target, slos map[string]*SLO) (*Probe, error) {
	if !nameRe.MatchString(p.Name) {
		return nil, cfgErr(key+".name", "want 1-64 letters, digits, '_', '.', '-', not %q", p.Name)
	}
	pr := &Probe{Name: p.Name, Continuous: p.Continuous, SpansDrain: DefaultSpansDrain, Tables: p.Tables}
	if p.Tables && p.Kind == KindSearch {
		return nil, cfgErr(key+".tables", "is for a run probe: a search probe's runs write no tables")
	}
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
		if err := everyRange.CheckDuration(pr.Every); err != nil {
			return nil, cfgErr(key+".every", "%v", err)
		}
	case !p.Continuous && p.Kind == KindSearch:
		return nil, cfgErr(key, "a schedule is required: every: DURATION (a search probe cannot be continuous)")
	case !p.Continuous:
		return nil, cfgErr(key, "a schedule is required: every: DURATION, or continuous: true")
	}
	if p.SpansDrain != nil {
		pr.SpansDrain = time.Duration(*p.SpansDrain)
		if err := spansDrainRange.CheckDuration(pr.SpansDrain); err != nil {
			return nil, cfgErr(key+".spans_drain", "%v", err)
		}
	}
	return pr, nil
}

// decodeWorkload refuses the keys the daemon sets itself and keys written as flags, then
// decodes the mapping onto w (loadgen.Workload.UnmarshalYAML). wkey is the mapping's key.
func decodeWorkload(wkey string, node *yaml.Node, w *loadgen.Workload) error {
	if node.Kind == 0 || (node.Kind == yaml.ScalarNode && node.Tag == "!!null") {
		return nil // no workload: profile's defaults
	}
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			k := node.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue // loadgen names it
			}
			kk := wkey + "." + k.Value
			if why, ok := reservedWorkload[k.Value]; ok {
				if why == "" {
					return cfgErr(kk, "is not a probe setting (line %d)", k.Line)
				}
				return cfgErr(kk, "is set by %s (line %d)", why, k.Line)
			}
			if strings.HasPrefix(k.Value, "-") || k.Value == "" || strings.ContainsAny(k.Value, "= ") {
				return cfgErr(kk, "write the flag's name without dashes (e.g. input-tokens) (line %d)", k.Line)
			}
		}
	}
	err := node.Decode(w)
	var ke *loadgen.KeyError
	if errors.As(err, &ke) {
		if ke.Key != "" {
			wkey += "." + ke.Key
		}
		return cfgErr(wkey, "%s (line %d)", ke.Msg, ke.Line)
	}
	if err != nil {
		return cfgErr(wkey, "%v", err)
	}
	return nil
}

// workloadError is a workload the run configuration refuses, under the key of the setting
// the rule is about when the mapping gives it (else the mapping's), with its line. The
// messages are profile's, in its flags' terms; none carries the API key.
func workloadError(wkey string, node *yaml.Node, err error) error {
	flag := ""
	var ue *loadgen.UsageError
	var te *loadgen.TraceInputError
	switch {
	case errors.As(err, &ue):
		flag = ue.Flag
	case errors.As(err, &te):
		flag = "arrival-trace"
	}
	line := node.Line
	if k := mappingKey(node, flag); k != nil {
		wkey, line = wkey+"."+flag, k.Line
	}
	if line == 0 {
		return cfgErr(wkey, "%v", err)
	}
	return cfgErr(wkey, "%v (line %d)", err, line)
}

// mappingKey is the key node named name in a mapping node, or nil.
func mappingKey(n *yaml.Node, name string) *yaml.Node {
	if n.Kind != yaml.MappingNode || name == "" {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == name {
			return k
		}
	}
	return nil
}
