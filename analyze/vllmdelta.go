package analyze

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// series is one sample of an engine's family under its extra labels.
type series struct {
	extra map[string]string
	v     artifact.SeriesValue
}

// scrapeIndex is one scrape's vllm: series by family, engine and extra-label
// key.
type scrapeIndex struct {
	rec   *artifact.MetricsScrape
	kinds map[string]string
	fams  map[string]map[string]map[string]series
}

// extraKey renders the labels beyond engine and model_name: "a=b,c=d", or
// "_" for none.
func extraKey(labels map[string]string) (string, map[string]string) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "engine" && k != "model_name" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "_", map[string]string{}
	}
	sort.Strings(keys)
	extra := make(map[string]string, len(keys))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
		extra[k] = labels[k]
	}
	return b.String(), extra
}

func indexScrape(r *artifact.MetricsScrape) *scrapeIndex {
	ix := &scrapeIndex{rec: r, kinds: r.Scrape.Families, fams: map[string]map[string]map[string]series{}}
	for fam, byID := range r.Scrape.Values {
		if !strings.HasPrefix(fam, engine.Prefix) {
			continue
		}
		byEngine := map[string]map[string]series{}
		for id, v := range byID {
			ls := r.Scrape.LabelSets[id]
			eng, ok := ls["engine"]
			if !ok {
				eng = noEngine
			}
			key, extra := extraKey(ls)
			if byEngine[eng] == nil {
				byEngine[eng] = map[string]series{}
			}
			byEngine[eng][key] = series{extra: extra, v: v}
		}
		ix.fams[fam] = byEngine
	}
	return ix
}

// engines returns the engine keys with vllm: series in the scrape.
func (ix *scrapeIndex) engines() map[string]bool {
	out := map[string]bool{}
	for fam, byEngine := range ix.fams {
		if engine.IsStamp(fam, ix.kinds) {
			continue
		}
		for e := range byEngine {
			out[e] = true
		}
	}
	return out
}

// fieldOf names a family's report field: its catalogue field; a retired
// name's successor field unless the successor is exposed as well (then its
// own name); an uncatalogued family's exposed name.
func fieldOf(name string, exposed map[string]bool) (key string, info FieldInfo, meaning *string) {
	info = FieldInfo{Native: name, Provenance: "observed"}
	e, aliasOf, ok := engine.Resolve(name)
	if !ok {
		return name, info, nil
	}
	if e.Unit != "" {
		info.Unit = artifact.Ptr(e.Unit)
	}
	if e.Provenance != "" {
		info.Provenance = e.Provenance
	}
	key = e.Field
	if aliasOf != "" {
		info.DeprecatedAliasOf = artifact.Ptr(aliasOf)
		if exposed[aliasOf] {
			key = name
		}
	}
	return key, info, artifact.Ptr(e.Meaning)
}

// engineBlock differences one engine's families between the boundary
// scrapes and summarises its gauges over own.
func engineBlock(eng string, a, b *scrapeIndex, own []*scrapeIndex, seconds float64, epoch string) *VLLMEngineBlock {
	eb := &VLLMEngineBlock{
		Counters:   map[string]*CounterField{},
		Histograms: map[string]*HistogramField{},
		Gauges:     map[string]*GaugeField{},
		Unresolved: map[string][]string{},
	}
	kinds := map[string]string{}
	exposed := map[string]bool{}
	for _, ix := range append([]*scrapeIndex{b}, own...) { // the start scrape is in own
		for fam, byEngine := range ix.fams {
			exposed[fam] = true
			if _, ok := byEngine[eng]; !ok || engine.IsStamp(fam, ix.kinds) {
				continue
			}
			if _, seen := kinds[fam]; !seen || ix == a {
				kinds[fam] = ix.kinds[fam]
			}
		}
	}
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	note := func(field, state string, reasons []string) {
		if state == StateResolved {
			return
		}
		for _, r := range reasons {
			eb.Unresolved[r] = append(eb.Unresolved[r], field)
		}
	}
	for _, name := range names {
		key, info, meaning := fieldOf(name, exposed)
		switch kinds[name] {
		case engine.KindCounter:
			if a.fams[name][eng] == nil && b.fams[name][eng] == nil {
				continue // only in an interval scrape: nothing to difference
			}
			f := counterField(info, a.fams[name][eng], b.fams[name][eng], stampsOf(a, name, engine.KindCounter, eng), stampsOf(b, name, engine.KindCounter, eng), epoch)
			eb.Counters[key] = f
			note(key, f.State, f.Reasons)
		case engine.KindHistogram, "summary":
			if a.fams[name][eng] == nil && b.fams[name][eng] == nil {
				continue
			}
			f := histogramField(info, meaning, a.fams[name][eng], b.fams[name][eng], stampsOf(a, name, kinds[name], eng), stampsOf(b, name, kinds[name], eng), epoch)
			eb.Histograms[key] = f
			note(key, f.State, f.Reasons)
		default: // gauge, untyped
			f := gaugeField(info, name, eng, own)
			eb.Gauges[key] = f
			note(key, f.State, f.Reasons)
		}
	}
	for r := range eb.Unresolved {
		sort.Strings(eb.Unresolved[r])
	}
	eb.Derived = derive(eb, eng, own, seconds)
	return eb
}

