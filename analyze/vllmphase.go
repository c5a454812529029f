package analyze

import (
	"sort"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// VLLMCaseTelemetry is the case block of a case's measured phase: see VLLMPhaseTelemetry.
func VLLMCaseTelemetry(scrapes []artifact.MetricsScrape, caseID string) *VLLMCaseBlock {
	return VLLMPhaseTelemetry(scrapes, caseID, artifact.PhaseMeasured)
}

// VLLMPhaseTelemetry computes the block of one case and phase from the run's
// scrapes (any order; other cases' and phases' scrapes are ignored). The
// window runs from the first ok phase_start scrape to the last ok phase_end
// scrape; without either the block is unresolved with
// "scrape_failed:<marker>" (a scrape with that marker failed) or
// "scrape_missing:<marker>", a null window and no engines. Counters and
// histograms are differenced between the two boundary scrapes; gauges are
// summarised over every ok scrape of the window from the start scrape's
// exporter. Nothing unresolved is ever read as 0.
func VLLMPhaseTelemetry(scrapes []artifact.MetricsScrape, caseID, phase string) *VLLMCaseBlock {
	mine := phaseScrapes(scrapes, caseID, phase)
	block := &VLLMCaseBlock{State: StateResolved, Reasons: []string{}, Engines: map[string]*VLLMEngineBlock{}}
	start, end, reasons := boundaryScrapes(mine)
	block.Reasons = append(block.Reasons, reasons...)
	if len(block.Reasons) > 0 {
		block.State = StateUnresolved
		return block
	}
	w := windowOf(mine, start, end)
	block.Reasons = append(block.Reasons, w.reasons...)
	if len(block.Reasons) > 0 {
		block.State = StateUnresolved
	}
	seconds := float64(end.ObservedAtNS-start.ObservedAtNS) / 1e9
	block.Window = &ScrapeWindow{
		StartObservedAtNS: start.ObservedAtNS,
		EndObservedAtNS:   end.ObservedAtNS,
		Seconds:           seconds,
		IncludesDrain:     true,
		Scrapes:           len(w.own),
		ForeignScrapes:    w.inside - len(w.own),
		FailedScrapes:     w.failed,
	}
	block.Engines = engineBlocks(start, end, w.own, seconds, w.epoch)
	return block
}

// phaseScrapes returns the scrapes of one case and phase in observation order (ties in the
// order given).
func phaseScrapes(scrapes []artifact.MetricsScrape, caseID, phase string) []*artifact.MetricsScrape {
	var mine []*artifact.MetricsScrape
	for i := range scrapes {
		r := &scrapes[i]
		if r.CaseID != nil && *r.CaseID == caseID && r.Phase != nil && *r.Phase == phase {
			mine = append(mine, r)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].ObservedAtNS < mine[j].ObservedAtNS })
	return mine
}

// boundaryScrapes finds a phase's window in its ordered scrapes: the first ok phase_start
// scrape and the last ok phase_end scrape. reasons says why there is no window:
// "scrape_failed:<marker>" (a scrape with that marker failed) or "scrape_missing:<marker>"
// for each boundary not found (start first), and scrapes_out_of_order when the end was
// observed before the start.
func boundaryScrapes(mine []*artifact.MetricsScrape) (start, end *artifact.MetricsScrape, reasons []string) {
	for _, r := range mine {
		if r.OK() && r.Discovery != nil {
			if r.Marker == artifact.ScrapeMarkerPhaseStart && start == nil {
				start = r
			}
			if r.Marker == artifact.ScrapeMarkerPhaseEnd {
				end = r
			}
		}
	}
	for _, b := range []struct {
		marker string
		found  *artifact.MetricsScrape
	}{{artifact.ScrapeMarkerPhaseStart, start}, {artifact.ScrapeMarkerPhaseEnd, end}} {
		if b.found != nil {
			continue
		}
		reason := ReasonScrapeMissing
		for _, r := range mine {
			if r.Marker == b.marker {
				reason = ReasonScrapeFailed
			}
		}
		reasons = append(reasons, reason+":"+b.marker)
	}
	if start != nil && end != nil && end.ObservedAtNS < start.ObservedAtNS {
		reasons = append(reasons, ReasonOutOfOrder)
	}
	return start, end, reasons
}

// phaseWindow is what a window's scrapes say about the exporter that answered them.
type phaseWindow struct {
	// own are the ok scrapes in the window from the start scrape's exporter (same process
	// start, or both unknown); inside counts every ok scrape in the window, failed the
	// failed ones.
	own            []*artifact.MetricsScrape
	inside, failed int
	// reasons are engine_restart, engine_set_changed and exporter_identity_unknown, in that
	// order, as found; epoch is the reason every counter and histogram delta takes instead
	// of a value (engine_restart, else exporter_identity_unknown, else "").
	reasons []string
	epoch   string
}

// windowOf checks the exporter identity over the scrapes observed between start and end
// (both included): a process start that differs from the start scrape's is a restart, one
// that is unknown on any scrape leaves a restart possible, and a different engine label set
// is a changed engine set.
func windowOf(mine []*artifact.MetricsScrape, start, end *artifact.MetricsScrape) phaseWindow {
	var w phaseWindow
	var inside []*artifact.MetricsScrape
	for _, r := range mine {
		if r.ObservedAtNS < start.ObservedAtNS || r.ObservedAtNS > end.ObservedAtNS {
			continue
		}
		if r.OK() && r.Discovery != nil {
			inside = append(inside, r)
		} else {
			w.failed++
		}
	}
	w.inside = len(inside)
	startPS := start.Discovery.ProcessStartNS
	restart, changed, unknown := false, false, startPS == nil
	for _, r := range inside {
		ps := r.Discovery.ProcessStartNS
		switch {
		case ps == nil || startPS == nil:
			unknown = unknown || ps == nil
		case *ps != *startPS:
			restart = true
		}
		if !equalStrings(r.Discovery.Engines, start.Discovery.Engines) {
			changed = true
		}
		if engine.SameProcessStart(ps, startPS) {
			w.own = append(w.own, r)
		}
	}
	if restart {
		w.reasons = append(w.reasons, ReasonEngineRestart)
		w.epoch = ReasonEngineRestart
	}
	if changed {
		w.reasons = append(w.reasons, ReasonEngineSetChanged)
	}
	if unknown {
		w.reasons = append(w.reasons, ReasonIdentityUnknown)
		if w.epoch == "" {
			w.epoch = ReasonIdentityUnknown
		}
	}
	return w
}

// engineBlocks builds one block per engine label seen on either boundary scrape: counters
// and histograms differenced between start and end, gauges over own (epoch: see
// phaseWindow).
func engineBlocks(start, end *artifact.MetricsScrape, own []*artifact.MetricsScrape, seconds float64, epoch string) map[string]*VLLMEngineBlock {
	ixStart, ixEnd := indexScrape(start), indexScrape(end)
	ixOwn := make([]*scrapeIndex, 0, len(own))
	for _, r := range own {
		switch r {
		case start:
			ixOwn = append(ixOwn, ixStart)
		case end:
			ixOwn = append(ixOwn, ixEnd)
		default:
			ixOwn = append(ixOwn, indexScrape(r))
		}
	}
	engines := ixStart.engines()
	for e := range ixEnd.engines() {
		engines[e] = true
	}
	out := make(map[string]*VLLMEngineBlock, len(engines))
	for e := range engines {
		out[e] = engineBlock(e, ixStart, ixEnd, ixOwn, seconds, epoch)
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
