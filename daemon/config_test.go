package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
	"github.com/inferprobe/inferprobe/loadgen/schedule"
)

// baseYAML is a minimal valid configuration; tests edit it with strings.Replace.
const baseYAML = `slos:
  - name: chat
    criteria: ["ttft:500", "e2e:2000"]
targets:
  - name: vllm
    base_url: http://127.0.0.1:8000/v1/
    model: opt
    metrics_url: default
probes:
  - name: steady
    target: vllm
    slo: chat
    every: 5m
    workload:
      concurrency: [2]
      requests: 4
`

func replace(s string, pairs ...string) string { return strings.NewReplacer(pairs...).Replace(s) }

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return c
}

func TestParseDefaults(t *testing.T) {
	c := mustParse(t, baseYAML)
	if c.Listen != "127.0.0.1:9464" || c.HTTPListen != "127.0.0.1:4318" || c.GRPCListen != "127.0.0.1:4317" {
		t.Errorf("listeners %q %q %q", c.Listen, c.HTTPListen, c.GRPCListen)
	}
	if c.ArtifactDir != "inferprobe-artifacts" || c.Keep != 100 || c.MaxAge != 7*24*time.Hour || c.WebConfigFile != "" {
		t.Errorf("artifacts %q keep %d max_age %v web %q", c.ArtifactDir, c.Keep, c.MaxAge, c.WebConfigFile)
	}
	if len(c.Targets) != 1 || len(c.Probes) != 1 {
		t.Fatalf("%d targets, %d probes", len(c.Targets), len(c.Probes))
	}
	tg := c.Targets[0]
	if tg.Name != "vllm" || tg.Endpoint != "http://127.0.0.1:8000/v1/chat/completions" || tg.Model != "opt" ||
		tg.MetricsURL != "http://127.0.0.1:8000/metrics" || tg.ScrapeInterval != 15*time.Second || tg.apiKey != "" {
		t.Errorf("target %+v", tg)
	}
	p := c.Probes[0]
	if p.Name != "steady" || p.Target != tg || p.Every != 5*time.Minute || p.Continuous || p.SpansDrain != 6*time.Second {
		t.Errorf("probe %+v", p)
	}
	if p.SLO == nil || p.SLO.Name != "chat" || p.SLO.Policy.Name != "chat" || p.SLO.Objective != 0.99 || p.SLO.Source != "flags" {
		t.Errorf("slo %+v", p.SLO)
	}
	w := p.Workload
	if w.Endpoint != tg.Endpoint || w.Model != "opt" || !reflect.DeepEqual(w.Concurrency, []int{2}) || w.Requests != 4 {
		t.Errorf("workload %+v", w)
	}
	if p.Tokenizer == nil || p.TokName != "auto" {
		t.Errorf("tokenizer %v %q", p.Tokenizer, p.TokName)
	}
	want := map[string][]float64{"client.ttft": {0.5}, "client.e2e": {2}}
	if got := c.Thresholds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Thresholds() = %v, want %v", got, want)
	}
}