// stampsOf returns the "_created" stamps of a family for one engine.
func stampsOf(ix *scrapeIndex, family, kind, eng string) map[string]series {
	return ix.fams[engine.StampName(family, kind)][eng]
}

// recreated reports whether a series' _created stamp differs between the
// scrapes; a stamp missing on either side proves nothing.
func recreated(key string, sa, sb map[string]series) bool {
	x, okA := sa[key]
	y, okB := sb[key]
	if !okA || !okB || x.v.Dist != nil || y.v.Dist != nil {
		return false
	}
	p, q := float64(x.v.Sample), float64(y.v.Sample)
	if math.IsNaN(p) && math.IsNaN(q) {
		return false
	}
	return p != q
}

// unionKeys returns the keys of both maps, sorted.
func unionKeys(a, b map[string]series) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	return sortedKeys(set)
}

// fieldState folds label-set states: resolved when all are, else
// unresolved with the distinct reasons.
func fieldState(states []string) (string, []string) {
	set := map[string]bool{}
	for _, s := range states {
		if s != StateResolved {
			set[s] = true
		}
	}
	if len(states) == 0 {
		return StateUnresolved, []string{ReasonSeriesMissing}
	}
	if len(set) == 0 {
		return StateResolved, nil
	}
	return StateUnresolved, sortedKeys(set)
}

func counterField(info FieldInfo, a, b, stampA, stampB map[string]series, epoch string) *CounterField {
	f := &CounterField{FieldInfo: info, ByLabel: map[string]CounterDelta{}}
	var states []string
	total := 0.0
	for _, key := range unionKeys(a, b) {
		x, okA := a[key]
		y, okB := b[key]
		okA, okB = okA && x.v.Dist == nil, okB && y.v.Dist == nil
		var d CounterDelta
		if okA {
			d.Start = fptr(float64(x.v.Sample))
		}
		if okB {
			d.End = fptr(float64(y.v.Sample))
		}
		p, q := float64(x.v.Sample), float64(y.v.Sample)
		switch {
		case !okA || !okB:
			d.State = ReasonSeriesMissing
		case epoch != "":
			d.State = epoch
		case !finite(p) || !finite(q):
			d.State = ReasonNonFinite
		case recreated(key, stampA, stampB):
			d.State = ReasonCounterRecreated
		case q < p:
			d.State = ReasonCounterReset
		default:
			d.State = StateResolved
			d.Delta = artifact.Ptr(q - p)
			total += q - p
		}
		f.ByLabel[key] = d
		states = append(states, d.State)
	}
	f.State, f.Reasons = fieldState(states)
	if f.State == StateResolved {
		f.Delta = artifact.Ptr(total)
	}
	return f
}

// histogramDelta differences one label set.
func histogramDelta(key string, x, y series, okA, okB bool, stampA, stampB map[string]series, epoch string) HistogramDelta {
	if !okA || !okB || x.v.Dist == nil || y.v.Dist == nil {
		return HistogramDelta{State: ReasonSeriesMissing}
	}
	da, db := x.v.Dist, y.v.Dist
	var missing []string
	for _, p := range []struct {
		name string
		v    *artifact.Float
	}{{"start_sum", da.Sum}, {"start_count", da.Count}, {"end_sum", db.Sum}, {"end_count", db.Count}} {
		if p.v == nil {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return HistogramDelta{State: ReasonSeriesMissing, Missing: missing}
	}
	if epoch != "" {
		return HistogramDelta{State: epoch}
	}
	allFinite := finite(float64(*da.Sum)) && finite(float64(*da.Count)) && finite(float64(*db.Sum)) && finite(float64(*db.Count))
	for _, d := range []*artifact.SeriesDistribution{da, db} {
		for _, bk := range d.Buckets {
			allFinite = allFinite && finite(float64(bk.Count))
		}
	}
	if !allFinite {
		return HistogramDelta{State: ReasonNonFinite}
	}
	if recreated(key, stampA, stampB) {
		return HistogramDelta{State: ReasonCounterRecreated}
	}
	if !sameBounds(da.Buckets, db.Buckets) {
		return HistogramDelta{State: ReasonBoundariesChanged}
	}
	backwards := float64(*db.Count) < float64(*da.Count) || float64(*db.Sum) < float64(*da.Sum)
	buckets := make([]BucketDelta, len(da.Buckets))
	for i := range da.Buckets {
		p, q := float64(da.Buckets[i].Count), float64(db.Buckets[i].Count)
		backwards = backwards || q < p
		buckets[i] = BucketDelta{LE: db.Buckets[i].LE, Delta: q - p}
	}
	if backwards {
		return HistogramDelta{State: ReasonCounterReset}
	}
	h := HistogramDelta{
		State:   StateResolved,
		Count:   float64(*db.Count) - float64(*da.Count),
		Sum:     float64(*db.Sum) - float64(*da.Sum),
		Buckets: buckets,
	}
	if h.Count > 0 {
		h.Mean = artifact.Ptr(h.Sum / h.Count)
	}
	return h
}

// sameBounds compares two bucket lists' bounds numerically (an unparseable
// bound matches nothing).
func sameBounds(a, b []artifact.SeriesBucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, errX := strconv.ParseFloat(a[i].LE, 64)
		y, errY := strconv.ParseFloat(b[i].LE, 64)
		if errX != nil || errY != nil || x != y {
			return false
		}
	}
	return true
}

