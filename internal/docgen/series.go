package docgen

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/inferprobe/inferprobe/exporter"
)

// SeriesPage is docs/reference/metrics.md: every inferprobe_ family the exporter registers
// (exporter.Series), with its type, labels, unit and HELP text.
func SeriesPage() ([]byte, error) {
	series, err := exporter.Series()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("<!-- Generated from the exporter's registry by `inferprobe docs --output docs/reference`: do not edit. -->\n\n")
	b.WriteString("# Exported Prometheus series\n\n")
	b.WriteString("Every `inferprobe_*` series that `inferprobe serve` (and `inferprobe demo`) publish on `/metrics`, ")
	b.WriteString("read from the exporter's registry. One registry per process (never the global one), served with ")
	b.WriteString("OpenMetrics so that exemplars show; the standard `go_*` and `process_*` series of client_golang's ")
	b.WriteString("Go and process collectors are served beside them. Request and trace ids appear only in exemplars ")
	b.WriteString("(`trace_id`, `request_id`), never in labels. Only measured-phase requests count, as in `inferprobe analyze`. ")
	b.WriteString("What the series mean together, and the dashboards and alerts built on them: ")
	b.WriteString("[the Prometheus and Grafana guide](../guides/prometheus-grafana.md).\n\n")
	fmt.Fprintf(&b, "%d series.\n\n", len(series))
	b.WriteString("| series | type | unit | labels | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range series {
		labels := "—"
		if len(s.Labels) > 0 {
			labels = "`" + strings.Join(s.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.Name, s.Type, unitOf(s.Name), labels, cell(s.Help))
	}
	return b.Bytes(), nil
}

// unitOf is the unit a series name carries by the Prometheus naming rules.
func unitOf(name string) string {
	base := strings.TrimSuffix(name, "_total")
	switch {
	case strings.HasSuffix(base, "_timestamp_seconds"):
		return "Unix seconds"
	case strings.HasSuffix(base, "_seconds"):
		return "seconds"
	case strings.HasSuffix(base, "_ratio"):
		return "ratio (0–1)"
	case strings.HasSuffix(base, "_bytes"):
		return "bytes"
	case strings.HasSuffix(base, "_requests_per_second"):
		return "requests/s"
	case strings.HasSuffix(name, "_total"):
		return "count"
	}
	return "—"
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
