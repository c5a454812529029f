package dashboards

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// ruleFile is the Prometheus rule-file format: a list of groups, each a name, an optional
// evaluation interval and its rules; a rule is a recording rule (record + expr, optional
// labels) or an alerting rule (alert + expr, optional for, labels and annotations).
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// strictYAML decodes one YAML document, rejecting unknown fields.
func strictYAML(b []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// loadRules parses every shipped rule file, in file-name order.
func loadRules(t *testing.T) map[string]ruleFile {
	t.Helper()
	out := map[string]ruleFile{}
	for name, b := range Rules() {
		var f ruleFile
		if err := strictYAML(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(f.Groups) == 0 {
			t.Fatalf("%s: no groups", name)
		}
		out[name] = f
	}
	return out
}

func allRules(files map[string]ruleFile) []rule {
	var out []rule
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, g := range files[name].Groups {
			out = append(out, g.Rules...)
		}
	}
	return out
}

// Series inferprobe serve exports (the metric catalogue), by kind.
var (
	catalogueCounters = []string{
		"inferprobe_requests_total", "inferprobe_prompt_tokens_total", "inferprobe_output_tokens_total",
		"inferprobe_slo_requests_total", "inferprobe_probe_runs_total",
		"inferprobe_receiver_spans_received_total", "inferprobe_receiver_spans_rejected_total",
		"inferprobe_receiver_spans_dropped_total", "inferprobe_receiver_spans_unrouted_total",
		"inferprobe_capacity_searches_total",
	}
	catalogueHistograms = []string{
		"inferprobe_ttft_seconds", "inferprobe_ttft_from_intended_seconds", "inferprobe_e2e_seconds",
		"inferprobe_e2e_from_intended_seconds", "inferprobe_tpot_seconds", "inferprobe_dispatch_lag_seconds",
		"inferprobe_server_queue_seconds", "inferprobe_server_prefill_seconds", "inferprobe_server_decode_seconds",
		"inferprobe_server_ttft_seconds", "inferprobe_server_e2e_seconds",
	}
	catalogueGauges = []string{
		"inferprobe_slo_objective_ratio", "inferprobe_slo_attainment_ratio", "inferprobe_goodput_requests_per_second",
		"inferprobe_span_join_coverage_ratio", "inferprobe_probe_last_success_timestamp_seconds",
		"inferprobe_probe_last_run_timestamp_seconds", "inferprobe_probe_interval_seconds", "inferprobe_probe_running",
		"inferprobe_in_flight_requests", "inferprobe_probe_schedule_met", "inferprobe_probe_client_limited", "inferprobe_scrape_up",
		"inferprobe_scrape_duration_seconds", "inferprobe_build_info",
		"inferprobe_capacity", "inferprobe_capacity_previous", "inferprobe_capacity_binding_criterion",
		"inferprobe_capacity_last_search_timestamp_seconds",
	}
	// Server-side series the dashboards may read (vLLM /metrics, dcgm-exporter).
	serverSeries = []string{
		"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
		"vllm:gpu_cache_usage_perc", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
		"vllm:time_to_first_token_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
		"vllm:request_prefill_time_seconds_bucket", "vllm:request_decode_time_seconds_bucket",
		"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
	}
)

// allowedSeries: catalogue series (histograms as _bucket/_sum/_count), server series, and the
// names recorded by the shipped rules. process_* and go_* (the process and Go collectors of
// inferprobe, and vLLM's process_resident_memory_bytes) are allowed by prefix.
func allowedSeries(t *testing.T) map[string]bool {
	ok := map[string]bool{}
	for _, n := range slices.Concat(catalogueCounters, catalogueGauges, serverSeries) {
		ok[n] = true
	}
	for _, h := range catalogueHistograms {
		ok[h+"_bucket"], ok[h+"_sum"], ok[h+"_count"] = true, true, true
	}
	for _, r := range allRules(loadRules(t)) {
		if r.Record != "" {
			ok[r.Record] = true
		}
	}
	return ok
}

func checkNames(t *testing.T, where, expr string, ok map[string]bool) {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v in %q", where, err, expr)
		return
	}
	if len(names) == 0 {
		t.Errorf("%s: %q selects no series", where, expr)
	}
	for _, n := range names {
		if !ok[n] && !strings.HasPrefix(n, "process_") && !strings.HasPrefix(n, "go_") {
			t.Errorf("%s: %q reads %s, which is neither in the metric catalogue nor recorded here", where, expr, n)
		}
	}
}

