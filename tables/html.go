package tables

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
)

// pageData is what index.html is rendered from.
type pageData struct {
	Summary    string
	SummaryErr string
	SLO        string
	Groups     []pageGroup
	Left       []ColumnEntry
	Workers    WorkersEntry
	Timeline   TimelineEntry
	SpanJoin   SpanJoinEntry
	Rows       int
}

// pageGroup is one section of plots; Why says why it has none.
type pageGroup struct {
	Name    string
	Why     string
	Figures []pageFigure
}

// pageFigure is one picture inlined as a data: URI.
type pageFigure struct {
	PictureEntry
	URI template.URL
}

// writeIndex writes index.html: one self-contained page (inline CSS, every picture inlined as
// a data:image/png;base64 URI, no script, nothing fetched) with the run's summary and SLO
// bounds (Sink.SetSummary), then the pictures grouped as request, server decomposition,
// workers and batches, each with its caption and source, then the columns left out and why.
// Everything from the artifact is escaped by html/template. Errors: reading a picture back,
// writing the page.
func (o *output) writeIndex(dir string) error {
	d := pageData{Summary: o.summary.Text, SLO: o.summary.SLO, Workers: o.m.Workers, Timeline: o.m.Timeline,
		SpanJoin: o.m.SpanJoin, Rows: o.m.RequestMetrics.Rows}
	if o.summaryErr != nil {
		d.SummaryErr = o.summaryErr.Error()
	}
	for _, name := range []string{GroupRequest, GroupServer, GroupWorkers, GroupBatches} {
		g := pageGroup{Name: name}
		for _, p := range o.m.Pictures {
			if p.Group != name {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p.File)))
			if err != nil {
				return fmt.Errorf("tables: %w", err)
			}
			g.Figures = append(g.Figures, pageFigure{PictureEntry: p,
				URI: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))})
		}
		switch {
		case name == GroupBatches && !o.m.Batches.Written:
			g.Why = o.m.Batches.Why
		case name == GroupServer && len(g.Figures) == 0:
			g.Why = whyNoSpan
		case name == GroupWorkers && len(g.Figures) == 0:
			g.Why = whyNoScrape
		}
		d.Groups = append(d.Groups, g)
	}
	for _, c := range o.m.RequestMetrics.Columns {
		if !c.Written {
			d.Left = append(d.Left, c)
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, d); err != nil {
		return fmt.Errorf("tables: index.html: %w", err)
	}
	return writeFile(dir, IndexFile, buf.Bytes())
}

var pageTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>inferprobe tables</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:16px 24px;color:#1d1d1f;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.6em}
pre{background:#f5f5f7;border:1px solid #e0e0e0;padding:10px;overflow-x:auto;font-size:12px;line-height:1.35;white-space:pre-wrap}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
figure{margin:0;border:1px solid #e0e0e0;border-radius:6px;padding:8px;background:#fafafa}
figure img{width:100%;height:auto;display:block}
figcaption{font-size:13px;margin-top:6px}.src{color:#666;font-size:12px}
.why{color:#8a5a00;background:#fff7e6;border:1px solid #f0d9a8;padding:8px;border-radius:4px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.err{color:#b00020}
</style></head><body>
<h1>inferprobe tables</h1>
<p>{{.Rows}} measured requests in request_metrics.csv; {{.SpanJoin.Joined}} joined a vLLM span.
Workers (vLLM engine label): {{range $i, $w := .Workers.Workers}}{{if $i}}, {{end}}{{$w}}{{else}}none scraped{{end}}.
Timeline: timeline.json ({{.Timeline.Requests}} requests{{if .Timeline.LeftOut}}, {{.Timeline.LeftOut}} left out{{end}}; open it in ui.perfetto.dev).</p>
<h2>Summary</h2>
{{if .SummaryErr}}<p class="err">The summary could not be computed: {{.SummaryErr}}</p>{{end}}
{{if .Summary}}<pre>{{.Summary}}</pre>{{else if not .SummaryErr}}<p class="why">No summary was given.</p>{{end}}
<h2>SLO bounds</h2>
{{if .SLO}}<pre>{{.SLO}}</pre>{{else}}<p class="why">No SLO policy.</p>{{end}}
{{range .Groups}}<h2>{{.Name}}</h2>
{{if .Why}}<p class="why">{{.Why}}</p>{{end}}
{{if .Figures}}<div class="grid">{{range .Figures}}<figure><img src="{{.URI}}" alt="{{.File}}">
<figcaption>{{.Caption}}<br><span class="src">source: {{.Source}} · data: {{.Data}} · {{.File}}</span></figcaption></figure>
{{end}}</div>{{end}}
{{end}}<h2>Columns left out</h2>
<table><tr><th>column</th><th>why</th></tr>
{{range .Left}}<tr><td>{{.Name}}</td><td>{{.Why}}</td></tr>
{{end}}</table>
</body></html>
`))
