package analyze

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// VLLMNote is telemetry.vllm.note.
const VLLMNote = "engine-aggregate evidence over every request the engine served in the window, other clients' traffic included; nothing here attributes GPU time to a request"

// Report statuses of telemetry.vllm.
const (
	VLLMCollected = "collected"
	VLLMAbsent    = "absent"
)

// VLLMBlock is the telemetry.vllm block of the analysis report:
// {"status":"absent"} when the artifact has no scrape and no vLLM capability,
// otherwise the run-wide engine summary, the capability records, and one
// VLLMCaseBlock per case.
type VLLMBlock struct {
	Status           string `json:"status"`
	ObservationScope string `json:"observation_scope"`
	Note             string `json:"note"`
	// Engine summarises every scrape of the run.
	Engine *VLLMEngineSummary `json:"engine"`
	// Spans is the span summary, filled by the span join (absent when nil).
	Spans *SpanSummary `json:"spans,omitempty"`
	// Capabilities maps a vllm.* component to its record's content.
	Capabilities map[string]CapabilitySummary `json:"capabilities"`
	// Cases maps a case id to its block.
	Cases map[string]*VLLMCaseBlock `json:"cases"`
}

// MarshalJSON writes {"status":"absent"} for an absent block, every field
// otherwise.
func (b VLLMBlock) MarshalJSON() ([]byte, error) {
	if b.Status != VLLMCollected {
		return json.Marshal(struct {
			Status string `json:"status"`
		}{b.Status})
	}
	type plain VLLMBlock
	p := plain(b)
	if p.Capabilities == nil {
		p.Capabilities = map[string]CapabilitySummary{}
	}
	if p.Cases == nil {
		p.Cases = map[string]*VLLMCaseBlock{}
	}
	return json.Marshal(p)
}

// CapabilitySummary is an infer.capabilities record without its context.
type CapabilitySummary struct {
	Available bool           `json:"available"`
	Supported []string       `json:"supported"`
	Enabled   []string       `json:"enabled"`
	Collected []string       `json:"collected"`
	Metadata  map[string]any `json:"metadata"`
}

// VLLMEngineSummary is telemetry.vllm.engine: the run's scrapes as a whole.
type VLLMEngineSummary struct {
	// SourceURL is the first scrape's URL; null without scrapes.
	SourceURL *string      `json:"source_url"`
	Scrapes   ScrapeCounts `json:"scrapes"`
	// Engines and ModelNames are the union over ok scrapes.
	Engines    []string `json:"engines"`
	ModelNames []string `json:"model_names"`
	// Epochs are runs of consecutive ok scrapes (client-clock order) that
	// saw one exporter process start: one per exporter identity, a new one
	// after each restart or each answer from another exporter.
	Epochs []ExporterEpoch `json:"epochs"`
	// DeprecatedSeries are retired names with a successor seen on some
	// scrape; DeprecatedSuccessors maps each to its successor.
	DeprecatedSeries     []string          `json:"deprecated_series"`
	DeprecatedSuccessors map[string]string `json:"deprecated_successors"`
	RemovedSeries        []string          `json:"removed_series"`
	UnknownSeries        []string          `json:"unknown_series"`
	OptionalPresent      []string          `json:"optional_present"`
	// OptionalAbsent and Absent hold names missing from every ok scrape.
	OptionalAbsent []string `json:"optional_absent"`
	Absent         []string `json:"absent"`
}

// ScrapeCounts counts scrapes by status.
type ScrapeCounts struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
}

// ExporterEpoch is one exporter identity's run of scrapes.
type ExporterEpoch struct {
	ProcessStartNS    *int64 `json:"process_start_ns"`
	FirstObservedAtNS int64  `json:"first_observed_at_ns"`
	LastObservedAtNS  int64  `json:"last_observed_at_ns"`
	Scrapes           int    `json:"scrapes"`
}

