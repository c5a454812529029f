package tables

import (
	"cmp"
	"slices"
)

// Why texts of the series and worker files left out.
const (
	whyNoArrival    = "no measured request has an intended arrival or a send time"
	whyNoCompletion = "no measured request completed (status ok with an end time)"
	whyNoScrape     = "no ok infer.vllm_scrape record has this family (was /metrics scraped? --vllm-metrics-url)"
	whyNoSteps      = "no imported steps: per-batch files need infer.iteration records (an imported engine trace window), which these artifacts do not hold"
)

// writeRequestSeries writes request_arrival and request_completion as cumulative-count time
// series (countSeriesCSV) with their pictures; a series without events is removed.
func (o *output) writeRequestSeries(dir string) error {
	for _, s := range []struct {
		name, def, why, source string
		times                  []int64
	}{
		{SeriesArrival, "requests arrived so far (cumulative count) against seconds since the first arrival; an arrival is a measured request's intended time, its send for a closed loop",
			whyNoArrival, SourceSchedule, o.arrivals},
		{SeriesCompletion, "requests completed so far (status ok, cumulative count, at the client's end of response) against seconds since the first arrival",
			whyNoCompletion, SourceClient, o.completions},
	} {
		file := RequestPlotsDir + "/" + s.name + "_time_series.csv"
		e := FileEntry{Name: s.name, File: file, Source: s.source, Unit: "requests", Definition: s.def}
		if len(s.times) == 0 {
			e.Why = s.why
			o.m.RequestSeries = append(o.m.RequestSeries, e)
			for _, f := range []string{file, pngOf(file)} {
				if err := removeFile(dir, f); err != nil {
					return err
				}
			}
			continue
		}
		b := countSeriesCSV(s.name, s.times, o.base)
		if err := writeFile(dir, file, b); err != nil {
			return err
		}
		e.Written, e.Rows = true, len(Downsample(len(s.times), CDFRows))
		o.m.RequestSeries = append(o.m.RequestSeries, e)
		var pts []float64
		var counts []float64
		for _, k := range Downsample(len(s.times), CDFRows) {
			pts = append(pts, float64(s.times[k]-o.base)/1e9)
			counts = append(counts, float64(k+1))
		}
		o.addFigure(&figure{file: pngOf(file), kind: kindLine, title: s.name + " (cumulative count)",
			xLabel: "Time (s) since the first arrival", yLab: "requests", curves: []curve{{xys: xys(pts, counts)}}},
			file, GroupRequest, "Time series of "+s.def, s.source)
	}
	return nil
}

// pngOf is a CSV file's picture name.
func pngOf(csv string) string { return csv[:len(csv)-len(".csv")] + ".png" }

// writeWorkers writes each gauge's per-worker time series and CDF files (worker.go) with
// their pictures, one colour per worker; a gauge no scrape had is removed and listed with
// why.
func (o *output) writeWorkers(dir string) error {
	ws := o.workers
	o.m.Workers.Source = SourceScrape
	o.m.Workers.Workers = []string{}
	seen := map[string]bool{}
	for g, ga := range gauges {
		cdfFile, seriesFile := WorkerPlotsDir+"/"+workerCDFFile(g), WorkerPlotsDir+"/"+workerSeriesFile(g)
		e := WorkerMetricEntry{Name: ga.name, Family: ga.family, Source: SourceScrape, Unit: ga.unit,
			Definition: ga.definition, CDFFile: cdfFile, SeriesFile: seriesFile, Samples: map[string]int{}}
		ids := ws.workers(g)
		if len(ids) == 0 {
			e.Why = whyNoScrape
			o.m.Workers.Metrics = append(o.m.Workers.Metrics, e)
			for _, f := range []string{cdfFile, seriesFile, pngOf(cdfFile), pngOf(seriesFile)} {
				if err := removeFile(dir, f); err != nil {
					return err
				}
			}
			continue
		}
		e.Written = true
		cdf, err := ws.workerCDFCSV(g)
		if err != nil {
			return err
		}
		if err := writeFile(dir, cdfFile, cdf); err != nil {
			return err
		}
		if err := writeFile(dir, seriesFile, ws.workerSeriesCSV(g, o.base)); err != nil {
			return err
		}
		if err := o.workerFigures(g, ids, cdfFile, seriesFile); err != nil {
			return err
		}
		for _, id := range ids {
			e.Samples[id] = len(ws[g][id])
			if !seen[id] {
				seen[id] = true
				o.m.Workers.Workers = append(o.m.Workers.Workers, id)
			}
		}
		o.m.Workers.Metrics = append(o.m.Workers.Metrics, e)
	}
	slices.Sort(o.m.Workers.Workers)
	return nil
}

// workerFigures queues gauge g's CDF (step, per worker) and time series (line, per worker)
// pictures from the values the files hold.
func (o *output) workerFigures(g int, ids []string, cdfFile, seriesFile string) error {
	ga := gauges[g]
	grid := Grid(WorkerCDFRows)
	var cdfs, series []curve
	for _, id := range ids {
		q, err := o.workers.quantiles(g, id, grid)
		if err != nil {
			return err
		}
		ss := slices.Clone(o.workers[g][id])
		cdfs = append(cdfs, curve{label: "worker " + id, xys: xys(q, grid)})
		slices.SortStableFunc(ss, func(a, b sample) int { return cmp.Compare(a.atNS, b.atNS) })
		var ts, vs []float64
		for _, k := range Downsample(len(ss), CDFRows) {
			ts, vs = append(ts, float64(ss[k].atNS-o.base)/1e9), append(vs, ss[k].value)
		}
		series = append(series, curve{label: "worker " + id, xys: xys(ts, vs)})
	}
	o.addFigure(&figure{file: pngOf(cdfFile), kind: kindStep, title: "worker_" + ga.name + " (DDSketch CDF per worker)",
		xLabel: ga.name + " (" + ga.unit + ")", yLab: "cdf", curves: cdfs},
		cdfFile, GroupWorkers, "Per-worker CDF (101 quantiles) of "+ga.definition, SourceScrape)
	o.addFigure(&figure{file: pngOf(seriesFile), kind: kindLine, title: "worker_" + ga.name + " over time",
		xLabel: "Time (s) since the first arrival", yLab: ga.name + " (" + ga.unit + ")", curves: series},
		seriesFile, GroupWorkers, "Time series per worker of "+ga.definition, SourceScrape)
	return nil
}
