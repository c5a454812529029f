package prom

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inferprobe/inferprobe/artifact"
)

// Limits bound one scrape. A body over any of
// them is refused with an error wrapping ErrOversized.
type Limits struct {
	// MaxBodyBytes bounds the body as read, after any Content-Encoding.
	MaxBodyBytes int64
	// MaxSeries bounds the sample lines (each is one Prometheus series) and,
	// separately, the # TYPE / # HELP declarations.
	MaxSeries int
	// MaxLineChars bounds one line, in characters (Unicode code points).
	MaxLineChars int
}

// Default limits.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultMaxSeries    = 20000
	DefaultMaxLineChars = 65536
)

// DefaultLimits returns 8 MiB, 20,000 series and 65,536-character lines.
func DefaultLimits() Limits {
	return Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxSeries: DefaultMaxSeries, MaxLineChars: DefaultMaxLineChars}
}

// withDefaults fills zero or negative fields with the defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	if l.MaxSeries <= 0 {
		l.MaxSeries = d.MaxSeries
	}
	if l.MaxLineChars <= 0 {
		l.MaxLineChars = d.MaxLineChars
	}
	return l
}

var (
	// ErrOversized is wrapped by errors for a body over a Limits bound; the
	// message starts with "oversized".
	ErrOversized = errors.New("oversized")
	// ErrUnparseable is wrapped by errors for a body that is not Prometheus
	// text exposition (an HTML page, a JSON error, a line cut before its
	// value) or has no sample at all; the message starts with "unparseable
	// response".
	ErrUnparseable = errors.New("unparseable response")
)

// Parse reads a Prometheus text exposition (format 0.0.4, as vLLM's
// prometheus_client serves it) into the compact form, after checking lim
// (zero fields mean the defaults). Names are validated with the UTF-8
// scheme, so vLLM's "vllm:" names are accepted. Whitespace is read as the
// Prometheus server's scraper reads it: any run of spaces and tabs separates
// tokens, spaces and tabs after a sample's value or timestamp are ignored,
// and the last line may lack its newline; a carriage return is not
// whitespace (a CRLF body is refused). Errors: ErrOversized (body, series,
// declarations or line over a limit), ErrUnparseable (the expfmt parser's
// error with its line number, a duplicated series or bucket, or no sample at
// all: an empty body never passes as an empty scrape).
func Parse(body []byte, lim Limits) (c *artifact.ScrapeSeries, err error) {
	lim = lim.withDefaults()
	if err := checkLimits(body, lim); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // the parser is not ours: never let it take the run down
			c, err = nil, fmt.Errorf("%w: parser failure: %v", ErrUnparseable, r)
		}
	}()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, perr := p.TextToMetricFamilies(bytes.NewReader(normalise(body)))
	if perr != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnparseable, perr)
	}
	if len(mfs) == 0 {
		return nil, fmt.Errorf("%w: no metric samples", ErrUnparseable)
	}
	return compactFamilies(mfs)
}

// checkLimits scans the body once for the size, line-length and series
// limits before any parsing work.
func checkLimits(body []byte, lim Limits) error {
	if int64(len(body)) > lim.MaxBodyBytes {
		return fmt.Errorf("%w: body of %d bytes is over the %d-byte limit", ErrOversized, len(body), lim.MaxBodyBytes)
	}
	series, types, helps := 0, 0, 0
	for n := 1; len(body) > 0; n++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(line) > lim.MaxLineChars && utf8.RuneCount(line) > lim.MaxLineChars {
			return fmt.Errorf("%w: line %d has more than %d characters", ErrOversized, n, lim.MaxLineChars)
		}
		t := bytes.TrimLeft(line, " \t")
		switch {
		case len(t) == 0:
		case t[0] == '#':
			rest := bytes.TrimLeft(t[1:], " \t")
			if bytes.HasPrefix(rest, []byte("TYPE")) {
				types++
			} else if bytes.HasPrefix(rest, []byte("HELP")) {
				helps++
			}
			if types > lim.MaxSeries || helps > lim.MaxSeries {
				return fmt.Errorf("%w: more than %d metric families declared", ErrOversized, lim.MaxSeries)
			}
		default:
			series++
			if series > lim.MaxSeries {
				return fmt.Errorf("%w: more than %d series", ErrOversized, lim.MaxSeries)
			}
		}
	}
	return nil
}

