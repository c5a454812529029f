package dashboards

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Dashboard uids: stable across versions so links, provisioning and bookmarks keep working.
const (
	// UIDOverview is the uid of the overview dashboard (file overview.json).
	UIDOverview = "inferprobe-overview"
	// UIDServerJoin is the uid of the client ↔ server join dashboard (file server-join.json).
	UIDServerJoin = "inferprobe-server-join"
	// UIDGPUMemory is the uid of the GPU and memory dashboard (file gpu-memory.json).
	UIDGPUMemory = "inferprobe-gpu-memory"
)

// Dashboards builds every dashboard and returns file name (e.g. "overview.json") → Grafana
// dashboard JSON (indented two spaces, trailing newline, deterministic for a given SDK version).
// Every panel reads the datasource variable ${datasource} (type prometheus). An error means a
// builder rejected a panel (a programming defect, reported with the dashboard's uid).
func Dashboards() (map[string][]byte, error) {
	out := make(map[string][]byte, 3)
	for _, d := range []struct {
		file  string
		build func() *dashboard.DashboardBuilder
	}{
		{"overview.json", overview},
		{"server-join.json", serverJoin},
		{"gpu-memory.json", gpuMemory},
	} {
		b := d.build()
		model, err := b.Build()
		if err != nil {
			return nil, fmt.Errorf("dashboards: build %s: %w", d.file, err)
		}
		js, err := json.MarshalIndent(model, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("dashboards: encode %s: %w", d.file, err)
		}
		out[d.file] = append(js, '\n')
	}
	return out, nil
}

// ds is the datasource every panel, variable and annotation uses: the dashboard's
// datasource variable, so one file works against any Prometheus-compatible datasource.
var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel is the label matcher of every inferprobe series that carries target, model and probe.
const sel = `target=~"$target", model=~"$model", probe=~"$probe"`

// vsel selects vLLM series of the chosen models (vLLM's label is model_name, the served model
// name, which is the model inferprobe sends).
const vsel = `model_name=~"$model"`

// Panel geometry (Grafana's grid is 24 columns wide).
const (
	full    = 24
	half    = 12
	third   = 8
	quarter = 6
	height  = 8
)

// board carries the per-dashboard panel id counter: ids are explicit, unique within the
// dashboard and assigned in layout order, so they stay stable while the layout does.
type board struct {
	b  *dashboard.DashboardBuilder
	id uint32
}

func (bd *board) next() uint32 { bd.id++; return bd.id }

func (bd *board) row(title string) {
	bd.b.WithRow(dashboard.NewRowBuilder(title).Id(bd.next()))
}

func (bd *board) add(p cog.Builder[dashboard.Panel]) { bd.b.WithPanel(p) }

// newBoard starts a dashboard with the shared settings: variables datasource, target, model,
// probe (plus extra ones), the probe-run annotation, crosshair sync, 6h range, 1m refresh.
func newBoard(uid, title, description string, extra ...cog.Builder[dashboard.VariableModel]) *board {
	b := dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"inferprobe", "llm", "vllm"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Refresh("1m").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Datasource").
			Type("prometheus")).
		WithVariable(labelVar("target", "Target", "label_values(inferprobe_probe_interval_seconds, target)")).
		WithVariable(labelVar("model", "Model", `label_values(inferprobe_probe_interval_seconds{target=~"$target"}, model)`)).
		WithVariable(labelVar("probe", "Probe", `label_values(inferprobe_probe_interval_seconds{target=~"$target", model=~"$model"}, probe)`))
	for _, v := range extra {
		b.WithVariable(v)
	}
	b.Annotation(dashboard.NewAnnotationQueryBuilder().
		Name("Probe runs").
		Datasource(ds).
		Enable(true).
		IconColor("rgba(0, 211, 255, 0.7)").
		Expr(`sum by (target, model, probe) (inferprobe_probe_running{` + sel + `}) > 0`).
		Step("15s").
		TitleFormat("probe run {{probe}}").
		TextFormat("{{probe}}: {{model}} on {{target}}").
		TagKeys("target,model,probe").
		Target(query("Anno", `sum by (target, model, probe) (inferprobe_probe_running{`+sel+`}) > 0`, "{{probe}}")))
	return &board{b: b}
}

// labelVar is a multi-value query variable over label values, "All" selected by default and
// matching every value (.*) rather than enumerating them.
func labelVar(name, label, q string) *dashboard.QueryVariableBuilder {
	all := "All"
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{all}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		})
}

// query is a range query in code mode against the datasource variable.
func query(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(ds).
		RefId(refID).
		Expr(expr).
		LegendFormat(legend).
		EditorMode(prometheus.QueryEditorModeCode).
		Range()
}

// quantile is histogram_quantile(q, …) over the rate of a classic histogram's buckets,
// aggregated by the given labels (plus le).
func quantile(q, metric, matchers, by string) string {
	if by != "" {
		by += ", "
	}
	return fmt.Sprintf("histogram_quantile(%s, sum by (%sle) (rate(%s_bucket{%s}[$__rate_interval])))", q, by, metric, matchers)
}

// mean is sum(rate(_sum)) / sum(rate(_count)) of a histogram, aggregated by the given labels.
func mean(metric, matchers, by string) string {
	return fmt.Sprintf("sum by (%[3]s) (rate(%[1]s_sum{%[2]s}[$__rate_interval])) / sum by (%[3]s) (rate(%[1]s_count{%[2]s}[$__rate_interval]))", metric, matchers, by)
}

