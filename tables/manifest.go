package tables

import "encoding/json"

// Manifest identification (manifest.json "schema" and "version").
const (
	ManifestSchema  = "inferprobe.tables.manifest"
	ManifestVersion = 1
)

// Manifest is manifest.json: what the directory holds and where each value comes from.
type Manifest struct {
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	// RequestMetrics describes request_metrics.csv.
	RequestMetrics RequestMetricsEntry `json:"request_metrics"`
	// RequestPlots are the CDF files written, relative to the directory, in column order.
	RequestPlots []string `json:"request_plots"`
	// SpanJoin counts the measured requests whose span joined, and the quarantined ones
	// by reason (package join's rules).
	SpanJoin SpanJoinEntry `json:"span_join"`
	// RequestSeries are request_arrival and request_completion (written or why not).
	RequestSeries []FileEntry `json:"request_series"`
	// Workers are the per-worker metrics from the /metrics scrapes.
	Workers WorkersEntry `json:"workers"`
	// Batches are the per-batch files (imported steps).
	Batches BatchesEntry `json:"batches"`
	// Pictures are the PNG files, in index.html's order within each group.
	Pictures []PictureEntry `json:"pictures"`
	// Timeline describes timeline.json.
	Timeline TimelineEntry `json:"timeline"`
	// Index is the page to open first (index.html).
	Index string `json:"index"`
}

// FileEntry describes one file of a series: its Name, File (relative to the directory),
// whether it is Written, the Rows written, Source, Unit, Definition and, when not written, Why.
type FileEntry struct {
	Name       string `json:"name"`
	File       string `json:"file"`
	Written    bool   `json:"written"`
	Rows       int    `json:"rows"`
	Source     string `json:"source"`
	Unit       string `json:"unit"`
	Definition string `json:"definition"`
	Why        string `json:"why,omitempty"`
}

// WorkersEntry describes the per-worker files: their Source (vllm_scrape), the worker ids
// (vLLM's "engine" label values, sorted) and each metric.
type WorkersEntry struct {
	Source  string              `json:"source"`
	Workers []string            `json:"workers"`
	Metrics []WorkerMetricEntry `json:"metrics"`
}

// WorkerMetricEntry is one per-worker metric: sangam's Name, the vLLM Family it is read
// from, its files (CDFFile, 101 rows per worker; SeriesFile, the time series), the samples
// per worker, and Why when no scrape had the family.
type WorkerMetricEntry struct {
	Name       string         `json:"name"`
	Family     string         `json:"family"`
	Written    bool           `json:"written"`
	Source     string         `json:"source"`
	Unit       string         `json:"unit"`
	Definition string         `json:"definition"`
	CDFFile    string         `json:"cdf_file"`
	SeriesFile string         `json:"series_file"`
	Samples    map[string]int `json:"samples_by_worker"`
	Why        string         `json:"why,omitempty"`
}

// BatchesEntry describes sangam's per-batch files, built from the engine steps imported
// from profiler traces (infer.iteration): Written is false, with Why, when there are none or
// they cannot be placed on the client clock. Files lists every per-batch file; Steps counts
// the rows of worker_batch_metrics.csv, Workers the worker ids (trace ranks) in file order,
// ClockSource how the steps were placed (join.PlaceSteps: same_host or artifact_record),
// Columns every worker_batch_metrics.csv column (written or not, with why) and Tables the
// other files with their definitions.
type BatchesEntry struct {
	Written     bool          `json:"written"`
	Files       []string      `json:"files"`
	Why         string        `json:"why,omitempty"`
	Source      string        `json:"source"`
	WorkerType  string        `json:"worker_type"`
	Steps       int           `json:"steps"`
	Workers     []string      `json:"workers"`
	ClockSource string        `json:"clock_source,omitempty"`
	Columns     []ColumnEntry `json:"columns,omitempty"`
	Tables      []FileEntry   `json:"tables,omitempty"`
}

// PictureEntry is one PNG: its File, the Data file it draws, its index.html Group (request,
// server decomposition, workers, batches), a one-line Caption and the data's Source.
type PictureEntry struct {
	File    string `json:"file"`
	Data    string `json:"data"`
	Group   string `json:"group"`
	Caption string `json:"caption"`
	Source  string `json:"source"`
}

// RequestMetricsEntry describes request_metrics.csv.
type RequestMetricsEntry struct {
	File     string `json:"file"`
	Rows     int    `json:"rows"`
	RowOrder string `json:"row_order"`
	// Columns lists "Request Id" and every sangam column, written or not, in sangam's order.
	Columns []ColumnEntry `json:"columns"`
}

// ColumnEntry describes one column: where its values come from (Source, "none" for a column
// no source observes), their Unit and Definition; Why says why a column is not written (no
// source, or no value in these runs).
type ColumnEntry struct {
	Name       string `json:"name"`
	Written    bool   `json:"written"`
	Source     string `json:"source"`
	Unit       string `json:"unit"`
	Definition string `json:"definition"`
	// Values is the number of rows with a value.
	Values int    `json:"values"`
	Why    string `json:"why,omitempty"`
}

// SpanJoinEntry is the span join's outcome.
type SpanJoinEntry struct {
	Joined      int            `json:"joined"`
	Quarantined map[string]int `json:"quarantined_by_reason"`
}

// Row orders (RequestMetricsEntry.RowOrder).
const (
	RowOrderRequestID = "request_id"
	RowOrderRecords   = "records"
)

// Why texts of a column with a source but no value.
const (
	whyNoSpan  = "no completed measured request joined a vLLM llm_request span with this attribute"
	whyNoValue = "no measured request has a value"
)

// manifest describes the table.
func (t *table) manifest() Manifest {
	m := Manifest{Schema: ManifestSchema, Version: ManifestVersion, RequestPlots: []string{}}
	rm := &m.RequestMetrics
	rm.File, rm.Rows, rm.RowOrder = RequestMetricsFile, len(t.ids), RowOrderRecords
	if t.sorted {
		rm.RowOrder = RowOrderRequestID
	}
	rm.Columns = append(rm.Columns, ColumnEntry{Name: "Request Id", Written: true, Source: SourceClient,
		Definition: "request_id of the infer.request record", Values: len(t.ids)})
	for c, col := range columns {
		e := ColumnEntry{Name: col.name, Source: col.source, Unit: col.unit, Definition: col.definition,
			Values: t.counts[c], Written: t.counts[c] > 0, Why: col.why}
		switch {
		case e.Written:
			m.RequestPlots = append(m.RequestPlots, RequestPlotsDir+"/"+col.name+".csv")
		case col.value != nil && (col.source == SourceSpan || col.source == SourceClientSpan):
			e.Why = whyNoSpan
		case col.value != nil:
			e.Why = whyNoValue
		}
		rm.Columns = append(rm.Columns, e)
	}
	m.SpanJoin.Quarantined = map[string]int{}
	for _, id := range t.measuredXIDs {
		if _, ok := t.join.Joined[id]; ok {
			m.SpanJoin.Joined++
		}
		if why, ok := t.join.Quarantined[id]; ok {
			m.SpanJoin.Quarantined[why]++
		}
	}
	return m
}

// encode is the manifest as indented JSON with a final newline (map keys sorted).
func (m Manifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
