package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite dashboards/grafana/*.json and deploy/kubernetes/prometheusrule.yaml from the generators")

const regenerate = "regenerate with: go test ./dashboards -run 'TestGolden|TestPrometheusRule' -update"

// TestGolden: the checked-in dashboards equal what Dashboards() generates now.
func TestGolden(t *testing.T) {
	got, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := writeFiles("grafana", got); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir("grafana")
	if err != nil {
		t.Fatalf("%v (%s)", err, regenerate)
	}
	var onDisk []string
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}
	if want := slices.Sorted(maps.Keys(got)); !slices.Equal(onDisk, want) {
		t.Errorf("grafana/ holds %q, generator makes %q; %s", onDisk, want, regenerate)
	}
	for name, js := range got {
		disk, err := os.ReadFile(filepath.Join("grafana", name))
		if err != nil {
			t.Errorf("%v; %s", err, regenerate)
			continue
		}
		if !bytes.Equal(disk, js) {
			t.Errorf("grafana/%s differs from the generated dashboard (first difference at byte %d); %s",
				name, firstDiff(disk, js), regenerate)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Generic views of the dashboard JSON, as Grafana reads it.
type jsonPanel struct {
	ID          uint32          `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  *jsonDatasource `json:"datasource"`
	GridPos     struct{ X, Y, W, H int }
	Targets     []jsonTarget `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Options map[string]any `json:"options"`
}

type jsonDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type jsonTarget struct {
	RefID        string          `json:"refId"`
	Expr         string          `json:"expr"`
	LegendFormat string          `json:"legendFormat"`
	Format       string          `json:"format"`
	Datasource   *jsonDatasource `json:"datasource"`
}

type jsonDashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []jsonPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      any             `json:"query"`
			Multi      bool            `json:"multi"`
			IncludeAll bool            `json:"includeAll"`
			AllValue   string          `json:"allValue"`
			Datasource *jsonDatasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string          `json:"name"`
			Expr       string          `json:"expr"`
			Datasource *jsonDatasource `json:"datasource"`
			Target     jsonTarget      `json:"target"`
		} `json:"list"`
	} `json:"annotations"`
}

func loadDashboards(t *testing.T) map[string]jsonDashboard {
	t.Helper()
	files, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]jsonDashboard{}
	for name, js := range files {
		var d jsonDashboard
		if err := json.Unmarshal(js, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = d
	}
	return out
}

// panelExprs returns every PromQL expression of a dashboard: panel targets, annotations and
// the selectors of label_values() variable queries.
func panelExprs(t *testing.T, d jsonDashboard) []string {
	t.Helper()
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, a := range d.Annotations.List {
		out = append(out, a.Expr, a.Target.Expr)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		sel, ok := labelValuesSelector(q)
		if !ok {
			t.Errorf("%s: variable %s: query %q is not label_values(<selector>, <label>)", d.UID, v.Name, q)
			continue
		}
		out = append(out, sel)
	}
	return out
}

// labelValuesSelector returns the series selector of a Grafana label_values(selector, label).
func labelValuesSelector(q string) (string, bool) {
	inner, ok := strings.CutPrefix(q, "label_values(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return "", false
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndex(inner, ",")
	if i < 0 {
		return "", false
	}
	return strings.TrimSpace(inner[:i]), true
}

func TestDashboardStructure(t *testing.T) {
	boards := loadDashboards(t)
	wantUIDs := map[string]string{"overview.json": UIDOverview, "server-join.json": UIDServerJoin, "gpu-memory.json": UIDGPUMemory}
	if got := slices.Sorted(maps.Keys(boards)); !slices.Equal(got, slices.Sorted(maps.Keys(wantUIDs))) {
		t.Fatalf("dashboards %q, want %q", got, slices.Sorted(maps.Keys(wantUIDs)))
	}
	types := map[string]int{}
	for name, d := range boards {
		if d.UID != wantUIDs[name] {
			t.Errorf("%s: uid %q, want %q", name, d.UID, wantUIDs[name])
		}
		if d.Title == "" || d.SchemaVersion == 0 {
			t.Errorf("%s: title %q, schemaVersion %d", name, d.Title, d.SchemaVersion)
		}
		checkVariables(t, name, d)
		checkAnnotations(t, name, d)
		ids := map[uint32]bool{}
		for _, p := range d.Panels {
			types[p.Type]++
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: panel %q: id %d missing or duplicated", name, p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
				t.Errorf("%s: panel %q: grid position %+v outside the 24-column grid", name, p.Title, p.GridPos)
			}
			if p.Type == "row" {
				continue
			}
			checkPanel(t, name, p)
		}
		checkNoOverlap(t, name, d.Panels)
	}
	for _, typ := range []string{"timeseries", "heatmap", "stat", "bargauge", "row"} {
		if types[typ] == 0 {
			t.Errorf("no %s panel in any dashboard", typ)
		}
	}
}

func checkPanel(t *testing.T, board string, p jsonPanel) {
	t.Helper()
	where := board + ": panel " + p.Title
	if p.Title == "" || p.Description == "" {
		t.Errorf("%s (id %d): title or description missing", where, p.ID)
	}
	if p.FieldConfig.Defaults.Unit == "" {
		t.Errorf("%s: no unit", where)
	}
	if !isDatasourceVar(p.Datasource) {
		t.Errorf("%s: datasource %+v, want the ${datasource} prometheus variable", where, p.Datasource)
	}
	if len(p.Targets) == 0 {
		t.Errorf("%s: no queries", where)
	}
	refs := map[string]bool{}
	for _, tg := range p.Targets {
		if tg.RefID == "" || refs[tg.RefID] {
			t.Errorf("%s: refId %q missing or duplicated", where, tg.RefID)
		}
		refs[tg.RefID] = true
		if strings.TrimSpace(tg.Expr) == "" || tg.LegendFormat == "" {
			t.Errorf("%s: query %s has no expression or legend", where, tg.RefID)
		}
		if !isDatasourceVar(tg.Datasource) {
			t.Errorf("%s: query %s: datasource %+v", where, tg.RefID, tg.Datasource)
		}
		// Per-probe inferprobe series are filtered by the dashboard variables.
		names, _ := metricNames(tg.Expr)
		for _, n := range names {
			if strings.HasPrefix(n, "inferprobe_") && !strings.HasPrefix(n, "inferprobe_receiver_") &&
				n != "inferprobe_build_info" && !strings.Contains(tg.Expr, sel) {
				t.Errorf("%s: query %s reads %s without the target/model/probe filter", where, tg.RefID, n)
			}
			if strings.HasPrefix(n, "vllm:") && !strings.Contains(tg.Expr, vsel) {
				t.Errorf("%s: query %s reads %s without the model filter", where, tg.RefID, n)
			}
		}
	}
	switch p.Type {
	case "timeseries", "bargauge":
		legend, _ := p.Options["legend"].(map[string]any)
		if p.Type == "timeseries" && legend["showLegend"] != true {
			t.Errorf("%s: legend hidden", where)
		}
	case "stat":
		ro, _ := p.Options["reduceOptions"].(map[string]any)
		if calcs, _ := ro["calcs"].([]any); len(calcs) == 0 {
			t.Errorf("%s: stat without reduce calcs", where)
		}
	case "heatmap":
		for _, tg := range p.Targets {
			if tg.Format != "heatmap" || tg.LegendFormat != "{{le}}" || !strings.Contains(tg.Expr, "_bucket{") {
				t.Errorf("%s: heatmap query %s: format %q legend %q expr %q", where, tg.RefID, tg.Format, tg.LegendFormat, tg.Expr)
			}
		}
	}
}

func exprsOf(p jsonPanel) []string {
	var out []string
	for _, tg := range p.Targets {
		out = append(out, tg.Expr)
	}
	return out
}

func isDatasourceVar(d *jsonDatasource) bool {
	return d != nil && d.Type == "prometheus" && d.UID == "${datasource}"
}

func checkVariables(t *testing.T, board string, d jsonDashboard) {
	t.Helper()
	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	i, ok := vars["datasource"]
	if !ok || d.Templating.List[i].Type != "datasource" || d.Templating.List[i].Query != "prometheus" {
		t.Errorf("%s: no datasource variable of type prometheus", board)
	}
	for _, name := range []string{"target", "model", "probe"} {
		i, ok := vars[name]
		if !ok {
			t.Errorf("%s: no %s variable", board, name)
			continue
		}
		v := d.Templating.List[i]
		q, _ := v.Query.(string)
		sel, _ := labelValuesSelector(q)
		if v.Type != "query" || !v.Multi || !v.IncludeAll || v.AllValue != ".*" || !isDatasourceVar(v.Datasource) ||
			!strings.HasPrefix(sel, "inferprobe_") || !strings.HasSuffix(q, ", "+name+")") {
			t.Errorf("%s: variable %s = %+v: want a multi, include-all label_values query on an inferprobe series", board, name, v)
		}
	}
	if vars["datasource"] > vars["target"] || vars["target"] > vars["model"] || vars["model"] > vars["probe"] {
		t.Errorf("%s: variables out of order (datasource, target, model, probe): %v", board, vars)
	}
}

func checkAnnotations(t *testing.T, board string, d jsonDashboard) {
	t.Helper()
	for _, a := range d.Annotations.List {
		if a.Name == "Probe runs" && isDatasourceVar(a.Datasource) &&
			strings.Contains(a.Expr, "inferprobe_probe_running{"+sel+"}") && a.Target.Expr == a.Expr {
			return
		}
	}
	t.Errorf("%s: no probe-run annotation from inferprobe_probe_running", board)
}

func checkNoOverlap(t *testing.T, board string, panels []jsonPanel) {
	t.Helper()
	for i, a := range panels {
		for _, b := range panels[i+1:] {
			if a.GridPos.X < b.GridPos.X+b.GridPos.W && b.GridPos.X < a.GridPos.X+a.GridPos.W &&
				a.GridPos.Y < b.GridPos.Y+b.GridPos.H && b.GridPos.Y < a.GridPos.Y+a.GridPos.H {
				t.Errorf("%s: panels %q and %q overlap", board, a.Title, b.Title)
			}
		}
	}
}

// TestDashboardContent: the queries the brief of each dashboard promises are there.
func TestDashboardContent(t *testing.T) {
	boards := loadDashboards(t)
	want := map[string][]string{
		"overview.json": {
			"inferprobe_goodput_requests_per_second{",
			"inferprobe_slo_attainment_ratio{",
			"inferprobe_slo_objective_ratio{",
			"histogram_quantile(0.5, sum by (probe, le) (rate(inferprobe_ttft_seconds_bucket{",
			"histogram_quantile(0.9, sum by (probe, le) (rate(inferprobe_ttft_seconds_bucket{",
			"histogram_quantile(0.99, sum by (probe, le) (rate(inferprobe_ttft_seconds_bucket{",
			"histogram_quantile(0.99, sum by (probe, le) (rate(inferprobe_e2e_seconds_bucket{",
			"sum by (le) (increase(inferprobe_ttft_seconds_bucket{",
			"sum by (le) (increase(inferprobe_e2e_seconds_bucket{",
			"sum by (status) (rate(inferprobe_requests_total{",
			`status!="ok"}[$__range]`,
			"inferprobe_dispatch_lag_seconds_bucket{",
			"inferprobe_in_flight_requests{",
			"inferprobe_probe_runs_total{",
			"inferprobe_probe_running{",
			"inferprobe_probe_schedule_met{",
			"inferprobe_ttft_from_intended_seconds_bucket{",
			"inferprobe_capacity{",
			"inferprobe_capacity_binding_criterion{",
		},
		"server-join.json": {
			"rate(inferprobe_server_ttft_seconds_bucket{",
			"rate(vllm:time_to_first_token_seconds_bucket{" + vsel,
			"inferprobe_server_queue_seconds_sum{", "inferprobe_server_prefill_seconds_sum{", "inferprobe_server_decode_seconds_sum{",
			"vllm:num_requests_waiting{", "vllm:num_requests_running{",
			"vllm:kv_cache_usage_perc{",
			"rate(vllm:prefix_cache_hits_total{" + vsel + "}[$__rate_interval])) / sum by (model_name) (rate(vllm:prefix_cache_queries_total{",
			"inferprobe_span_join_coverage_ratio{",
			"inferprobe_receiver_spans_received_total[", "inferprobe_receiver_spans_rejected_total[", "inferprobe_receiver_spans_dropped_total[",
		},
		"gpu-memory.json": {
			"DCGM_FI_DEV_FB_USED{" + `instance=~"$gpu_instance"} * 1048576`,
			"DCGM_FI_DEV_FB_FREE{" + `instance=~"$gpu_instance"} * 1048576`,
			"process_resident_memory_bytes and on (job, instance) vllm:num_requests_running{",
			"process_resident_memory_bytes and on (job, instance) inferprobe_build_info",
			"vllm:kv_cache_usage_perc{",
			"inferprobe_probe_running{",
		},
	}
	units := map[string][]string{
		"overview.json":    {"s", "percentunit", "reqps", "short", "bool_yes_no"},
		"server-join.json": {"s", "percentunit", "short", "cps"},
		"gpu-memory.json":  {"bytes", "percentunit", "short"},
	}
	for name, d := range boards {
		var all []string
		seenUnits := map[string]bool{}
		for _, p := range d.Panels {
			all = append(all, exprsOf(p)...)
			seenUnits[p.FieldConfig.Defaults.Unit] = true
		}
		joined := strings.Join(all, "\n")
		for _, w := range want[name] {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: no query contains %q", name, w)
			}
		}
		for _, u := range units[name] {
			if !seenUnits[u] {
				t.Errorf("%s: no panel with unit %q", name, u)
			}
		}
	}
}

// TestDashboardsDeterministic: two builds give identical bytes (map order, no timestamps).
func TestDashboardsDeterministic(t *testing.T) {
	a, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s: two builds differ", name)
		}
		if !bytes.HasSuffix(a[name], []byte("}\n")) || !bytes.HasPrefix(a[name], []byte("{\n  \"")) {
			t.Errorf("%s: not indented JSON with a trailing newline", name)
		}
	}
}

func TestWriteAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	if err := WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	boards, _ := Dashboards()
	for name, js := range boards {
		got, err := os.ReadFile(filepath.Join(dir, "grafana", name))
		if err != nil || !bytes.Equal(got, js) {
			t.Errorf("grafana/%s: %v (equal: %v)", name, err, bytes.Equal(got, js))
		}
	}
	rules := Rules()
	for name, content := range rules {
		got, err := os.ReadFile(filepath.Join(dir, "rules", name))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("rules/%s: %v (equal: %v)", name, err, bytes.Equal(got, content))
		}
	}
	// Rewriting over existing files works and leaves other files alone.
	other := filepath.Join(dir, "grafana", "mine.json")
	if err := os.WriteFile(other, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir); err != nil {
		t.Fatalf("second WriteAll: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("WriteAll removed an unrelated file: %v", err)
	}

	if err := WriteAll(""); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("WriteAll(\"\") = %v, want an error about the empty directory", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(file); err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), file) {
		t.Errorf("WriteAll(file) = %v, want a not-a-directory error naming it", err)
	}
	if err := WriteAll(filepath.Join(file, "below")); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("WriteAll(file/below) = %v, want an error naming the path", err)
	}
}

func TestRulesEmbedded(t *testing.T) {
	rules := Rules()
	entries, err := filepath.Glob(filepath.Join("rules", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != len(entries) || len(rules) < 2 {
		t.Fatalf("Rules() has %d files, rules/ has %d (want >= 2)", len(rules), len(entries))
	}
	for _, p := range entries {
		disk, _ := os.ReadFile(p)
		if !bytes.Equal(rules[filepath.Base(p)], disk) {
			t.Errorf("Rules()[%s] differs from %s", filepath.Base(p), p)
		}
	}
	for _, name := range []string{"inferprobe-slo.rules.yml", "inferprobe-alerts.rules.yml"} {
		if len(rules[name]) == 0 {
			t.Errorf("Rules() lacks %s", name)
		}
	}
	// Callers get copies.
	rules["inferprobe-slo.rules.yml"][0] = 'X'
	delete(rules, "inferprobe-alerts.rules.yml")
	again := Rules()
	if again["inferprobe-slo.rules.yml"][0] == 'X' || again["inferprobe-alerts.rules.yml"] == nil {
		t.Error("Rules() returned shared state")
	}
}