// panelBuilder is the part every panel builder of the SDK has alike that frame sets; P is the
// builder's own type, which each setter returns.
type panelBuilder[P any] interface {
	Id(id uint32) P
	Title(title string) P
	Description(description string) P
	Datasource(datasource common.DataSourceRef) P
	Unit(unit string) P
	Span(w uint32) P
	Height(h uint32) P
}

// frame gives a new panel what every panel has: the board's next id, a title and
// description, the datasource variable, a unit, a width and the standard height.
func frame[P panelBuilder[P]](p P, bd *board, title, description, unit string, width uint32) P {
	return p.Id(bd.next()).
		Title(title).
		Description(description).
		Datasource(ds).
		Unit(unit).
		Span(width).
		Height(height)
}

// ts is a time-series panel with a visible legend, a multi-series tooltip and the given unit.
func ts(bd *board, title, description, unit string, width uint32, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := frame(timeseries.NewPanelBuilder(), bd, title, description, unit, width).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			Calcs([]string{})).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	for _, t := range targets {
		p.WithTarget(t)
	}
	return p
}

// stepped makes a time-series panel draw 0/1 state and last-run gauges as steps.
func stepped(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return p.LineInterpolation(common.LineInterpolationStepAfter)
}

// stacked stacks the series of a time-series panel.
func stacked(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return p.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal).Group("A")).FillOpacity(40)
}

// thresholdLine draws a dashed threshold line at value (e.g. the span-join alert's 0.9).
func thresholdLine(p *timeseries.PanelBuilder, value float64) *timeseries.PanelBuilder {
	return p.
		Thresholds(steps("red", step{value, "green"})).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}

// hm is a heatmap of a classic histogram's bucket increases (Prometheus "heatmap" format, one
// row per le bucket, exemplars shown).
func hm(bd *board, title, description, metric string, width uint32) *heatmap.PanelBuilder {
	return frame(heatmap.NewPanelBuilder(), bd, title, description, "s", width).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s").AxisPlacement(common.AxisPlacementLeft)).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
		CellValues(heatmap.NewCellValuesBuilder().Unit("short")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Steps(64).
			Fill("dark-orange")).
		FilterValues(heatmap.NewFilterValueRangeBuilder().Le(1e-9)).
		ShowValue(common.VisibilityModeNever).
		ShowLegend().
		ExemplarsColor("rgba(255,0,255,0.7)").
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true).ShowColorScale(true)).
		WithTarget(query("A", fmt.Sprintf("sum by (le) (increase(%s_bucket{%s}[$__rate_interval]))", metric, sel), "{{le}}").
			Format(prometheus.PromQueryFormatHeatmap).
			Exemplar(true))
}

// st is a stat panel showing the last non-null value of each series.
func st(bd *board, title, description, unit string, width uint32, target *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return frame(stat.NewPanelBuilder(), bd, title, description, unit, width).
		GraphMode(common.BigValueGraphModeArea).
		ColorMode(common.BigValueColorModeValue).
		TextMode(common.BigValueTextModeValueAndName).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		WithTarget(target)
}

// bars is a horizontal bar gauge of instant values (e.g. counts over the dashboard range).
func bars(bd *board, title, description, unit string, width uint32, target *prometheus.DataqueryBuilder) *bargauge.PanelBuilder {
	return frame(bargauge.NewPanelBuilder(), bd, title, description, unit, width).
		Min(0).
		DisplayMode(common.BarGaugeDisplayModeGradient).
		Orientation(common.VizOrientationHorizontal).
		ValueMode(common.BarGaugeValueModeColor).
		ShowUnfilled(true).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		WithTarget(target.Instant())
}

// kvCacheUsage is the panel of vLLM's KV-cache usage fraction (kvCache), a third wide.
func kvCacheUsage(bd *board, description string) *timeseries.PanelBuilder {
	return ts(bd, "KV-cache usage", description, "percentunit", third,
		query("A", kvCache, "{{model_name}} {{instance}}")).
		Min(0).Max(1)
}

// probeRunning is the 0/1 panel of inferprobe_probe_running per probe.
func probeRunning(bd *board, description string, width uint32) *timeseries.PanelBuilder {
	return stepped(ts(bd, "Probe running", description, "short", width,
		query("A", `max by (probe) (inferprobe_probe_running{`+sel+`})`, "{{probe}}"))).
		Min(0).Max(1)
}

// vllmWaitingRunning queries vLLM's waiting and running requests per model (refs A and B).
func vllmWaitingRunning() []*prometheus.DataqueryBuilder {
	return []*prometheus.DataqueryBuilder{
		query("A", `sum by (model_name) (vllm:num_requests_waiting{`+vsel+`})`, "waiting {{model_name}}"),
		query("B", `sum by (model_name) (vllm:num_requests_running{`+vsel+`})`, "running {{model_name}}"),
	}
}

// step is one threshold: from value on, color.
type step struct {
	value float64
	color string
}

// steps is an absolute threshold list: base color from −Inf, then each step.
func steps(base string, more ...step) cog.Builder[dashboard.ThresholdsConfig] {
	s := []dashboard.Threshold{{Value: nil, Color: base}}
	for _, m := range more {
		s = append(s, dashboard.Threshold{Value: cog.ToPtr(m.value), Color: m.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(s)
}
