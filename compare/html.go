package compare

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// cdfPoints is the most points a CDF curve is drawn with (evenly spaced ranks).
const cdfPoints = 1500

// Colours of the two runs in every picture.
var (
	colorBase = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorCand = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// CDFPNG draws the empirical CDFs of one metric in both runs (sorted values, ms) overlaid,
// as a PNG (7 × 4 inches at 110 dpi): base blue, candidate red, the legend at the bottom
// right, where the curves of a CDF leave room. Errors: gonum's.
func CDFPNG(title string, base, cand []float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, "ms", "fraction of successful requests"
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, run := range []struct {
		name   string
		values []float64
		c      color.Color
	}{{"base", base, colorBase}, {"candidate", cand, colorCand}} {
		if len(run.values) == 0 {
			continue
		}
		lo, hi = math.Min(lo, run.values[0]), math.Max(hi, run.values[len(run.values)-1])
		l, err := plotter.NewLine(cdfXYs(run.values))
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = draw.LineStyle{Color: run.c, Width: vg.Points(1.5)}
		if i == 1 {
			l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%d)", run.name, len(run.values)), l)
	}
	if math.IsInf(lo, 1) {
		return nil, fmt.Errorf("compare: %s: no values", title)
	}
	pad := 0.04 * (hi - lo)
	if pad == 0 {
		pad = 0.04 * math.Max(math.Abs(hi), 1)
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo-pad, hi+pad, 0, 1.0
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(8)
	c := vgimg.NewWith(vgimg.UseWH(7*vg.Inch, 4*vg.Inch), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// cdfXYs is the empirical CDF of sorted values at up to cdfPoints ranks (always the first
// and the last).
func cdfXYs(sorted []float64) plotter.XYs {
	n := len(sorted)
	step := max(1, n/cdfPoints)
	out := make(plotter.XYs, 0, n/step+2)
	for i := 0; i < n; i += step {
		out = append(out, plotter.XY{X: sorted[i], Y: float64(i+1) / float64(n)})
	}
	if last := out[len(out)-1]; last.Y != 1 {
		out = append(out, plotter.XY{X: sorted[n-1], Y: 1})
	}
	return out
}

// WriteHTML writes a self-contained page: the runs, the warnings, each case's metrics with
// their quantile differences and verdicts beside the overlaid CDFs (PNG, embedded), the
// shares, the rates, and the gates. Errors: a plot that cannot be drawn, or w's.
func WriteHTML(w io.Writer, r *Result) error {
	type metricView struct {
		M   MetricResult
		PNG template.URL
	}
	type caseView struct {
		C       *CaseResult
		Metrics []metricView
		Rates   string
	}
	var cases []caseView
	for i := range r.Cases {
		c := &r.Cases[i]
		cv := caseView{C: c, Rates: ratesLine(c.Rates)}
		for _, m := range c.Metrics {
			mv := metricView{M: m}
			if bv, cv2 := c.samples[0].values[m.Key], c.samples[1].values[m.Key]; len(bv)+len(cv2) > 0 {
				png, err := CDFPNG(fmt.Sprintf("%s, case %s", m.Key, c.CaseID), bv, cv2)
				if err != nil {
					return err
				}
				mv.PNG = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
			}
			cv.Metrics = append(cv.Metrics, mv)
		}
		cases = append(cases, cv)
	}
	return pageTemplate.Execute(w, map[string]any{
		"R": r, "Cases": cases, "Base": sideLine(r.Base), "Candidate": sideLine(r.Candidate),
		"Confidence": pct(r.Confidence, 0), "Alpha": pct(1-r.Confidence, 0),
	})
}

var pageTemplate = template.Must(template.New("compare").Funcs(template.FuncMap{
	"metric":     metricLine,
	"quantile":   quantileLine,
	"proportion": proportionLine,
	"gate":       gateLine,
	"verdictClass": func(v string) string {
		switch v {
		case VerdictWorse, GateFired:
			return "worse"
		case VerdictBetter:
			return "better"
		}
		return "same"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>inferprobe compare</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}
li{margin:.2em 0} .worse{color:#b00;font-weight:600} .better{color:#070;font-weight:600}
.metric{margin:1em 0;display:flex;gap:1.5em;align-items:flex-start} .metric img{width:42em;max-width:100%}
code{font-size:95%} .warn{color:#8a5a00}
</style></head><body>
<h1>Comparison</h1>
<p>Base: <code>{{.Base}}</code><br>Candidate: <code>{{.Candidate}}</code></p>
<p>Confidence {{.Confidence}} over {{.R.Family}} tests together (Holm): the chance of any false better or worse is at most {{.Alpha}}.</p>
{{range .R.Warnings}}<p class="warn">Warning: {{.}}</p>{{end}}
{{range .Cases}}<h2>Case {{.C.CaseID}}</h2>
<p>{{index .C.Offered 0}} and {{index .C.Offered 1}} requests offered.</p>
{{range .Metrics}}<div class="metric"><div><p class="{{verdictClass .M.Verdict}}">{{metric .M}}</p><ul>
{{range .M.Quantiles}}<li class="{{verdictClass .Verdict}}">{{quantile .}}</li>{{end}}</ul></div>
{{if .PNG}}<img alt="CDFs of {{.M.Key}}" src="{{.PNG}}">{{end}}</div>{{end}}
<ul>{{with .C.Success}}<li class="{{verdictClass .Verdict}}">{{proportion "success" .}}</li>{{end}}
{{with .C.Attainment}}<li class="{{verdictClass .Verdict}}">{{proportion "SLO attainment" .}}</li>{{end}}
{{if .Rates}}<li>rates (one measurement a run, no interval): {{.Rates}}</li>{{end}}</ul>
{{end}}
{{if .R.Gates}}<h2>Gates</h2><ul>{{range .R.Gates}}<li class="{{verdictClass .Outcome}}">{{gate .}}</li>{{end}}</ul>{{end}}
</body></html>
`))