// normalise brings a body to the form the expfmt parser reads as the
// Prometheus server's scraper reads the original: the spaces and tabs that
// end a sample line (after its value or timestamp) are dropped and a last
// line without a newline gets one. Comment, HELP and TYPE lines are kept as
// written (HELP text keeps its trailing whitespace, as Prometheus keeps it),
// so are carriage returns, and so is every line's count, so parse errors
// name the body's own line numbers. Trimming never reaches into a label
// value: one cannot hold a raw newline, so a line ending inside quotes is
// refused either way. The body itself is returned when nothing changes.
func normalise(body []byte) []byte {
	var out []byte // nil until a line changes
	for i := 0; i < len(body); {
		n := bytes.IndexByte(body[i:], '\n')
		end := i + n
		if n < 0 {
			end = len(body)
		}
		line := body[i:end]
		keep := len(line)
		if t := bytes.TrimLeft(line, " \t"); len(t) == 0 || t[0] != '#' {
			keep = len(bytes.TrimRight(line, " \t"))
		}
		if out == nil && (keep < len(line) || n < 0) {
			out = make([]byte, i, len(body)+1)
			copy(out, body[:i])
		}
		if out != nil {
			out = append(append(out, line[:keep]...), '\n')
		}
		i = end + 1
	}
	if out == nil {
		return body
	}
	return out
}

// kindName maps an expfmt type to the families enum of the record schema.
func kindName(t dto.MetricType) string {
	switch t {
	case dto.MetricType_COUNTER:
		return "counter"
	case dto.MetricType_GAUGE:
		return "gauge"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return "histogram"
	case dto.MetricType_SUMMARY:
		return "summary"
	default:
		return "untyped"
	}
}

// compactFamilies folds parsed families into the compact form. Families are
// visited in name order and their series in exposition order, so label-set
// ids are deterministic for a given body.
func compactFamilies(mfs map[string]*dto.MetricFamily) (*artifact.ScrapeSeries, error) {
	c := &artifact.ScrapeSeries{
		Families:  make(map[string]string, len(mfs)),
		LabelSets: map[string]map[string]string{},
		Values:    make(map[string]map[string]artifact.SeriesValue, len(mfs)),
		Helps:     make(map[string]string, len(mfs)),
	}
	names := make([]string, 0, len(mfs))
	for name := range mfs {
		names = append(names, name)
	}
	sort.Strings(names)
	ids := map[string]string{}
	var key strings.Builder
	for _, name := range names {
		mf := mfs[name]
		kind := kindName(mf.GetType())
		name = validText(name)
		if _, dup := c.Families[name]; dup {
			return nil, fmt.Errorf("%w: family %q appears twice", ErrUnparseable, name)
		}
		c.Families[name] = kind
		if h := mf.GetHelp(); h != "" {
			c.Helps[name] = validText(h)
		}
		vals := make(map[string]artifact.SeriesValue, len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			pairs := m.GetLabel()
			key.Reset()
			sorted := make([]*dto.LabelPair, len(pairs))
			copy(sorted, pairs)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i].GetName() < sorted[j].GetName() })
			for _, lp := range sorted {
				key.WriteString(validText(lp.GetName()))
				key.WriteByte(0xff)
				key.WriteString(validText(lp.GetValue()))
				key.WriteByte(0xfe)
			}
			k := key.String()
			id, ok := ids[k]
			if !ok {
				id = strconv.Itoa(len(ids))
				ids[k] = id
				labels := make(map[string]string, len(pairs))
				for _, lp := range pairs {
					labels[validText(lp.GetName())] = validText(lp.GetValue())
				}
				c.LabelSets[id] = labels
			}
			if _, dup := vals[id]; dup {
				return nil, fmt.Errorf("%w: series %s%s appears twice", ErrUnparseable, name, labelText(c.LabelSets[id]))
			}
			v, err := valueOf(kind, m)
			if err != nil {
				return nil, fmt.Errorf("%w: %s%s: %v", ErrUnparseable, name, labelText(c.LabelSets[id]), err)
			}
			vals[id] = v
		}
		c.Values[name] = vals
	}
	return c, nil
}

