package tables

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"
	"runtime"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Picture size: 8 × 5 inches at 150 dpi (1200 × 750 pixels), sangam's figure size.
const (
	PictureWidth  = 8 * vg.Inch
	PictureHeight = 5 * vg.Inch
	PictureDPI    = 150
)

// HistogramBins is the number of bins of a histogram picture (sangam's 25).
const HistogramBins = 25

// figureKind is how a figure draws its data.
type figureKind int

const (
	kindStep figureKind = iota // CDFs: a post step line per series, value on x, cdf on y
	kindLine                   // time series: a polyline per series
	kindHist                   // a histogram of values in HistogramBins bins
)

// curve is one series of a figure: its legend label ("" for a figure of one series) and points.
type curve struct {
	label string
	xys   plotter.XYs
}

// figure is one picture: its file (relative to the output directory), title, axis labels
// and data (curves for a step or line figure, values for a histogram).
type figure struct {
	file         string
	title        string
	xLabel, yLab string
	kind         figureKind
	curves       []curve
	values       []float64
}

// render draws f as a PNG at path (PictureWidth × PictureHeight at PictureDPI). Curves get
// one colour each (plotutil's palette, in order); a histogram of values that are all equal
// is drawn as one bar. Errors: gonum's, or writing the file.
func (f *figure) render(path string) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = f.title, f.xLabel, f.yLab
	p.Add(plotter.NewGrid())
	switch f.kind {
	case kindHist:
		if err := addHist(p, f.values); err != nil {
			return fmt.Errorf("tables: %s: %w", f.file, err)
		}
	default:
		for i, c := range f.curves {
			l, err := plotter.NewLine(c.xys)
			if err != nil {
				return fmt.Errorf("tables: %s: %w", f.file, err)
			}
			if f.kind == kindStep {
				l.StepStyle = plotter.PostStep
			}
			l.LineStyle = draw.LineStyle{Color: plotutil.Color(i), Width: vg.Points(1.5)}
			p.Add(l)
			if c.label != "" {
				p.Legend.Add(c.label, l)
			}
		}
		// The legend goes where the curves leave room: bottom right under a CDF, top left
		// above a time series (with 15% headroom, 8% per legend row beyond two).
		if f.kind == kindStep {
			p.Y.Min, p.Y.Max = 0, 1
			// 4% margin each side, so that a vertical step at either end is not on the axis.
			xmin, xmax, _, _ := plotter.XYRange(allPoints(f.curves))
			pad := 0.04 * (xmax - xmin)
			if pad == 0 {
				pad = 0.04 * math.Max(math.Abs(xmax), 1)
			}
			p.X.Min, p.X.Max = xmin-pad, xmax+pad
			p.Legend.XOffs, p.Legend.YOffs = -0.06*PictureWidth, vg.Points(6) // left of a step at the largest value
		} else {
			p.Legend.Top, p.Legend.Left = true, true
			p.Legend.XOffs = vg.Points(8)
			if len(f.curves) > 1 {
				_, _, _, ymax := plotter.XYRange(allPoints(f.curves))
				head := math.Max(0.15, 0.08*float64(len(f.curves)))
				p.Y.Max = ymax + head*math.Max(math.Abs(ymax), 1e-9)
			}
		}
	}
	c := vgimg.NewWith(vgimg.UseWH(PictureWidth, PictureHeight), vgimg.UseDPI(PictureDPI),
		vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(c))
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	w := bufio.NewWriter(file)
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		file.Close()
		return fmt.Errorf("tables: %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		file.Close()
		return fmt.Errorf("tables: %w", err)
	}
	return file.Close()
}

// allPoints are the points of every curve.
func allPoints(cs []curve) plotter.XYs {
	var out plotter.XYs
	for _, c := range cs {
		out = append(out, c.xys...)
	}
	return out
}

// addHist adds a histogram of values (finite ones) in HistogramBins bins of equal width
// between the smallest and the largest value.
func addHist(p *plot.Plot, values []float64) error {
	vs := make(plotter.Values, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return fmt.Errorf("no finite value")
	}
	h, err := plotter.NewHist(vs, HistogramBins)
	if err != nil {
		return err
	}
	h.FillColor = plotutil.Color(0)
	h.LineStyle.Width = vg.Points(0.5)
	p.Add(h)
	p.Y.Min = 0
	return nil
}

// renderAll renders every figure into dir, on up to GOMAXPROCS goroutines; the first error
// (by figure order) is returned.
func renderAll(dir string, figs []*figure) error {
	errs := make([]error, len(figs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(figs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = figs[i].render(dir + string(os.PathSeparator) + figs[i].file)
			}
		}()
	}
	for i := range figs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
