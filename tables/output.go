package tables

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotter"

	"github.com/inferprobe/inferprobe/artifact"
)

// Files of the output directory besides the tables.
const (
	IndexFile    = "index.html"
	TimelineFile = "timeline.json"
)

// output is everything Close writes: the request table, the requests and spans (timeline),
// the scrapes' per-worker samples and the page's summary.
type output struct {
	t          *table
	reqs       []*artifact.Request
	spans      []*artifact.Span
	workers    *workerSamples
	batches    batches
	summary    Summary
	summaryErr error
	// base is the first arrival (Unix ns), time zero of every time series and the timeline.
	base                  int64
	arrivals, completions []int64
	m                     Manifest
	figs                  []*figure
	noPictures            bool
}

// write writes the directory: the request table and CDFs, the request and worker series,
// the worker CDFs, a PNG per plot file, timeline.json, manifest.json and index.html (last,
// from the manifest). A file of an earlier write that this one does not produce is removed.
func (o *output) write(dir string) error {
	for _, sub := range []string{RequestPlotsDir, WorkerPlotsDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("tables: %w", err)
		}
	}
	o.arrivals, o.completions = eventTimes(o.reqs, arrivalNS), eventTimes(o.reqs, completionNS)
	o.base = o.timeBase()
	o.m = o.t.manifest()
	steps := []func(string) error{o.writeRequestTables, o.writeRequestSeries, o.writeWorkers, o.writeBatches}
	for _, step := range steps {
		if err := step(dir); err != nil {
			return err
		}
	}
	if o.noPictures {
		o.figs, o.m.Pictures = nil, nil
	}
	if err := renderAll(dir, o.figs); err != nil {
		return err
	}
	tl, err := o.writeTimeline(dir)
	if err != nil {
		return err
	}
	o.m.Timeline = tl
	o.m.Index = IndexFile
	mb, err := o.m.encode()
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	if err := writeFile(dir, ManifestFile, mb); err != nil {
		return err
	}
	return o.writeIndex(dir)
}

// timeBase is the first arrival; without one the first scrape; else 0.
func (o *output) timeBase() int64 {
	if len(o.arrivals) > 0 {
		return o.arrivals[0]
	}
	first, ok := int64(0), false
	for g := range o.workers {
		for _, ss := range o.workers[g] {
			for _, s := range ss {
				if !ok || s.atNS < first {
					first, ok = s.atNS, true
				}
			}
		}
	}
	return first
}

// writeFile writes name (a path relative to dir).
func writeFile(dir, name string, b []byte) error {
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644); err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	return nil
}

// writeStream writes name (relative to dir) with write, buffered.
func writeStream(dir, name string, write func(io.Writer) error) error {
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		f.Close()
		return fmt.Errorf("tables: %s: %w", name, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("tables: %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tables: %w", err)
	}
	return nil
}

// removeFile removes name (relative to dir) when it exists: a file an earlier write left.
func removeFile(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tables: %w", err)
	}
	return nil
}

// writeRequestTables writes request_metrics.csv and each written column's CDF with its
// picture (and a histogram picture for the inter-arrival delay and the token counts).
func (o *output) writeRequestTables(dir string) error {
	t := o.t
	if err := writeStream(dir, RequestMetricsFile, t.writeRequestMetrics); err != nil {
		return err
	}
	for c, col := range columns {
		base := RequestPlotsDir + "/" + col.name
		if t.counts[c] == 0 {
			for _, name := range []string{base + ".csv", base + ".png", base + "_histogram.png"} {
				if err := removeFile(dir, name); err != nil {
					return err
				}
			}
			continue
		}
		vals := t.columnValues(c)
		format := Repr
		if col.integer {
			format = IntFormat
		}
		kept, cdf := exactCDFRows(vals)
		if err := writeFile(dir, base+".csv", exactCDFFile(col.name, kept, cdf, format)); err != nil {
			return err
		}
		group := GroupRequest
		if col.source == SourceSpan || col.source == SourceClientSpan {
			group = GroupServer
		}
		o.addFigure(&figure{file: base + ".png", kind: kindStep, title: col.name + " (exact CDF)",
			xLabel: col.name + " (" + col.unit + ")", yLab: "cdf", curves: []curve{{xys: xys(kept, cdf)}}},
			base+".csv", group, "Exact CDF of "+col.definition, col.source)
		if histogram[col.name] {
			o.addFigure(&figure{file: base + "_histogram.png", kind: kindHist, title: col.name + " (histogram, 25 bins)",
				xLabel: col.name + " (" + col.unit + ")", yLab: "requests", values: vals},
				base+".csv", GroupRequest, "Histogram (25 bins) of "+col.definition, col.source)
		}
	}
	return nil
}

// histogram names the columns drawn as a histogram too (sangam's request histograms that
// have a source here).
var histogram = map[string]bool{"request_inter_arrival_delay": true, "request_num_prompt_tokens": true, "request_num_gen_tokens": true}

// Picture groups of index.html (PictureEntry.Group), in page order.
const (
	GroupRequest = "request"
	GroupServer  = "server decomposition"
	GroupWorkers = "workers"
	GroupBatches = "batches"
)

// addFigure queues f for rendering and lists it in the manifest's pictures.
func (o *output) addFigure(f *figure, data, group, caption, source string) {
	o.figs = append(o.figs, f)
	o.m.Pictures = append(o.m.Pictures, PictureEntry{File: f.file, Data: data, Group: group, Caption: caption, Source: source})
}

// columnValues are column c's values (rows with one, in row order).
func (t *table) columnValues(c int) []float64 {
	vals := make([]float64, 0, t.counts[c])
	for i := range t.ids {
		if v := t.val(i, c); v == v {
			vals = append(vals, v)
		}
	}
	return vals
}

// xys pairs xs with ys.
func xys(xs, ys []float64) plotter.XYs {
	out := make(plotter.XYs, len(xs))
	for i := range xs {
		out[i].X, out[i].Y = xs[i], ys[i]
	}
	return out
}
