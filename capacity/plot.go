package capacity

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/inferprobe/inferprobe/artifact"
)

// Decision colours of the plot.
var (
	colorPass      = color.RGBA{R: 0x1a, G: 0x9e, B: 0x3a, A: 0xff}
	colorFail      = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorUndecided = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
)

// plotTest picks the test the plot shows: the binding criterion when there is one, else the
// first test of the first probe.
func plotTest(r *artifact.Search) (string, bool) {
	if r.BindingCriterion != nil && *r.BindingCriterion != "backlog" {
		return *r.BindingCriterion, true
	}
	for _, p := range r.Probes {
		for _, t := range p.Tests {
			return Test{Kind: t.Kind, Key: t.Key, Level: t.Level}.Name(), true
		}
	}
	return "", false
}

// WritePNG draws the search as a PNG at path (width × height 18 × 11 cm): for the plotted
// test (the binding criterion, else the first), each probe's estimate with its confidence
// interval against the control variable, coloured by decision (pass green, fail red,
// undecided or unsustainable grey), the threshold as a horizontal line and the capacity as
// a vertical one. An upper bound among failures is drawn to the top of the plot. Errors: no
// probe with that test, or the file cannot be written.
func WritePNG(path string, r *artifact.Search) error {
	name, ok := plotTest(r)
	if !ok {
		return errors.New("capacity: nothing to plot: no probe has a test")
	}
	p := plot.New()
	unit := "concurrency (workers)"
	if r.Over == artifact.OverRate {
		unit = "rate (requests/s)"
	}
	p.X.Label.Text = unit
	p.Title.Text = fmt.Sprintf("%s by %s: capacity %s, bracket [%s, %s], %s", name, r.Over, opt(r.Capacity, ""), opt(r.BracketLower, ""), opt(r.BracketUpper, ""), r.Boundary)
	threshold, top, groups, points := series(r, name, p)
	if math.IsNaN(threshold) {
		return fmt.Errorf("capacity: nothing to plot: no probe has bounds for %s", name)
	}
	top *= 1.1
	for _, d := range []string{artifact.DecisionPass, artifact.DecisionFail, artifact.DecisionUndecided} {
		pts := points[d]
		if len(pts) == 0 {
			continue
		}
		c := map[string]color.Color{artifact.DecisionPass: colorPass, artifact.DecisionFail: colorFail, artifact.DecisionUndecided: colorUndecided}[d]
		g := groups[d]
		for i := range g.YErrors {
			if math.IsInf(g.YErrors[i].High, 1) {
				g.YErrors[i].High = top - g.XYs[i].Y
			}
		}
		g.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.2)}
		g.CapWidth = vg.Points(6)
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(g, s)
		p.Legend.Add(d, s)
	}
	limit := plotter.NewFunction(func(float64) float64 { return threshold })
	limit.LineStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	p.Add(limit)
	p.Legend.Add(fmt.Sprintf("threshold %s", num(threshold)), limit)
	if r.Capacity != nil {
		capLine, err := plotter.NewLine(plotter.XYs{{X: *r.Capacity, Y: 0}, {X: *r.Capacity, Y: top}})
		if err != nil {
			return err
		}
		capLine.LineStyle = draw.LineStyle{Color: colorPass, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
		p.Add(capLine)
		p.Legend.Add("capacity", capLine)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, top
	p.Add(plotter.NewGrid())
	return p.Save(18*vg.Centimeter, 11*vg.Centimeter, path)
}

// series gathers, by decision (pass, fail, undecided), the estimates of the plotted test with
// their error bars (an unbounded upper bound as +Inf), the test's threshold (NaN when no
// probe has bounds for it) and the largest value to show; it sets the y-axis label.
func series(r *artifact.Search, name string, p *plot.Plot) (threshold, top float64, groups map[string]*plotter.YErrorBars, points map[string]plotter.XYs) {
	threshold, top = math.NaN(), 0.0
	groups, points = map[string]*plotter.YErrorBars{}, map[string]plotter.XYs{}
	for _, pr := range r.Probes {
		for _, t := range pr.Tests {
			if (Test{Kind: t.Kind, Key: t.Key, Level: t.Level}).Name() != name || t.Lower == nil {
				continue
			}
			threshold = t.Threshold
			p.Y.Label.Text = name + " (ms)"
			if t.Kind == artifact.TestAttainment {
				p.Y.Label.Text = name + " (share of offered requests)"
			}
			top = math.Max(top, math.Max(*t.Lower, t.Threshold))
			if t.Upper != nil {
				top = math.Max(top, *t.Upper)
			}
			est := *t.Lower
			if t.Estimate != nil {
				est = *t.Estimate
			}
			d := pr.Decision
			if d != artifact.DecisionPass && d != artifact.DecisionFail {
				d = artifact.DecisionUndecided
			}
			points[d] = append(points[d], plotter.XY{X: pr.Value, Y: est})
			hi := math.Inf(1)
			if t.Upper != nil {
				hi = *t.Upper
			}
			if groups[d] == nil {
				groups[d] = &plotter.YErrorBars{}
			}
			g := groups[d]
			g.XYs = append(g.XYs, plotter.XY{X: pr.Value, Y: est})
			g.YErrors = append(g.YErrors, struct{ Low, High float64 }{est - *t.Lower, hi - est})
		}
	}
	return threshold, top, groups, points
}
