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
		case col.value != nil && (col.source == SourceVLLMSpan || col.source == SourceClientVLLMSpan):
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