func histogramField(info FieldInfo, meaning *string, a, b, stampA, stampB map[string]series, epoch string) *HistogramField {
	f := &HistogramField{FieldInfo: info, Meaning: meaning, ByLabel: map[string]HistogramDelta{}}
	keys := unionKeys(a, b)
	var states []string
	for _, key := range keys {
		x, okA := a[key]
		y, okB := b[key]
		d := histogramDelta(key, x, y, okA, okB, stampA, stampB, epoch)
		f.ByLabel[key] = d
		states = append(states, d.State)
	}
	state, reasons := fieldState(states)
	if state != StateResolved {
		f.HistogramDelta = HistogramDelta{State: state, Reasons: reasons}
		return f
	}
	total := HistogramDelta{State: StateResolved}
	var shape []BucketDelta
	sameShape := true
	for i, key := range keys {
		d := f.ByLabel[key]
		total.Count += d.Count
		total.Sum += d.Sum
		if i == 0 {
			shape = append([]BucketDelta(nil), d.Buckets...)
			continue
		}
		if len(d.Buckets) != len(shape) {
			sameShape = false
			continue
		}
		for j := range shape {
			if shape[j].LE != d.Buckets[j].LE {
				sameShape = false
			}
			shape[j].Delta += d.Buckets[j].Delta
		}
	}
	if sameShape {
		total.Buckets = shape
	}
	if total.Count > 0 {
		total.Mean = artifact.Ptr(total.Sum / total.Count)
	}
	f.HistogramDelta = total
	return f
}

// gaugeAcc accumulates one label set's samples.
type gaugeAcc struct {
	min, max, sum, last float64
	n, nonFinite        int
	labels              map[string]string
}

func gaugeField(info FieldInfo, name, eng string, own []*scrapeIndex) *GaugeField {
	f := &GaugeField{FieldInfo: info, Stats: map[string]GaugeStats{}, Labels: map[string]map[string]string{}}
	accs := map[string]*gaugeAcc{}
	for _, ix := range own {
		for key, s := range ix.fams[name][eng] {
			if s.v.Dist != nil {
				continue
			}
			acc := accs[key]
			if acc == nil {
				acc = &gaugeAcc{min: math.Inf(1), max: math.Inf(-1)}
				accs[key] = acc
			}
			acc.labels = s.extra
			v := float64(s.v.Sample)
			if !finite(v) {
				acc.nonFinite++
				continue
			}
			acc.n++
			acc.sum += v
			acc.min, acc.max, acc.last = math.Min(acc.min, v), math.Max(acc.max, v), v
		}
	}
	var states []string
	for key, acc := range accs {
		st := GaugeStats{State: StateResolved, Samples: acc.n, NonFinite: acc.nonFinite}
		if acc.n == 0 {
			st.State = ReasonNonFinite
		} else {
			st.Min, st.Max, st.Last = artifact.Ptr(acc.min), artifact.Ptr(acc.max), artifact.Ptr(acc.last)
			st.Mean = artifact.Ptr(acc.sum / float64(acc.n))
		}
		f.Stats[key] = st
		f.Labels[key] = acc.labels
		states = append(states, st.State)
	}
	f.State, f.Reasons = fieldState(states)
	return f
}

// sortedKeys returns the keys of a set, sorted, never nil.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fptr returns a pointer to an artifact.Float.
func fptr(v float64) *artifact.Float { f := artifact.Float(v); return &f }
