package pareto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// RenderText writes the points as a table, highest throughput first: source and case (with
// the probed value), throughput (per GPU too when known), TPOT p50 and 1/TPOT, p90 e2e per
// output token and E2E normalized interactivity, the SLO mark, the two front marks
// (1/TPOT, E2E), dollars per million output tokens and joules per output token.
func RenderText(w io.Writer, r *Result) error {
	b := bufio.NewWriter(w)
	unit := "output tok/s"
	if r.PerGPU {
		unit = fmt.Sprintf("output tok/s (per GPU, %d %s)", *r.GPUs, plural(*r.GPUs, "GPU", "GPUs"))
	}
	fmt.Fprintf(b, "%d %s; throughput in %s; front: on the 1/TPOT front, e2e-front: on the E2E normalized interactivity front\n",
		len(r.Points), plural(len(r.Points), "point", "points"), unit)
	for _, s := range r.Warnings {
		fmt.Fprintf(b, "Warning: %s\n", s)
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tcase\tvalue\ttok/s\ttok/s/GPU\tTPOT p50 ms\t1/TPOT tok/s\tp90 e2e/token ms\tE2E interactivity tok/s\tSLO\tfront\te2e-front\t$/M out\tJ/out tok")
	for _, i := range order(r.Points) {
		p := r.Points[i]
		value := "–"
		if p.Value != nil {
			value = num(*p.Value)
			if p.Over != "" {
				value = p.Over + " " + value
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", filepath.Base(p.Source), p.CaseID, value,
			opt(p.Throughput), opt(p.PerGPU), opt(p.TPOTp50Ms), opt(p.Interactivity), opt(p.E2EPerTokenP90Ms), opt(p.E2EInteractivity),
			slo(p.SLOMet), yes(p.OnFront), yes(p.OnE2EFront), opt(p.USDPerMillionOutput), opt(p.JoulesPerOutputToken))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return b.Flush()
}

// order is the points' indexes by throughput, highest first (unknown last), then input order.
func order(pts []Point) []int {
	idx := make([]int, len(pts))
	for i := range idx {
		idx[i] = i
	}
	tp := func(i int) float64 {
		if pts[i].Throughput == nil {
			return math.Inf(-1)
		}
		return *pts[i].Throughput
	}
	for i := 1; i < len(idx); i++ { // insertion sort: stable, small inputs
		for j := i; j > 0 && tp(idx[j]) > tp(idx[j-1]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx
}

// WriteJSON writes the result as pretty-printed JSON with sorted keys and a trailing newline.
func WriteJSON(w io.Writer, r *Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(tree)
}

// Colours of the PNG's marks.
var (
	colorMet     = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colorMissed  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorUnknown = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	colorFront   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
)

// WritePNG draws the two fronts side by side (14 × 6 inches at 110 dpi): throughput (per GPU
// when known) against 1/TPOT, and against E2E normalized interactivity. Points meeting the
// SLO are green discs, missing it red crosses, unjudged grey rings; the front is a blue
// staircase through its points, each labelled with its case (and probed value). The axes
// reach 35% (x) and 25% (y) past the largest point, so the legend, in the upper right corner — a region
// no point can occupy, since any point there would dominate the whole front — covers none.
// Errors: no point with both values, gonum's, or writing path.
func WritePNG(path string, r *Result) error {
	left, err := panel(r, "1/TPOT p50 (tokens/s per user)", func(p *Point) *float64 { return p.Interactivity }, func(p *Point) bool { return p.OnFront })
	if err != nil {
		return err
	}
	right, err := panel(r, "E2E normalized interactivity: 1 / p90(e2e ÷ output tokens) (tokens/s)", func(p *Point) *float64 { return p.E2EInteractivity }, func(p *Point) bool { return p.OnE2EFront })
	if err != nil {
		return err
	}
	const w, h = 14 * vg.Inch, 6 * vg.Inch
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return err
	}
	return writeFile(path, buf.Bytes())
}

func panel(r *Result, xLabel string, x func(*Point) *float64, front func(*Point) bool) (*plot.Plot, error) {
	y := func(p *Point) *float64 {
		if r.PerGPU {
			return p.PerGPU
		}
		return p.Throughput
	}
	p := plot.New()
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "output tokens/s"
	if r.PerGPU {
		p.Y.Label.Text = "output tokens/s per GPU"
	}
	p.Add(plotter.NewGrid())
	groups := map[string]plotter.XYs{}
	var frontPts plotter.XYs
	var labels plotter.XYLabels
	maxX, maxY := 0.0, 0.0
	sources := map[string]bool{}
	for i := range r.Points {
		sources[r.Points[i].Source] = true
	}
	for i := range r.Points {
		pt := &r.Points[i]
		if x(pt) == nil || y(pt) == nil {
			continue
		}
		xy := plotter.XY{X: *x(pt), Y: *y(pt)}
		maxX, maxY = math.Max(maxX, xy.X), math.Max(maxY, xy.Y)
		kind := "SLO unknown"
		if pt.SLOMet != nil {
			kind = map[bool]string{true: "SLO met", false: "SLO missed"}[*pt.SLOMet]
		}
		groups[kind] = append(groups[kind], xy)
		if front(pt) {
			frontPts = append(frontPts, xy)
			label := pt.CaseID
			if pt.Value != nil {
				label = num(*pt.Value)
			}
			if len(sources) > 1 && pt.Value == nil {
				label = strings.TrimSuffix(filepath.Base(pt.Source), ".jsonl") + " " + label
			}
			labels.XYs = append(labels.XYs, xy)
			labels.Labels = append(labels.Labels, label)
		}
	}
	if len(frontPts) == 0 {
		return nil, fmt.Errorf("pareto: nothing to plot against %s: no point has both values", xLabel)
	}
	p.Title.Text = fmt.Sprintf("Pareto front: %d of %d points", len(frontPts), countAll(groups))
	// The front as a staircase from the most interactive point down to the highest throughput.
	sortXYs(frontPts)
	stairs := plotter.XYs{}
	for i, q := range frontPts {
		if i > 0 {
			stairs = append(stairs, plotter.XY{X: q.X, Y: frontPts[i-1].Y})
		}
		stairs = append(stairs, q)
	}
	line, err := plotter.NewLine(stairs)
	if err != nil {
		return nil, err
	}
	line.LineStyle = draw.LineStyle{Color: colorFront, Width: vg.Points(1.5)}
	p.Add(line)
	p.Legend.Add("Pareto front", line)
	for _, g := range []struct {
		kind  string
		c     color.Color
		shape draw.GlyphDrawer
	}{{"SLO met", colorMet, draw.CircleGlyph{}}, {"SLO missed", colorMissed, draw.CrossGlyph{}}, {"SLO unknown", colorUnknown, draw.RingGlyph{}}} {
		if len(groups[g.kind]) == 0 {
			continue
		}
		s, err := plotter.NewScatter(groups[g.kind])
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: g.c, Radius: vg.Points(4), Shape: g.shape}
		p.Add(s)
		p.Legend.Add(g.kind, s)
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XLeft, draw.YBottom
	}
	l.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(3)}
	p.Add(l)
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max, p.Y.Max = maxX*1.35, maxY*1.25
	p.Legend.Top = true
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), -vg.Points(6)
	return p, nil
}

func countAll(g map[string]plotter.XYs) int {
	n := 0
	for _, v := range g {
		n += len(v)
	}
	return n
}

func sortXYs(xys plotter.XYs) {
	for i := 1; i < len(xys); i++ {
		for j := i; j > 0 && xys[j].X < xys[j-1].X; j-- {
			xys[j], xys[j-1] = xys[j-1], xys[j]
		}
	}
}

func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', min(2-int(math.Floor(math.Log10(a))), 12), 64)
}

func opt(v *float64) string {
	if v == nil {
		return "–"
	}
	return num(*v)
}

func slo(met *bool) string {
	switch {
	case met == nil:
		return "?"
	case *met:
		return "met"
	}
	return "missed"
}

func yes(b bool) string {
	if b {
		return "*"
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