func TestParseValid(t *testing.T) {
	dir := t.TempDir()
	policy := writeFile(t, dir, "policy.json", `{"format":"stormlog.infer.slo","version":1,"name":"interactive",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":250},{"metric":"queue","boundary":"server","max_ms":40}],
		"attainment_target":0.95}`)
	policyNoTarget := writeFile(t, dir, "plain.json", `{"format":"stormlog.infer.slo","version":1,"name":"plain",
		"criteria":[{"metric":"e2e","boundary":"client","max_ms":1500}]}`)
	t.Setenv("INFERPROBE_DAEMON_TEST_KEY", "sk-test-123")
	// A second probe and a second policy sharing the ttft criterion.
	twoProbes := replace(baseYAML, `    criteria: ["ttft:500", "e2e:2000"]
`, `    criteria: ["ttft:500", "e2e:2000"]
  - name: tight
    criteria: ["ttft:100"]
`) + `  - name: second
    target: vllm
    slo: tight
    continuous: true
    workload: {requests: 3}
`
	cases := []struct {
		name  string
		text  string
		check func(t *testing.T, c *Config)
	}{
		{"explicit settings", replace(baseYAML, "slos:", `listen: "[::1]:9999"
receiver:
  http_listen: 0.0.0.0:14318
  grpc_listen: ""
artifacts:
  dir: /var/lib/inferprobe
  keep: 0
  max_age: 0s
slos:`, "every: 5m", "every: 90s\n    spans_drain: 250ms"), func(t *testing.T, c *Config) {
			if c.Listen != "[::1]:9999" || c.HTTPListen != "0.0.0.0:14318" || c.GRPCListen != "" {
				t.Errorf("listeners %q %q %q", c.Listen, c.HTTPListen, c.GRPCListen)
			}
			if c.ArtifactDir != "/var/lib/inferprobe" || c.Keep != 0 || c.MaxAge != 0 {
				t.Errorf("artifacts %q %d %v", c.ArtifactDir, c.Keep, c.MaxAge)
			}
			if p := c.Probes[0]; p.Every != 90*time.Second || p.SpansDrain != 250*time.Millisecond {
				t.Errorf("every %v drain %v", p.Every, p.SpansDrain)
			}
		}},
		{"both receivers disabled: no span drain", replace(baseYAML, "slos:", "receiver: {http_listen: \"\", grpc_listen: \"\"}\nslos:"), func(t *testing.T, c *Config) {
			if c.HTTPListen != "" || c.GRPCListen != "" || c.Probes[0].SpansDrain != 0 {
				t.Errorf("listeners %q %q drain %v", c.HTTPListen, c.GRPCListen, c.Probes[0].SpansDrain)
			}
		}},
		{"endpoint, explicit metrics url, api key env", replace(baseYAML,
			"base_url: http://127.0.0.1:8000/v1/", "endpoint: https://gw.example:8443/openai/v1/chat/completions",
			"metrics_url: default", "metrics_url: http://10.0.0.2:9100/metrics\n    api_key_env: INFERPROBE_DAEMON_TEST_KEY\n    scrape_interval: 1m"),
			func(t *testing.T, c *Config) {
				tg := c.Targets[0]
				if tg.Endpoint != "https://gw.example:8443/openai/v1/chat/completions" || tg.MetricsURL != "http://10.0.0.2:9100/metrics" ||
					tg.apiKey != "sk-test-123" || tg.ScrapeInterval != time.Minute {
					t.Errorf("target %+v", tg)
				}
				if c.Probes[0].Workload.APIKey != "sk-test-123" {
					t.Errorf("the workload's API key is %q", c.Probes[0].Workload.APIKey)
				}
			}},
		{"default metrics url of an endpoint", replace(baseYAML, "base_url: http://127.0.0.1:8000/v1/", "endpoint: https://gw.example:8443/openai/v1/chat/completions"),
			func(t *testing.T, c *Config) {
				if c.Targets[0].MetricsURL != "https://gw.example:8443/metrics" {
					t.Errorf("metrics url %q", c.Targets[0].MetricsURL)
				}
			}},
		{"base url with a query", replace(baseYAML, "base_url: http://127.0.0.1:8000/v1/", "base_url: http://127.0.0.1:8000/v1/?tenant=a"),
			func(t *testing.T, c *Config) {
				// The path is joined before the query, as profile --base-url does.
				if tg := c.Targets[0]; tg.Endpoint != "http://127.0.0.1:8000/v1/chat/completions?tenant=a" || tg.MetricsURL != "http://127.0.0.1:8000/metrics" {
					t.Errorf("endpoint %q metrics %q", tg.Endpoint, tg.MetricsURL)
				}
			}},
		{"no metrics url", replace(baseYAML, "    metrics_url: default\n", ""), func(t *testing.T, c *Config) {
			if c.Targets[0].MetricsURL != "" {
				t.Errorf("metrics url %q", c.Targets[0].MetricsURL)
			}
		}},
		{"policy file with attainment target", replace(baseYAML, `name: chat
    criteria: ["ttft:500", "e2e:2000"]`, "name: interactive\n    file: "+policy, "slo: chat", "slo: interactive"),
			func(t *testing.T, c *Config) {
				s := c.Probes[0].SLO
				if s.Name != "interactive" || s.Source != "file" || s.Objective != 0.95 {
					t.Errorf("slo %+v", s)
				}
				want := map[string][]float64{"client.ttft": {0.25}, "server.queue": {0.04}}
				if got := c.Thresholds(); !reflect.DeepEqual(got, want) {
					t.Errorf("Thresholds() = %v, want %v", got, want)
				}
			}},
		{"policy file without target, objective given", replace(baseYAML, `name: chat
    criteria: ["ttft:500", "e2e:2000"]`, "name: plain\n    file: "+policyNoTarget+"\n    objective: 0.9", "slo: chat", "slo: plain"),
			func(t *testing.T, c *Config) {
				if s := c.Probes[0].SLO; s.Objective != 0.9 {
					t.Errorf("objective %v", s.Objective)
				}
			}},
		{"criteria objective", replace(baseYAML, `"e2e:2000"]`, "\"e2e:2000\"]\n    objective: 0.995"), func(t *testing.T, c *Config) {
			if s := c.Probes[0].SLO; s.Objective != 0.995 {
				t.Errorf("objective %v", s.Objective)
			}
		}},
		{"probe without slo, thresholds of used policies only", replace(baseYAML, "    slo: chat\n", ""), func(t *testing.T, c *Config) {
			if c.Probes[0].SLO != nil || len(c.Thresholds()) != 0 {
				t.Errorf("slo %+v thresholds %v", c.Probes[0].SLO, c.Thresholds())
			}
		}},
		{"two probes sharing thresholds", twoProbes, func(t *testing.T, c *Config) {
			want := map[string][]float64{"client.ttft": {0.1, 0.5}, "client.e2e": {2}}
			if got := c.Thresholds(); !reflect.DeepEqual(got, want) {
				t.Errorf("Thresholds() = %v, want %v", got, want)
			}
			p := c.Probes[1]
			// A continuous closed loop of 3 requests has no rate: a minute per run.
			if !p.Continuous || p.runLength() != time.Minute || p.Workload.Requests != 3 {
				t.Errorf("second probe %+v, run length %v", p, p.runLength())
			}
		}},
		{"continuous with duration", replace(baseYAML, "every: 5m", "continuous: true", "requests: 4", "duration: 30"), func(t *testing.T, c *Config) {
			p := c.Probes[0]
			if !p.Continuous || p.Every != 0 || p.Workload.Duration != 30*time.Second || p.runLength() != 30*time.Second {
				t.Errorf("probe %+v run length %v", p, p.runLength())
			}
		}},
		{"durations in Prometheus form", replace(baseYAML, "every: 5m", "every: 1d", "metrics_url: default", "metrics_url: default\n    scrape_interval: 1h", "slos:", "artifacts: {max_age: 1w}\nslos:"), func(t *testing.T, c *Config) {
			if c.Probes[0].Every != 24*time.Hour || c.MaxAge != 7*24*time.Hour || c.Targets[0].ScrapeInterval != time.Hour {
				t.Errorf("every %v max_age %v scrape %v", c.Probes[0].Every, c.MaxAge, c.Targets[0].ScrapeInterval)
			}
		}},
		{"Go durations", replace(baseYAML, "every: 5m", "every: 1h30m"), func(t *testing.T, c *Config) {
			if c.Probes[0].Every != 90*time.Minute {
				t.Errorf("every %v", c.Probes[0].Every)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustParse(t, tc.text))
		})
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	slidingPolicy := writeFile(t, dir, "sliding.json", `{"format":"stormlog.infer.slo","version":1,"name":"chat",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":250}],"interval":{"kind":"sliding","seconds":300}}`)
	targetPolicy := writeFile(t, dir, "target.json", `{"format":"stormlog.infer.slo","version":1,"name":"chat",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":250}],"attainment_target":0.95}`)
	fullPolicy := writeFile(t, dir, "full.json", `{"format":"stormlog.infer.slo","version":1,"name":"chat",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":250}],"attainment_target":1}`)
	otherPolicy := writeFile(t, dir, "other.json", `{"format":"stormlog.infer.slo","version":1,"name":"other",
		"criteria":[{"metric":"ttft","boundary":"client","max_ms":250}]}`)
	badWeb := writeFile(t, dir, "web-bad.yml", "basic_auth_users: [1, 2]\n")
	unknownWeb := writeFile(t, dir, "web-unknown.yml", "no_such_setting: true\n")
	t.Setenv("INFERPROBE_DAEMON_TEST_EMPTY", "")
	os.Unsetenv("INFERPROBE_DAEMON_TEST_UNSET")

	slo := func(s string) string {
		return replace(baseYAML, `    criteria: ["ttft:500", "e2e:2000"]`+"\n", s)
	}
	workload := func(s string) string {
		return replace(baseYAML, "      concurrency: [2]\n      requests: 4\n", s)
	}
	cases := []struct {
		name, text, key, msg string
	}{
		{"empty file", "", "", "empty"},
		{"only a comment", "# nothing\n", "", "empty"},
		{"two documents", baseYAML + "---\n" + baseYAML, "", "more than one YAML document"},
		{"unknown top-level field", baseYAML + "bogus: 1\n", "bogus", `unknown key "bogus" (line`},
		{"unknown probe field", replace(baseYAML, "every: 5m", "every: 5m\n    evry: 5m"), "probes[0].evry", `unknown key "evry"`},
		{"not a mapping", "[1, 2]\n", "", "line 1: want a mapping, not a list"},
		{"listen without port", "listen: nowhere\n" + baseYAML, "listen", "HOST:PORT"},
		{"listen empty", "listen: \"\"\n" + baseYAML, "listen", "HOST:PORT"},
		{"listen port out of range", "listen: 127.0.0.1:70000\n" + baseYAML, "listen", "0..65535"},
		{"http receiver", "receiver: {http_listen: 'a b:1'}\n" + baseYAML, "receiver.http_listen", "HOST:PORT"},
		{"grpc receiver", "receiver: {grpc_listen: '127.0.0.1'}\n" + baseYAML, "receiver.grpc_listen", "HOST:PORT"},
		{"web config missing", "web_config_file: " + filepath.Join(dir, "nope.yml") + "\n" + baseYAML, "web_config_file", "no such file"},
		{"web config invalid", "web_config_file: " + badWeb + "\n" + baseYAML, "web_config_file", "cannot unmarshal"},
		{"web config unknown key", "web_config_file: " + unknownWeb + "\n" + baseYAML, "web_config_file", "no_such_setting"},
		{"web config a directory", "web_config_file: " + dir + "\n" + baseYAML, "web_config_file", "not a regular file"},
		{"web config /dev/zero", "web_config_file: /dev/zero\n" + baseYAML, "web_config_file", "not a regular file"},
		{"keep negative", "artifacts: {keep: -1}\n" + baseYAML, "artifacts.keep", "≥ 0"},
		{"max_age negative", "artifacts: {max_age: -1h}\n" + baseYAML, "artifacts.max_age", "must be at least 0s, not -1h0m0s (0: no age limit)"},
		{"max_age bare number", "artifacts: {max_age: 3600}\n" + baseYAML, "artifacts.max_age", "want a duration with a unit"},
		{"slo name", replace(baseYAML, "name: chat", "name: 'bad name'"), "slos[0].name", "bad name"},
		{"slo name not a policy name", replace(baseYAML, "name: chat", "name: Chat-1", "slo: chat", "slo: Chat-1"), "slos[0].name", "lowercase"},
		{"slo criteria and file", slo("    criteria: [\"ttft:500\"]\n    file: " + targetPolicy + "\n"), "slos[0]", "mutually exclusive"},
		{"slo neither", slo(""), "slos[0]", "criteria or file is required"},
		{"slo bad criterion", slo("    criteria: [\"ttft:abc\"]\n"), "slos[0].criteria", ""},
		{"slo missing file", slo("    file: " + filepath.Join(dir, "none.json") + "\n"), "slos[0].file", "no such file"},
		{"slo file name differs", slo("    file: " + otherPolicy + "\n"), "slos[0].name", `"other"`},
		{"slo sliding interval", slo("    file: " + slidingPolicy + "\n"), "slos[0].file", "measured window"},
		{"slo objective with policy target", slo("    file: " + targetPolicy + "\n    objective: 0.9\n"), "slos[0].objective", "attainment_target"},
		{"slo policy target 1", slo("    file: " + fullPolicy + "\n"), "slos[0]", "no error budget"},
		{"slo objective 1", slo("    criteria: [\"ttft:500\"]\n    objective: 1\n"), "slos[0].objective", "(0, 1)"},
		{"slo objective 0", slo("    criteria: [\"ttft:500\"]\n    objective: 0\n"), "slos[0].objective", "(0, 1)"},
		{"slo objective NaN", slo("    criteria: [\"ttft:500\"]\n    objective: .nan\n"), "slos[0].objective", "(0, 1)"},
		{"slo used twice", replace(baseYAML, "targets:", "  - name: chat\n    criteria: [\"ttft:1\"]\ntargets:"), "slos[1].name", "used twice"},
		{"no targets", replace(baseYAML, "targets:\n  - name: vllm\n    base_url: http://127.0.0.1:8000/v1/\n    model: opt\n    metrics_url: default\n", ""), "targets", "at least one"},
		{"target name", replace(baseYAML, "name: vllm", "name: ''"), "targets[0].name", ""},
		{"target endpoint and base_url", replace(baseYAML, "model: opt", "model: opt\n    endpoint: http://127.0.0.1:8000/v1/chat/completions"), "targets[0]", "exactly one of endpoint and base_url"},
		{"target neither", replace(baseYAML, "    base_url: http://127.0.0.1:8000/v1/\n", ""), "targets[0]", "exactly one of endpoint and base_url"},
		{"target base_url is an endpoint", replace(baseYAML, "/v1/\n", "/v1/chat/completions\n"), "targets[0].base_url", "/v1 base"},
		{"target model", replace(baseYAML, "    model: opt\n", ""), "targets[0].model", "required"},
		{"api_key_env not a name", replace(baseYAML, "model: opt", "model: opt\n    api_key_env: 'BAD-NAME'"), "targets[0].api_key_env", "not an environment variable name"},
		{"api_key_env unset", replace(baseYAML, "model: opt", "model: opt\n    api_key_env: INFERPROBE_DAEMON_TEST_UNSET"), "targets[0].api_key_env", "$INFERPROBE_DAEMON_TEST_UNSET is not set"},
		{"api_key_env empty", replace(baseYAML, "model: opt", "model: opt\n    api_key_env: INFERPROBE_DAEMON_TEST_EMPTY"), "targets[0].api_key_env", "is not set"},
		{"metrics_url not a URL", replace(baseYAML, "metrics_url: default", "metrics_url: 'ftp://x/metrics'"), "targets[0].metrics_url", "http"},
		{"metrics_url with credentials", replace(baseYAML, "metrics_url: default", "metrics_url: 'http://u:p@x/metrics'"), "targets[0].metrics_url", "credentials"},
		{"metrics_url default of a bad endpoint", replace(baseYAML, "base_url: http://127.0.0.1:8000/v1/", "endpoint: '/relative/chat/completions'"), "targets[0].endpoint", "absolute"},
		{"scrape_interval too short", replace(baseYAML, "metrics_url: default", "metrics_url: default\n    scrape_interval: 50ms"), "targets[0].scrape_interval", "must be at least 100ms, not 50ms"},
		{"scrape_interval too long", replace(baseYAML, "metrics_url: default", "metrics_url: default\n    scrape_interval: 2h"), "targets[0].scrape_interval", "must be at most 1h0m0s, not 2h0m0s"},
		{"target used twice", replace(baseYAML, "probes:", "  - name: vllm\n    base_url: http://127.0.0.1:8001/v1\n    model: opt\nprobes:"), "targets[1].name", "used twice"},
		{"no probes", replace(baseYAML, baseYAML[strings.Index(baseYAML, "probes:"):], ""), "probes", "at least one"},
		{"probe name", replace(baseYAML, "name: steady", "name: '-x'"), "probes[0].name", ""},
		{"unknown target", replace(baseYAML, "target: vllm", "target: nope"), "probes[0].target", `no target is named "nope"`},
		{"unknown slo", replace(baseYAML, "slo: chat", "slo: nope"), "probes[0].slo", `no slo is named "nope"`},
		{"every and continuous", replace(baseYAML, "every: 5m", "every: 5m\n    continuous: true"), "probes[0]", "mutually exclusive"},
		{"no schedule", replace(baseYAML, "    every: 5m\n", ""), "probes[0]", "a schedule is required"},
		{"every below 1s", replace(baseYAML, "every: 5m", "every: 500ms"), "probes[0].every", "at least 1s"},
		{"every bare number", replace(baseYAML, "every: 5m", "every: 60"), "probes[0].every", "want a duration with a unit"},
		{"every quoted number", replace(baseYAML, "every: 5m", "every: '60'"), "probes[0].every", "not a duration"},
		{"every abc", replace(baseYAML, "every: 5m", "every: abc"), "probes[0].every", `"abc" is not a duration`},
		{"every a list", replace(baseYAML, "every: 5m", "every: [5m]"), "probes[0].every", "not a list"},
		{"spans_drain negative", replace(baseYAML, "every: 5m", "every: 5m\n    spans_drain: -1s"), "probes[0].spans_drain", "must be at least 0s, not -1s"},
		{"spans_drain too long", replace(baseYAML, "every: 5m", "every: 5m\n    spans_drain: 11m"), "probes[0].spans_drain", "must be at most 10m0s, not 11m0s"},
		{"workload model", workload("      model: other\n"), "probes[0].workload.model", "is set by the target's model"},
		{"workload endpoint", workload("      endpoint: http://x/v1/chat/completions\n"), "probes[0].workload.endpoint", "is set by the target's endpoint"},
		{"workload api-key", workload("      api-key: k\n"), "probes[0].workload.api-key", "is set by the target's api_key_env"},
		{"workload run-id", workload("      run-id: r\n"), "probes[0].workload.run-id", "is set by a new run id per run"},
		{"workload output", workload("      output: x.jsonl\n"), "probes[0].workload.output", "is set by the artifact directory"},
		{"workload slo", workload("      slo: ['ttft:1']\n"), "probes[0].workload.slo", "is set by the probe's slo"},
		{"workload spans drain", workload("      vllm-spans-drain: 1\n"), "probes[0].workload.vllm-spans-drain", "is set by the probe's spans_drain"},
		{"workload quiet", workload("      quiet: true\n"), "probes[0].workload.quiet", "is not a probe setting"},
		{"workload dashed key", workload("      --requests: 4\n"), "probes[0].workload.--requests", "without dashes"},
		{"workload key with =", workload("      'requests=4': 1\n"), "probes[0].workload.requests=4", "without dashes"},
		{"workload nested map", workload("      requests: {a: 1}\n"), "probes[0].workload.requests", "want a number, a string"},
		{"workload list of lists", workload("      input-tokens: [[1]]\n"), "probes[0].workload.input-tokens", "want a number, a string"},
		{"workload empty list", workload("      input-tokens: []\n"), "probes[0].workload.input-tokens", "an empty list"},
		{"workload null", workload("      requests:\n"), "probes[0].workload.requests", "a value is required"},
		{"workload null in list", workload("      input-tokens: [1, null]\n"), "probes[0].workload.input-tokens", "a value is required"},
		{"workload unknown flag", workload("      bogus-flag: 1\n"), "probes[0].workload.bogus-flag", "bogus-flag"},
		{"workload invalid value", workload("      requests: many\n"), "probes[0].workload.requests", "requests"},
		{"workload rejected by Validate", workload("      arrival: poisson\n      rate: [-1]\n      requests: 4\n"), "probes[0].workload.rate", "--rate values must be finite and > 0"},
		{"continuous without duration or requests", replace(baseYAML, "every: 5m", "continuous: true", "      requests: 4\n", ""), "probes[0].workload", "continuous probe needs duration or requests"},
		{"continuous with one request", replace(baseYAML, "every: 5m", "continuous: true", "requests: 4", "requests: 1"), "probes[0].workload", "continuous probe needs"},
		{"probe used twice", baseYAML + "  - name: steady\n    target: vllm\n    every: 1h\n    workload: {requests: 2}\n", "probes[1].name", "used twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.text))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v\n%s", c, tc.text)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || err != error(ce) {
				t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
			}
			if ce.Key != tc.key {
				t.Errorf("Key %q, want %q (%v)", ce.Key, tc.key, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			want := "config: "
			if tc.key != "" {
				want += tc.key + ": "
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "ok.yaml", baseYAML)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || len(c.Probes) != 1 {
		t.Fatalf("Load: path %q, %d probes", c.Path, len(c.Probes))
	}

	// Over MaxConfigBytes: refused without parsing (a comment would be valid YAML).
	big := baseYAML + "#" + strings.Repeat("x", MaxConfigBytes) + "\n"
	_, err = Load(writeFile(t, dir, "big.yaml", big))
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "larger than 4194304 bytes") {
		t.Fatalf("a file over the limit: %v", err)
	}
	// Exactly at the limit: read whole.
	exact := baseYAML + "#" + strings.Repeat("x", MaxConfigBytes-len(baseYAML)-2) + "\n"
	if len(exact) != MaxConfigBytes {
		t.Fatalf("test file is %d bytes", len(exact))
	}
	if _, err := Load(writeFile(t, dir, "exact.yaml", exact)); err != nil {
		t.Fatalf("a file of exactly MaxConfigBytes: %v", err)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.As(err, &ce) || !errors.Is(err, err) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestWorkloadForms: a workload mapping's values in every form profile's flags take them —
// scalars, lists and comma-separated strings for list flags, numbers written as strings,
// booleans as strings or numbers, seconds as numbers, extra-body as a mapping or a JSON
// string — with the target's endpoint, model and key.
func TestWorkloadForms(t *testing.T) {
	cases := []struct {
		workload string
		check    func(c *loadgen.Config) bool
	}{
		{"{arrival: poisson, rate: [2, 4.5], duration: 60}", func(c *loadgen.Config) bool {
			return c.Arrival == schedule.Poisson && reflect.DeepEqual(c.Rates, []float64{2, 4.5}) && c.Duration == time.Minute && c.MaxInFlight == 128
		}},
		{"{arrival: fixed-rate, rate: 2, requests: '6', max-in-flight: 4, overflow: drop}", func(c *loadgen.Config) bool {
			return reflect.DeepEqual(c.Rates, []float64{2}) && c.Requests == 6 && c.MaxInFlight == 4 && c.Overflow == loadgen.OverflowDrop
		}},
		{"{input-tokens: '512,2048', output-tokens: [16, '32,64'], concurrency: [1, 2]}", func(c *loadgen.Config) bool {
			return reflect.DeepEqual(c.InputTokens, []int{512, 2048}) && reflect.DeepEqual(c.OutputTokens, []int{16, 32, 64}) && reflect.DeepEqual(c.Concurrency, []int{1, 2})
		}},
		{"{stream: false}", func(c *loadgen.Config) bool { return !c.Stream && c.StreamUsage }},
		{"{no-stream: true, no-stream-usage: 'true'}", func(c *loadgen.Config) bool { return !c.Stream && !c.StreamUsage }},
		{"{stream-usage: 0}", func(c *loadgen.Config) bool { return c.Stream && !c.StreamUsage }},
		{"{extra-body: {ignore_eos: true, top_k: 5}}", func(c *loadgen.Config) bool {
			return fmt.Sprint(c.ExtraBody) == "map[ignore_eos:true top_k:5]"
		}},
		{`{extra-body: '{"temperature": 0.5}'}`, func(c *loadgen.Config) bool { return fmt.Sprint(c.ExtraBody) == "map[temperature:0.5]" }},
		{"{seed: -9223372036854775808, timeout: 2.5, drain-timeout: 1, requests: 0x10}", func(c *loadgen.Config) bool {
			return c.Seed == -9223372036854775808 && c.Timeout == 2500*time.Millisecond && c.DrainTimeout == time.Second && c.Requests == 16
		}},
		{"{prompt-mode: shared-prefix, shared-prefix-ratio: 0.25, prefix-groups: 2, cache-state: cold, cache-reset-timeout: 0}", func(c *loadgen.Config) bool {
			return c.PromptMode == prompt.SharedPrefix && c.SharedPrefixRatio == 0.25 && c.PrefixGroups == 2 && c.CacheState == loadgen.CacheCold && c.CacheResetTimeout == 0
		}},
	}
	for _, tc := range cases {
		text := replace(baseYAML, "      concurrency: [2]\n      requests: 4\n", "      "+tc.workload+"\n", "workload:\n", "workload:")
		c, err := Parse([]byte(text))
		if err != nil {
			t.Errorf("%s: %v", tc.workload, err)
			continue
		}
		w := c.Probes[0].Workload
		if w.Endpoint != "http://127.0.0.1:8000/v1/chat/completions" || w.Model != "opt" || w.APIKey != "" || !tc.check(w) {
			t.Errorf("%s: %+v", tc.workload, w)
		}
	}
}

// TestWorkloadErrorsNameKeyAndLine: a workload error names the key and its line — the list
// item's line for a bad item, the key's line for a rule about that setting, the mapping's
// for a rule about the whole workload — in the configuration's terms, without Go's.
func TestWorkloadErrorsNameKeyAndLine(t *testing.T) {
	workload := func(s string) string { return replace(baseYAML, "      concurrency: [2]\n      requests: 4\n", s) }
	// baseYAML's workload mapping starts on line 15.
	for _, c := range []struct{ name, text, want string }{
		{"wrong type in a flow list", workload("      requests: 4\n      input-tokens: [512, \"x\"]\n"),
			`config: probes[0].workload.input-tokens: want a whole number, not "x" (line 16)`},
		{"wrong type in a block list", workload("      requests: 4\n      rate:\n        - 1\n        - fast\n      arrival: poisson\n"),
			`config: probes[0].workload.rate: want a number, not "fast" (line 18)`},
		{"wrong type in a comma string", workload("      input-tokens: '512,1k'\n"),
			`config: probes[0].workload.input-tokens: want a whole number, not "1k" (line 15)`},
		{"unknown key", workload("      requests: 4\n      input-tokenz: [512]\n"),
			`config: probes[0].workload.input-tokenz: unknown key "input-tokenz" (line 16)`},
		{"key given twice", workload("      requests: 4\n      requests: 5\n"),
			`config: probes[0].workload.requests: is given twice (first on line 15) (line 16)`},
		{"not a mapping", workload("      - requests\n"), `config: probes[0].workload: want a mapping of profile flags (e.g. requests: 10), not a list (line 15)`},
		{"rule about a setting", workload("      requests: 4\n      max-in-flight: 4\n"),
			"config: probes[0].workload.max-in-flight: --max-in-flight and --overflow apply to open-loop arrivals only (line 16)"},
		{"rule about a setting not given", workload("      arrival: poisson\n      requests: 4\n"),
			"config: probes[0].workload.arrival: --arrival poisson needs --rate (line 15)"},
		{"rule about the workload", workload("      concurrency: [2, 2]\n"), "config: probes[0].workload: two workload cases would share the ID c2_in32_out8 (line 15)"},
		{"reserved key", workload("      requests: 4\n      model: x\n"), "config: probes[0].workload.model: is set by the target's model (line 16)"},
	} {
		_, err := Parse([]byte(c.text))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v\n want %s", c.name, err, c.want)
		}
	}
}

// TestAPIKeyNeverInErrors: the key read from api_key_env reaches the workload, and no
// configuration error repeats it — whichever rule of the workload, its decoding or the rest
// of the file refuses the configuration.
func TestAPIKeyNeverInErrors(t *testing.T) {
	const secret = "sk-very-secret-0123456789"
	t.Setenv("INFERPROBE_DAEMON_TEST_SECRET", secret)
	withKey := replace(baseYAML, "model: opt", "model: opt\n    api_key_env: INFERPROBE_DAEMON_TEST_SECRET")
	c, err := Parse([]byte(withKey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Probes[0].Workload.APIKey != secret {
		t.Fatalf("the workload's API key is %q", c.Probes[0].Workload.APIKey)
	}
	texts := []string{
		replace(withKey, "every: 5m", "continuous: true", "requests: 4", "requests: 1"),
		replace(withKey, "metrics_url: default", "metrics_url: 'http://u:p@x/metrics'"),
		replace(withKey, "slo: chat", "slo: none"),
		replace(withKey, "base_url: http://127.0.0.1:8000/v1/", "base_url: http://127.0.0.1:99999/v1/"),
	}
	for _, w := range []string{
		"requests: many", "bogus: 1", "arrival: poisson", "api-key: " + secret, "input-tokens: [1, x]", "rate: [1]",
		"timeout: 0", "timeout: .nan", "drain-timeout: 0", "duration: 0", "requests: 0", "concurrency: [0]", "max-in-flight: 2",
		"extra-body: '{'", "extra-body: {model: x}", "max-tokens-field: x", "arrival: ''", "arrival: replay",
		"arrival-trace: /nonexistent/trace.jsonl", "arrival-trace-case: x", "prompt-mode: x", "cache-state: x",
		"cache-reset-url: ftp://x", "tokenizer: x", "tiktoken-encoding: x", "output-tokens: [99999999]",
		"stream: x", "no-stream: true\n      stream: true", "seed: 2024-01-01", "requests: {a: 1}",
	} {
		texts = append(texts, replace(withKey, "requests: 4", w))
	}
	for _, text := range texts {
		_, err := Parse([]byte(text))
		if err == nil {
			t.Fatalf("accepted:\n%s", text)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:12]) {
			t.Fatalf("the API key appears in %q", err)
		}
	}
	// A key that no HTTP header can carry is refused without repeating it.
	t.Setenv("INFERPROBE_DAEMON_TEST_SECRET", secret+"\n")
	if _, err := Parse([]byte(withKey)); err == nil || strings.Contains(err.Error(), secret[:12]) || !strings.Contains(err.Error(), "HTTP header") {
		t.Fatalf("a key with a newline: %v", err)
	}
}

// FuzzParse: no input panics Parse, and every error is a *ConfigError.
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseYAML))
	f.Add([]byte(searchYAML))
	f.Add([]byte(replace(baseYAML, "every: 5m", "continuous: true", "requests: 4", "duration: 1")))
	f.Add([]byte("listen: ':0'\nreceiver: {http_listen: '', grpc_listen: ''}\n" + baseYAML))
	f.Add([]byte("targets: [{name: a, endpoint: 'http://h/v1/chat/completions', model: m}]\nprobes: [{name: p, target: a, every: 1w, workload: {rate: [1, 2.5], arrival: poisson, requests: 3, x: [true, null]}}]\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("artifacts: {keep: 99999999999999999999, max_age: 1y2w3d}\n"))
	f.Add([]byte("probes: [{workload: {1: 2, ? [a]: b}}]\n"))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
			}
			if c != nil {
				t.Fatal("a config with an error")
			}
			return
		}
		if len(c.Targets) == 0 || len(c.Probes) == 0 {
			t.Fatalf("a valid config without targets or probes: %+v", c)
		}
		for _, p := range c.Probes {
			if p.Workload == nil || p.Tokenizer == nil || p.Target == nil || (p.Every < time.Second && !p.Continuous) {
				t.Fatalf("probe %+v", p)
			}
		}
		_ = c.Thresholds()
	})
}