// TestSeriesInCatalogue: every PromQL expression of the dashboards and rules reads only known
// series.
func TestSeriesInCatalogue(t *testing.T) {
	ok := allowedSeries(t)
	for name, d := range loadDashboards(t) {
		for _, e := range panelExprs(t, d) {
			checkNames(t, name, e, ok)
		}
	}
	recorded := map[string]bool{}
	for _, r := range allRules(loadRules(t)) {
		checkNames(t, "rule "+r.Record+r.Alert, r.Expr, ok)
		if r.Record != "" {
			if recorded[r.Record] {
				t.Errorf("%s recorded twice", r.Record)
			}
			recorded[r.Record] = true
			if !regexp.MustCompile(`^inferprobe:[a-z0-9_]+:[a-z0-9_]+$`).MatchString(r.Record) {
				t.Errorf("recording rule %s does not follow inferprobe:<what>:<how>", r.Record)
			}
		}
	}
	// A deliberately wrong name is caught (the check can fail).
	ft := &testing.T{}
	checkNames(ft, "probe", `rate(inferprobe_ttft_seconds[5m]) + vllm:made_up`, ok)
	if !ft.Failed() {
		t.Error("checkNames accepted a histogram without suffix and an unknown vLLM series")
	}
}

// burnRows is the multiwindow, multi-burn-rate table for a 30-day SLO period: severity →
// (short, long window, factor). Each row fires when the long window has spent a fixed share
// of the 30-day budget (2% in 1h, 5% in 6h, 10% in 1d, 10% in 3d) and the short window,
// a twelfth of the long one, still burns as fast.
var burnRows = map[string][][3]string{
	"page":   {{"5m", "1h", "14.4"}, {"30m", "6h", "6"}},
	"ticket": {{"2h", "1d", "3"}, {"6h", "3d", "1"}},
}

// TestBurnRateAlerts: the burn-rate alerts pair exactly burnRows' windows and factors,
// each window compared against factor × the per-SLO budget.
func TestBurnRateAlerts(t *testing.T) {
	cmp := regexp.MustCompile(`inferprobe:slo_error_ratio:rate(\w+) > on \(target, model, probe, slo\) group_left \(\) \(([0-9.]+) \* inferprobe:slo_error_budget:ratio\)`)
	seen := map[string]bool{}
	for _, r := range allRules(loadRules(t)) {
		if r.Alert != "InferprobeSLOErrorBudgetBurn" {
			continue
		}
		sev := r.Labels["severity"]
		seen[sev] = true
		var got [][3]string
		m := cmp.FindAllStringSubmatch(r.Expr, -1)
		for i := 0; i+1 < len(m); i += 2 {
			if m[i][2] != m[i+1][2] {
				t.Errorf("%s: windows %s and %s use factors %s and %s", sev, m[i][1], m[i+1][1], m[i][2], m[i+1][2])
			}
			got = append(got, [3]string{m[i][1], m[i+1][1], m[i][2]})
		}
		if !slices.Equal(got, burnRows[sev]) {
			t.Errorf("%s burn-rate alert pairs %v, want %v", sev, got, burnRows[sev])
		}
		if strings.Count(r.Expr, " and\n") != 2 || strings.Count(r.Expr, "\nor\n") != 1 || r.For != "" {
			t.Errorf("%s: want (short and long) or (short and long), no for:, got for %q and\n%s", sev, r.For, r.Expr)
		}
	}
	if !seen["page"] || !seen["ticket"] || len(seen) != 2 {
		t.Errorf("burn-rate severities %v, want page and ticket", seen)
	}
}

