package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/engine"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

// fixtureDir holds the captured /metrics expositions the catalogue is checked against.
const fixtureDir = "testdata"

func mustRead(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func setOf(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

// Every vllm: family of the real 0.30.0 capture is catalogued, with the
// capture's # TYPE, and every unconditional catalogue family is in it.
func TestCatalogueMatchesTheRealCapture(t *testing.T) {
	c, err := prom.Parse([]byte(mustRead(t, "stormlog/vllm/q05_c08_metrics_pre.txt")), prom.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Discover(c)
	if len(d.Absent) != 0 || len(d.Unknown) != 0 || len(d.DeprecatedPresent) != 0 || len(d.RemovedPresent) != 0 || len(d.OptionalPresent) != 0 {
		t.Errorf("discovery %+v", d)
	}
	for name, kind := range c.Families {
		if !strings.HasPrefix(name, engine.Prefix) || engine.IsStamp(name, c.Families) {
			continue
		}
		e, ok := engine.Lookup(name)
		if !ok {
			t.Errorf("%s is not catalogued", name)
			continue
		}
		if e.Kind != kind {
			t.Errorf("%s is a %s in the capture, %s in the catalogue", name, kind, e.Kind)
		}
	}
	if len(d.Present) != 37 {
		t.Errorf("%d catalogued families present, want the capture's 37", len(d.Present))
	}
	if strings.Join(d.Engines, ",") != "0" || len(d.ModelNames) != 1 {
		t.Errorf("engines %v models %v", d.Engines, d.ModelNames)
	}
	for _, opt := range []string{"vllm:kv_block_lifetime_seconds", "vllm:kv_offload_*", "vllm:lora_requests_info"} {
		if !setOf(d.OptionalAbsent)[opt] {
			t.Errorf("optional_absent %v lacks %s", d.OptionalAbsent, opt)
		}
	}
	if setOf(d.OptionalAbsent)["vllm:spec_decode_*"] {
		t.Error("spec_decode families are catalogued by name; the prefix is not listed as well")
	}
}

// The vLLM 0.4.3 (V0) capture: retired names with successors, removed names
// without, and no engine label.
func TestCatalogueOnAnOldCapture(t *testing.T) {
	c, err := prom.Parse([]byte(mustRead(t, "vllm/datadog-integrations-core_vllm-0.4.3_v0_opt-125m.prom")), prom.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Discover(c)
	if got := strings.Join(d.DeprecatedPresent, ","); got != "vllm:gpu_cache_usage_perc,vllm:time_per_output_token_seconds" {
		t.Errorf("deprecated_present %s", got)
	}
	for _, n := range []string{"vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc", "vllm:avg_prompt_throughput_toks_per_s", "vllm:avg_generation_throughput_toks_per_s"} {
		if !setOf(d.RemovedPresent)[n] {
			t.Errorf("removed_present %v lacks %s", d.RemovedPresent, n)
		}
	}
	if len(d.Engines) != 0 || len(d.Unknown) != 0 {
		t.Errorf("engines %v unknown %v", d.Engines, d.Unknown)
	}
	if !setOf(d.Absent)["vllm:kv_cache_usage_perc"] {
		t.Errorf("absent %v", d.Absent)
	}

	hybrid, err := prom.Parse([]byte(mustRead(t, "vllm/datadog-integrations-core_vllm-test-fixture_hybrid-0.4.3-plus-v1-families.prom")), prom.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if u := engine.Discover(hybrid).Unknown; strings.Join(u, ",") != "vllm:prompt_tokens_recomputed_total" {
		t.Errorf("unknown %v", u)
	}
}

func TestNamesAndStamps(t *testing.T) {
	for _, c := range []struct{ family, kind, want string }{
		{"vllm:prompt_tokens_total", engine.KindCounter, "vllm:prompt_tokens_created"},
		{"vllm:iteration_tokens_total", engine.KindHistogram, "vllm:iteration_tokens_total_created"},
		{"vllm:request_queue_time_seconds", engine.KindHistogram, "vllm:request_queue_time_seconds_created"},
		{"vllm:num_requests_waiting", engine.KindGauge, ""},
	} {
		if got := engine.StampName(c.family, c.kind); got != c.want {
			t.Errorf("StampName(%s, %s) = %q, want %q", c.family, c.kind, got, c.want)
		}
	}
	for name, want := range map[string]struct {
		field, alias string
		ok           bool
	}{
		"vllm:gpu_cache_usage_perc":           {"kv_cache_usage", "vllm:kv_cache_usage_perc", true},
		"vllm:gpu_prefix_cache_queries_total": {"prefix_cache_queries", "vllm:prefix_cache_queries_total", true},
		"vllm:gpu_prefix_cache_hits_total":    {"prefix_cache_hits", "vllm:prefix_cache_hits_total", true},
		"vllm:time_per_output_token_seconds":  {"inter_token_latency", "vllm:inter_token_latency_seconds", true},
		"vllm:num_requests_waiting":           {"queue_depth", "", true},
		"vllm:num_requests_swapped":           {"", "", false},
		"vllm:brand_new_total":                {"", "", false},
	} {
		e, alias, ok := engine.Resolve(name)
		if ok != want.ok || e.Field != want.field || alias != want.alias {
			t.Errorf("Resolve(%s) = %q %q %v, want %+v", name, e.Field, alias, ok, want)
		}
	}
	fams := map[string]string{"vllm:x_total": "counter", "vllm:x_created": "gauge", "vllm:y_created": "gauge"}
	for name, want := range map[string]engine.Class{
		"vllm:x_created":                    engine.ClassStamp,
		"vllm:y_created":                    engine.ClassUnknown,
		"vllm:x_total":                      engine.ClassUnknown,
		"vllm:kv_offload_total_bytes":       engine.ClassOptional,
		"vllm:diffusion_steps_total":        engine.ClassOptional,
		"vllm:spec_decode_num_drafts_total": engine.ClassCatalogued,
		"vllm:gpu_cache_usage_perc":         engine.ClassDeprecated,
		"vllm:cpu_cache_usage_perc":         engine.ClassRemoved,
		"process_start_time_seconds":        engine.ClassOther,
	} {
		if got := engine.ClassifyName(name, fams); got != want {
			t.Errorf("ClassifyName(%s) = %d, want %d", name, got, want)
		}
	}
	if engine.ClassifyName("vllm:prompt_tokens_created", nil) != engine.ClassStamp {
		t.Error("without families, a catalogued counter's stamp is still a stamp")
	}
	fields := map[string]bool{}
	for _, e := range engine.Catalogue() {
		if fields[e.Field] {
			t.Errorf("field %s appears twice", e.Field)
		}
		fields[e.Field] = true
		if _, ok := engine.LookupRetired(e.Name); ok {
			t.Errorf("%s is both catalogued and retired", e.Name)
		}
	}
	for _, r := range engine.RetiredNames() {
		if r.Successor != "" {
			if _, ok := engine.Lookup(r.Successor); !ok {
				t.Errorf("%s's successor %s is not catalogued", r.Name, r.Successor)
			}
		}
	}
}