// Two probes sharing a policy give one set of bucket boundaries: removing one of them on a
// reload must not look like a threshold change (which rebuilds the histograms).
func TestThresholdsDeduplicated(t *testing.T) {
	text := baseYAML + "  - name: second\n    target: vllm\n    slo: chat\n    every: 1h\n    workload: {requests: 2}\n"
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	one, err := Parse([]byte(baseYAML))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Thresholds(), one.Thresholds(); fmt.Sprint(got) != fmt.Sprint(want) || len(got["client.ttft"]) != 1 {
		t.Fatalf("thresholds with two probes %v, with one %v", got, want)
	}
}

// Workload values the flag parser refuses name the workload key, without Go's internals;
// counts are whole numbers.
func TestWorkloadAndCountErrorsInConfigTerms(t *testing.T) {
	for _, c := range []struct{ name, text, key, msg string }{
		{"keep fraction", "artifacts: {keep: 2.9}\n" + baseYAML, "artifacts.keep", `want a whole number, not "2.9"`},
		{"nested list", replace(baseYAML, "requests: 4", "requests: 4\n      rate: [[1]]"), "probes[0].workload.rate", "not a list inside a list"},
		{"date", replace(baseYAML, "requests: 4", "requests: 4\n      seed: 2024-01-01"), "probes[0].workload.seed", "quote dates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.text))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "interface") {
				t.Fatalf("%v, want key %s saying %q", err, c.key, c.msg)
			}
		})
	}
}