// valueOf converts one parsed series.
func valueOf(kind string, m *dto.Metric) (artifact.SeriesValue, error) {
	switch kind {
	case "counter":
		return artifact.SeriesValue{Sample: artifact.Float(m.GetCounter().GetValue())}, nil
	case "gauge":
		return artifact.SeriesValue{Sample: artifact.Float(m.GetGauge().GetValue())}, nil
	case "histogram":
		h := m.GetHistogram()
		d := &artifact.SeriesDistribution{Buckets: make([]artifact.SeriesBucket, 0, len(h.GetBucket()))}
		bounds := make([]float64, 0, len(h.GetBucket()))
		for _, b := range h.GetBucket() {
			n := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				n = b.GetCumulativeCountFloat()
			}
			bounds = append(bounds, b.GetUpperBound())
			d.Buckets = append(d.Buckets, artifact.SeriesBucket{LE: formatBound(b.GetUpperBound()), Count: artifact.Float(n)})
		}
		if err := sortBuckets(d.Buckets, bounds); err != nil {
			return artifact.SeriesValue{}, err
		}
		if h.SampleSum != nil {
			d.Sum = fptr(h.GetSampleSum())
		}
		switch {
		case h.SampleCountFloat != nil:
			d.Count = fptr(h.GetSampleCountFloat())
		case h.SampleCount != nil:
			d.Count = fptr(float64(h.GetSampleCount()))
		}
		return artifact.SeriesValue{Dist: d}, nil
	case "summary":
		s := m.GetSummary()
		d := &artifact.SeriesDistribution{Buckets: make([]artifact.SeriesBucket, 0, len(s.GetQuantile()))}
		bounds := make([]float64, 0, len(s.GetQuantile()))
		for _, q := range s.GetQuantile() {
			bounds = append(bounds, q.GetQuantile())
			d.Buckets = append(d.Buckets, artifact.SeriesBucket{LE: formatBound(q.GetQuantile()), Count: artifact.Float(q.GetValue())})
		}
		if err := sortBuckets(d.Buckets, bounds); err != nil {
			return artifact.SeriesValue{}, err
		}
		if s.SampleSum != nil {
			d.Sum = fptr(s.GetSampleSum())
		}
		if s.SampleCount != nil {
			d.Count = fptr(float64(s.GetSampleCount()))
		}
		return artifact.SeriesValue{Dist: d}, nil
	default:
		return artifact.SeriesValue{Sample: artifact.Float(m.GetUntyped().GetValue())}, nil
	}
}

// sortBuckets orders buckets by bound and rejects a bound given twice.
func sortBuckets(b []artifact.SeriesBucket, bounds []float64) error {
	idx := make([]int, len(b))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return bounds[idx[i]] < bounds[idx[j]] })
	out := make([]artifact.SeriesBucket, len(b))
	for i, j := range idx {
		out[i] = b[j]
		if i > 0 && bounds[idx[i-1]] == bounds[j] {
			return fmt.Errorf("bucket le=%q appears twice", b[j].LE)
		}
	}
	copy(b, out)
	return nil
}

// formatBound writes a bucket bound (or quantile) in OpenMetrics canonical
// float form, as Python's prometheus_client does: "0.3", "1000.0", "1e-05",
// "+Inf".
func formatBound(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	a := math.Abs(v)
	if a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// parseBound reads a bucket bound written by formatBound or any exposition.
func parseBound(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// labelText renders labels as {a="b",c="d"} in name order, for messages.
func labelText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// validText replaces invalid UTF-8 with U+FFFD, so that a record encodes the
// same way every time it is written (encoding/json would otherwise replace
// it on the first write only).
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
