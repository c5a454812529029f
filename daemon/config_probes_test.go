package daemon

import "testing"

// TestProbeKey: a reload restarts a probe exactly when what it sends or where changed — its
// workload, its target (the name too: it labels every series) and the target's scrape; a
// change of its schedule, span drain or SLO alone changes its settings (handed to the
// running loop); settings outside the probe change neither.
func TestProbeKey(t *testing.T) {
	probe := func(text string) *Probe {
		t.Helper()
		return mustParse(t, text).Probes[0]
	}
	p0 := probe(baseYAML)
	if p := probe(baseYAML); p.key != p0.key || p.settings != p0.settings {
		t.Fatal("the same configuration gives another key or settings")
	}
	same := map[string]string{
		"artifact settings": "artifacts: {keep: 3, dir: /elsewhere, max_age: 1h}\n" + baseYAML,
		"listen":            "listen: 127.0.0.1:1\n" + baseYAML,
		"another probe":     baseYAML + "  - name: other\n    target: vllm\n    every: 1h\n    workload: {requests: 2}\n",
	}
	for name, text := range same {
		if p := probe(text); p.key != p0.key || p.settings != p0.settings {
			t.Errorf("%s: the probe's key or settings changed", name)
		}
	}
	restart := map[string]string{
		"target name":     replace(baseYAML, "name: vllm", "name: vllm2", "target: vllm", "target: vllm2"),
		"endpoint":        replace(baseYAML, "8000/v1/", "8001/v1/"),
		"model":           replace(baseYAML, "model: opt", "model: opt2"),
		"metrics url":     replace(baseYAML, "    metrics_url: default\n", ""),
		"scrape interval": replace(baseYAML, "metrics_url: default", "metrics_url: default\n    scrape_interval: 1s"),
		"workload":        replace(baseYAML, "requests: 4", "requests: 5"),
		"seed":            replace(baseYAML, "requests: 4", "requests: 4\n      seed: 0"),
	}
	for name, text := range restart {
		if probe(text).key == p0.key {
			t.Errorf("%s: the probe's key did not change", name)
		}
	}
	settings := map[string]string{
		"every":         replace(baseYAML, "every: 5m", "every: 6m"),
		"continuous":    replace(baseYAML, "every: 5m", "continuous: true"),
		"spans drain":   replace(baseYAML, "every: 5m", "every: 5m\n    spans_drain: 1s"),
		"slo criteria":  replace(baseYAML, `"e2e:2000"`, `"e2e:2001"`),
		"slo objective": replace(baseYAML, `"e2e:2000"]`, "\"e2e:2000\"]\n    objective: 0.9"),
		"no slo":        replace(baseYAML, "    slo: chat\n", ""),
		"tables":        replace(baseYAML, "every: 5m", "every: 5m\n    tables: true"),
	}
	for name, text := range settings {
		if p := probe(text); p.key != p0.key || p.settings == p0.settings {
			t.Errorf("%s: key changed %v, settings changed %v; want the settings alone", name, p.key != p0.key, p.settings != p0.settings)
		}
	}
}