// VLLMTelemetry builds the telemetry.vllm block from a run's scrapes (any
// order), the case ids to report (each case's measured phase; see
// VLLMCaseTelemetry), and the run's infer.capabilities records (those whose
// component starts with "vllm." are kept). With no scrape and no vLLM
// capability the block is {"status":"absent"}.
func VLLMTelemetry(scrapes []artifact.MetricsScrape, caseIDs []string, caps []artifact.Capabilities) *VLLMBlock {
	capSummaries := map[string]CapabilitySummary{}
	for _, c := range caps {
		if strings.HasPrefix(c.Component, "vllm.") {
			capSummaries[c.Component] = CapabilitySummary{
				Available: c.Available, Supported: nonNil(c.Supported), Enabled: nonNil(c.Enabled),
				Collected: nonNil(c.Collected), Metadata: c.Metadata,
			}
		}
	}
	if len(scrapes) == 0 && len(capSummaries) == 0 {
		return &VLLMBlock{Status: VLLMAbsent}
	}
	b := &VLLMBlock{
		Status:           VLLMCollected,
		ObservationScope: artifact.ScopeEngineAggregate,
		Note:             VLLMNote,
		Engine:           SummarizeScrapes(scrapes),
		Capabilities:     capSummaries,
		Cases:            map[string]*VLLMCaseBlock{},
	}
	for _, id := range caseIDs {
		b.Cases[id] = VLLMCaseTelemetry(scrapes, id)
	}
	return b
}

// VLLMBlockOf builds the telemetry.vllm block of an artifact: its scrape
// records, its vLLM capability records, and one case block per case with a
// measured phase window (in window order). Errors: an undecodable scrape
// record (wrapping artifact.ErrMetricsScrape).
func VLLMBlockOf(a *artifact.Artifact) (*VLLMBlock, error) {
	scrapes, err := artifact.MetricsScrapes(a)
	if err != nil {
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for _, w := range a.PhaseWindows {
		if w.Phase == artifact.PhaseMeasured && !seen[w.CaseID] {
			seen[w.CaseID] = true
			ids = append(ids, w.CaseID)
		}
	}
	return VLLMTelemetry(scrapes, ids, a.Capabilities), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SummarizeScrapes builds the engine summary of a run's scrapes.
func SummarizeScrapes(scrapes []artifact.MetricsScrape) *VLLMEngineSummary {
	order := make([]*artifact.MetricsScrape, len(scrapes))
	for i := range scrapes {
		order[i] = &scrapes[i]
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].ObservedAtNS < order[j].ObservedAtNS })
	t := engine.NewTally()
	s := &VLLMEngineSummary{Epochs: []ExporterEpoch{}, DeprecatedSuccessors: map[string]string{}}
	if len(scrapes) > 0 {
		s.SourceURL = artifact.Ptr(scrapes[0].SourceURL)
	}
	for _, r := range order {
		t.Add(r)
		if !r.OK() || r.Discovery == nil {
			continue
		}
		ps := r.Discovery.ProcessStartNS
		if n := len(s.Epochs); n > 0 && engine.SameProcessStart(s.Epochs[n-1].ProcessStartNS, ps) {
			s.Epochs[n-1].LastObservedAtNS = r.ObservedAtNS
			s.Epochs[n-1].Scrapes++
			continue
		}
		s.Epochs = append(s.Epochs, ExporterEpoch{ProcessStartNS: ps, FirstObservedAtNS: r.ObservedAtNS, LastObservedAtNS: r.ObservedAtNS, Scrapes: 1})
	}
	s.Scrapes = ScrapeCounts{OK: t.OK, Failed: t.Failed}
	s.Engines, s.ModelNames = t.Engines(), t.ModelNames()
	s.DeprecatedSeries, s.RemovedSeries = t.Deprecated(), t.Removed()
	s.UnknownSeries, s.OptionalPresent = t.Unknown(), t.OptionalPresent()
	s.OptionalAbsent, s.Absent = t.OptionalAbsent(), t.Absent()
	s.DeprecatedSuccessors = t.DeprecatedSuccessors()
	return s
}
