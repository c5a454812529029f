package engine

import (
	"github.com/inferprobe/inferprobe/artifact"
)

// Tally accumulates what a run's scrapes found, without keeping the scrapes
// themselves: counts, the last error, restarts, and the union of their
// discoveries (the absent lists are intersections: a name is absent when
// every ok scrape lacked it). Not safe for concurrent use.
type Tally struct {
	// OK and Failed count scrapes by status (a scrape without a discovery
	// counts as failed).
	OK, Failed int
	// LastError is the error of the latest failed scrape; "" if none.
	LastError string
	// Restarts counts changes of the exporter's process start between
	// consecutive ok scrapes.
	Restarts int

	present, unknown, deprecated, removed map[string]bool
	optPresent, engines, models           map[string]bool
	optAbsent, absent                     map[string]bool // intersections over ok scrapes
	lastStart                             *int64
	seenOK                                bool
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{
		present: map[string]bool{}, unknown: map[string]bool{}, deprecated: map[string]bool{},
		removed: map[string]bool{}, optPresent: map[string]bool{}, engines: map[string]bool{},
		models: map[string]bool{}, optAbsent: map[string]bool{}, absent: map[string]bool{},
	}
}

// TallyOf tallies scrapes in the order given.
func TallyOf(scrapes []artifact.MetricsScrape) *Tally {
	t := NewTally()
	for i := range scrapes {
		t.Add(&scrapes[i])
	}
	return t
}

// Add counts one scrape.
func (t *Tally) Add(r *artifact.MetricsScrape) {
	if !r.OK() || r.Discovery == nil {
		t.Failed++
		if r.Error != nil {
			t.LastError = *r.Error
		}
		return
	}
	t.OK++
	d := r.Discovery
	for _, pair := range []struct {
		dst   map[string]bool
		names []string
	}{{t.present, d.Present}, {t.unknown, d.Unknown}, {t.deprecated, d.DeprecatedPresent}, {t.removed, d.RemovedPresent},
		{t.optPresent, d.OptionalPresent}, {t.engines, d.Engines}, {t.models, d.ModelNames}} {
		for _, n := range pair.names {
			pair.dst[n] = true
		}
	}
	intersect := func(dst map[string]bool, names []string) {
		if !t.seenOK {
			for _, n := range names {
				dst[n] = true
			}
			return
		}
		keep := map[string]bool{}
		for _, n := range names {
			keep[n] = true
		}
		for n := range dst {
			if !keep[n] {
				delete(dst, n)
			}
		}
	}
	intersect(t.optAbsent, d.OptionalAbsent)
	intersect(t.absent, d.Absent)
	if t.seenOK && !SameProcessStart(t.lastStart, d.ProcessStartNS) {
		t.Restarts++
	}
	t.lastStart, t.seenOK = d.ProcessStartNS, true
}

// Clone returns an independent copy of the tally.
func (t *Tally) Clone() *Tally {
	c := *t
	for _, p := range []*map[string]bool{&c.present, &c.unknown, &c.deprecated, &c.removed, &c.optPresent, &c.engines, &c.models, &c.optAbsent, &c.absent} {
		m := make(map[string]bool, len(*p))
		for k, v := range *p {
			m[k] = v
		}
		*p = m
	}
	return &c
}

// Each list below is sorted and never nil.

// Present returns the catalogued families some ok scrape exposed.
func (t *Tally) Present() []string { return sortedKeys(t.present) }

// Unknown returns the uncatalogued vllm: families some ok scrape exposed.
func (t *Tally) Unknown() []string { return sortedKeys(t.unknown) }

// Deprecated returns the retired names with a successor some ok scrape exposed.
func (t *Tally) Deprecated() []string { return sortedKeys(t.deprecated) }

// DeprecatedSuccessors maps each of Deprecated's names to its successor.
func (t *Tally) DeprecatedSuccessors() map[string]string {
	out := make(map[string]string, len(t.deprecated))
	for n := range t.deprecated {
		if r, ok := LookupRetired(n); ok {
			out[n] = r.Successor
		}
	}
	return out
}

// Removed returns the retired names without a successor some ok scrape exposed.
func (t *Tally) Removed() []string { return sortedKeys(t.removed) }

// OptionalPresent returns the optional-subsystem families some ok scrape exposed.
func (t *Tally) OptionalPresent() []string { return sortedKeys(t.optPresent) }

// OptionalAbsent returns the optional names every ok scrape lacked.
func (t *Tally) OptionalAbsent() []string { return sortedKeys(t.optAbsent) }

// Absent returns the unconditional catalogued families every ok scrape lacked.
func (t *Tally) Absent() []string { return sortedKeys(t.absent) }

// Engines returns the engine labels seen on ok scrapes.
func (t *Tally) Engines() []string { return sortedKeys(t.engines) }

// ModelNames returns the model_name labels seen on ok scrapes.
func (t *Tally) ModelNames() []string { return sortedKeys(t.models) }

// SameProcessStart compares two optional exporter process starts (ns): equal
// values, or both unknown.
func SameProcessStart(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