// TestAlertMetadata: every alert has a severity and a summary and description.
func TestAlertMetadata(t *testing.T) {
	names := map[string]bool{}
	for _, r := range allRules(loadRules(t)) {
		if r.Alert == "" {
			continue
		}
		names[r.Alert] = true
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: summary or description missing", r.Alert)
		}
	}
	for _, want := range []string{"InferprobeSLOErrorBudgetBurn", "InferprobeProbeNotRunning",
		"InferprobeTargetUnreachable", "InferprobeSpanJoinCoverageDropped", "InferprobeCapacityDrop"} {
		if !names[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

// promtoolTests is the part checked here of promtool's rule unit-test file: the rule files
// under test, the evaluation interval and group order, and test cases of input series
// (series selector + expanding values notation) with alert_rule_test cases (the alerts
// expected firing at eval_time) and promql_expr_test cases (the samples expected there).
type promtoolTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	GroupEvalOrder     []string `yaml:"group_eval_order"`
	Tests              []struct {
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr       string           `yaml:"expr"`
			EvalTime   string           `yaml:"eval_time"`
			ExpSamples []map[string]any `yaml:"exp_samples"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// TestRuleTestsCoverage: every alert has a promtool case where it fires and one where it stays
// quiet; every recording rule's value is checked by a promql_expr_test.
func TestRuleTestsCoverage(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("rules", "tests", "*.test.yml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no promtool tests under rules/tests: %v", err)
	}
	groups := map[string]bool{}
	for _, f := range loadRules(t) {
		for _, g := range f.Groups {
			groups[g.Name] = true
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	var exprs []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f promtoolTests
		if err := strictYAML(b, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, g := range f.GroupEvalOrder {
			if !groups[g] {
				t.Errorf("%s: group_eval_order names unknown group %s", p, g)
			}
		}
		for _, rf := range f.RuleFiles {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), rf)); err != nil {
				t.Errorf("%s: rule file %s: %v", p, rf, err)
			}
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
			for _, e := range tc.PromqlExprTest {
				exprs = append(exprs, e.Expr)
			}
		}
	}
	for _, r := range allRules(loadRules(t)) {
		switch {
		case r.Alert != "":
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: firing case %v, quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		case r.Record != "":
			tested := slices.ContainsFunc(exprs, func(e string) bool {
				names, _ := metricNames(e)
				return slices.Contains(names, r.Record)
			})
			if !tested {
				t.Errorf("recording rule %s: no promql_expr_test checks its value", r.Record)
			}
		}
	}
}

// promtool returns the promtool binary, skipping the test where it is not installed unless
// the environment variable CI is set (then its absence fails the test).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool not on PATH (CI is set): %v; install Debian's prometheus package", err)
		}
		t.Skip("promtool not on PATH; install Debian's prometheus package (set CI to make this fatal)")
	}
	return p
}

// runPromtool runs promtool with args in dir and fails the test, showing its output, unless it
// exits 0.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("rules", "*.yml"))
	out := runPromtool(t, ".", append([]string{"check", "rules"}, paths...)...)
	if strings.Count(out, "SUCCESS") != len(paths) {
		t.Errorf("promtool check rules: want %d SUCCESS lines:\n%s", len(paths), out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("rules", "tests", "*.test.yml"))
	if len(paths) == 0 {
		t.Fatal("no rule tests")
	}
	out := runPromtool(t, ".", append([]string{"test", "rules"}, paths...)...)
	if strings.Count(out, "SUCCESS") != len(paths) {
		t.Errorf("promtool test rules: want %d SUCCESS lines:\n%s", len(paths), out)
	}
}

// grafanaVars replaces Grafana's interval variables with durations so that dashboard queries
// are plain PromQL; other variables sit inside label-matcher strings and stay.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// TestPromtoolDashboardSyntax: every dashboard query parses as PromQL (checked by promtool as
// recording rules).
func TestPromtoolDashboardSyntax(t *testing.T) {
	promtool(t)
	var f ruleFile
	g := ruleGroup{Name: "dashboard-queries"}
	for _, name := range slices.Sorted(maps.Keys(loadDashboards(t))) {
		d := loadDashboards(t)[name]
		for i, e := range panelExprs(t, d) {
			if e == "" {
				continue
			}
			g.Rules = append(g.Rules, rule{
				Record: fmt.Sprintf("check:%s_%d:expr", strings.TrimSuffix(strings.ReplaceAll(name, "-", "_"), ".json"), i),
				Expr:   grafanaVars.Replace(e),
			})
		}
	}
	if len(g.Rules) < 30 {
		t.Fatalf("only %d dashboard queries", len(g.Rules))
	}
	f.Groups = []ruleGroup{g}
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dash.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPromtool(t, dir, "check", "rules", "dash.yml")
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(g.Rules))) {
		t.Errorf("promtool check rules:\n%s", out)
	}
}
