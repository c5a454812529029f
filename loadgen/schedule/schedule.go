// Package schedule builds open-loop arrival schedules and paces dispatch against them.
//
// The contract is stormlog's `infer profile --arrival` (closed, fixed-rate, poisson, burst,
// replay). In the open-loop modes the schedule is fixed before a phase starts and the first
// arrival is at offset 0. A phase schedules at most MaxArrivals arrivals. A request count
// caps the number of arrivals, a duration keeps the arrivals before the window closes, and a
// replay with neither sends the whole trace. A closed loop has no schedule.
//
// Dispatchers must follow absolute target times — phaseStart.Add(offset) passed to
// WaitUntil — and never sleep relative to "now", so that lateness does not accumulate.
package schedule

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Mode is an arrival mode, spelled as the --arrival flag values.
type Mode string

// Arrival modes. Every mode except Closed is open loop.
const (
	Closed    Mode = "closed"     // a worker sends its next request when its previous one finishes
	FixedRate Mode = "fixed-rate" // evenly spaced at Rate requests/second
	Poisson   Mode = "poisson"    // exponential gaps at Rate requests/second, drawn from the seed
	Burst     Mode = "burst"      // BurstSize requests every BurstInterval
	Replay    Mode = "replay"     // the offsets of a trace
)

// OpenLoop reports whether m is an open-loop mode (every known mode except Closed).
func (m Mode) OpenLoop() bool {
	switch m {
	case FixedRate, Poisson, Burst, Replay:
		return true
	}
	return false
}

// MaxArrivals is the most arrivals one phase may schedule, warmup phases included (the
// contract's cap; a larger schedule is almost always a typo in --rate or --duration).
const MaxArrivals = 1_000_000

// ErrTooManyArrivals is returned (wrapped) by Build when a phase would schedule more than
// MaxArrivals arrivals, and by ReadOffsetTrace when a trace has more lines than allowed.
var ErrTooManyArrivals = errors.New("the arrival schedule has more than 1,000,000 requests; check --rate, --duration, --requests and --warmup-requests")

// maxOffset is the latest offset a schedule may hold: time.Duration's range (about 292 years).
const maxOffset = time.Duration(math.MaxInt64)

// Spec says how the requests of one workload case arrive. Only the fields of its Mode may be
// set: Rate for FixedRate and Poisson (requests/second, finite, > 0); BurstSize (≥ 1) and
// BurstInterval (> 0) for Burst; Trace for Replay (offsets from the phase start, sorted,
// non-negative, non-empty, as ReadOffsetTrace returns them). Closed takes none.
type Spec struct {
	Mode          Mode
	Rate          float64
	BurstSize     int
	BurstInterval time.Duration
	Trace         []time.Duration
}

// Validate checks that the fields of spec match its mode, with the contract's rules:
// unknown mode, a missing or non-positive or infinite rate, a burst without
// size or interval, a replay without a trace, and any field given to a mode that does not
// take it are errors.
func (s Spec) Validate() error {
	rateMode := s.Mode == FixedRate || s.Mode == Poisson
	switch s.Mode {
	case Closed, FixedRate, Poisson, Burst, Replay:
	default:
		return fmt.Errorf("arrival mode must be one of closed, fixed-rate, poisson, burst, replay, not %q", string(s.Mode))
	}
	if rateMode {
		if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
			return fmt.Errorf("%s arrivals need a finite rate > 0, got %g", s.Mode, s.Rate)
		}
	} else if s.Rate != 0 {
		return fmt.Errorf("%s arrivals do not take a rate", s.Mode)
	}
	if s.Mode == Burst {
		if s.BurstSize < 1 {
			return fmt.Errorf("burst arrivals need a burst size ≥ 1, got %d", s.BurstSize)
		}
		if s.BurstInterval <= 0 {
			return fmt.Errorf("burst arrivals need a burst interval > 0, got %v", s.BurstInterval)
		}
	} else if s.BurstSize != 0 || s.BurstInterval != 0 {
		return fmt.Errorf("%s arrivals do not take a burst size or interval", s.Mode)
	}
	if s.Mode == Replay {
		if len(s.Trace) == 0 {
			return errors.New("replay arrivals need a non-empty arrival trace")
		}
		for i, o := range s.Trace {
			if o < 0 {
				return fmt.Errorf("arrival trace offset %d is negative (%v)", i, o)
			}
			if i > 0 && o < s.Trace[i-1] {
				return fmt.Errorf("arrival trace offsets are not sorted at offset %d (%v after %v)", i, o, s.Trace[i-1])
			}
		}
	} else if s.Trace != nil {
		return fmt.Errorf("%s arrivals do not take an arrival trace", s.Mode)
	}
	return nil
}

// Schedule is one phase's fixed arrival schedule.
type Schedule struct {
	// Offsets are the intended arrival times, measured from the phase start, in
	// non-decreasing order; the first generated arrival is at 0. len(Offsets) is the
	// phase window's scheduled_arrivals.
	Offsets []time.Duration
	// EndpointOffset is scheduled_endpoint_offset_ns (contract: "Measured window and
	// drain"): where the schedule itself ends, from the phase start, independent of when
	// requests were sent. A duration-limited phase ends at the duration; a count-limited
	// one "one whole slot after the last scheduled arrival: the next offset the schedule
	// would have produced" — fixed-rate N/rate, Poisson the (N+1)-th cumulative draw (so
	// N/T_N is the usual rate estimator), burst the next burst boundary
	// ceil(N/size)·interval. When both bounds are given and the count stopped the schedule
	// first, it is that slot end, at most the duration. A replay's endpoint is its
	// duration; nil (null) for a replay without one, which declares no endpoint.
	EndpointOffset *time.Duration
}

// Build returns the schedule of one open-loop phase. requests caps the number of arrivals
// (0 = no cap); duration keeps only arrivals with offset < duration (0 = no window); a
// replay with neither sends its whole trace, the other modes need at least one of them.
// seed and stream seed the Poisson gaps: a PCG seeded with (seed, first 8 bytes of
// SHA-256(stream)), so the same (seed, stream) gives the same schedule and different
// streams (e.g. caseID+"/"+phase) give independent ones. The other modes ignore both.
//
// Errors: an invalid spec (see Spec.Validate), a Closed spec (a closed loop has no
// schedule), negative requests or duration, a missing bound, an offset beyond
// time.Duration's range, and more than MaxArrivals arrivals (wrapping ErrTooManyArrivals;
// exactly MaxArrivals is allowed).
func Build(spec Spec, requests int, duration time.Duration, seed int64, stream string) (Schedule, error) {
	if err := spec.Validate(); err != nil {
		return Schedule{}, err
	}
	if spec.Mode == Closed {
		return Schedule{}, errors.New("a closed loop has no arrival schedule")
	}
	if requests < 0 {
		return Schedule{}, fmt.Errorf("request count must be ≥ 0, got %d", requests)
	}
	if duration < 0 {
		return Schedule{}, fmt.Errorf("duration must be ≥ 0, got %v", duration)
	}
	if requests == 0 && duration == 0 && spec.Mode != Replay {
		return Schedule{}, fmt.Errorf("%s arrivals need a request count or a duration", spec.Mode)
	}
	if requests > MaxArrivals {
		return Schedule{}, fmt.Errorf("%d requests: %w", requests, ErrTooManyArrivals)
	}
	gen := newGenerator(spec, seed, stream)
	capacity := requests
	if capacity == 0 && spec.Mode == Replay {
		capacity = len(spec.Trace)
	}
	if capacity == 0 || capacity > 4096 && duration > 0 {
		capacity = 4096 // grows as needed: a duration bound's count is not known up front
	}
	offsets := make([]time.Duration, 0, capacity)
	countStopped := false
	for {
		if requests > 0 && len(offsets) == requests {
			countStopped = true
			break
		}
		off, ok, err := gen.next()
		if !ok {
			break // the trace ran out
		}
		if err != nil {
			if duration > 0 {
				break // beyond the representable range, so beyond the window too
			}
			return Schedule{}, err
		}
		if duration > 0 && off >= duration {
			break
		}
		if len(offsets) == MaxArrivals {
			return Schedule{}, ErrTooManyArrivals
		}
		offsets = append(offsets, off)
	}
	s := Schedule{Offsets: offsets}
	var end time.Duration
	known := false
	if countStopped {
		end, known = gen.slotEnd(len(offsets))
	}
	if duration > 0 && (!known || end > duration) {
		end, known = duration, true
	}
	if known {
		s.EndpointOffset = &end
	}
	return s, nil
}

// generator yields a mode's unbounded offsets in order.
type generator struct {
	spec Spec
	i    int        // index of the arrival next() yields next
	rng  *rand.Rand // Poisson gaps
	t    float64    // Poisson: cumulative seconds of arrival i
}

func newGenerator(spec Spec, seed int64, stream string) *generator {
	g := &generator{spec: spec}
	if spec.Mode == Poisson {
		sum := sha256.Sum256([]byte(stream))
		g.rng = rand.New(rand.NewPCG(uint64(seed), binary.BigEndian.Uint64(sum[:8])))
	}
	return g
}

// seconds converts non-negative seconds to a Duration rounded to the nanosecond, or fails
// when it does not fit.
func seconds(s float64) (time.Duration, error) {
	ns := math.Round(s * 1e9)
	if !(ns >= 0) || ns >= float64(maxOffset) {
		return 0, fmt.Errorf("an arrival offset of %g s is beyond the longest schedule inferprobe can represent (about 292 years)", s)
	}
	return time.Duration(ns), nil
}

// next returns the offset of arrival g.i and advances; ok is false only when a replay
// trace is exhausted.
func (g *generator) next() (off time.Duration, ok bool, err error) {
	i := g.i
	g.i++
	switch g.spec.Mode {
	case FixedRate:
		off, err = seconds(float64(i) / g.spec.Rate)
	case Poisson:
		off, err = seconds(g.t)
		g.t += g.rng.ExpFloat64() / g.spec.Rate
	case Burst:
		off, err = burstOffset(i/g.spec.BurstSize, g.spec.BurstInterval)
	case Replay:
		if i >= len(g.spec.Trace) {
			return 0, false, nil
		}
		off = g.spec.Trace[i]
	}
	return off, true, err
}

func burstOffset(burst int, interval time.Duration) (time.Duration, error) {
	if burst > 0 && interval > maxOffset/time.Duration(burst) {
		return 0, fmt.Errorf("burst %d at %v intervals is beyond the longest schedule inferprobe can represent (about 292 years)", burst, interval)
	}
	return time.Duration(burst) * interval, nil
}

// slotEnd is the endpoint of a schedule stopped by its count after n arrivals (g has
// yielded exactly n): the offset the generator would produce next — for bursts the next
// burst boundary ceil(n/size)·interval — saturated at the largest Duration. A replay
// declares none (ok false): only a duration gives it an endpoint.
func (g *generator) slotEnd(n int) (time.Duration, bool) {
	if g.spec.Mode == Burst {
		size := g.spec.BurstSize
		e, err := burstOffset((n+size-1)/size, g.spec.BurstInterval)
		if err != nil {
			return maxOffset, true
		}
		return e, true
	}
	if g.spec.Mode == Replay {
		return 0, false
	}
	e, _, err := g.next()
	if err != nil {
		return maxOffset, true
	}
	return e, true
}

// CaseLabel returns the case-id prefix naming an arrival shape, per the contract's table:
// "c<concurrency>" for a closed loop ("closed" when concurrency < 1, i.e. unknown),
// "fixed<rate>", "poisson<rate>", "burst<size>x<interval seconds>s", "replay". Numbers use
// Python's %g (6 significant digits, exponent below 1e-4 or from 1e6, no trailing zeros):
// fixed2, poisson0.5, burst8x1.5s, fixed1e+06, poisson0.123457. Two settings with one
// label (--rate 2,2.0) give one case id, which the caller reports as a usage error.
func CaseLabel(spec Spec, concurrency int) string {
	switch spec.Mode {
	case Closed:
		if concurrency < 1 {
			return "closed"
		}
		return "c" + strconv.Itoa(concurrency)
	case FixedRate:
		return "fixed" + FormatG(spec.Rate)
	case Poisson:
		return "poisson" + FormatG(spec.Rate)
	case Burst:
		return "burst" + strconv.Itoa(spec.BurstSize) + "x" + FormatG(spec.BurstInterval.Seconds()) + "s"
	}
	return string(spec.Mode)
}

// CaseID returns the workload case id "<label>_in<in>_out<out>" (e.g. c8_in512_out128),
// where in and out are the input-token target and the output cap.
func CaseID(label string, in, out int) string {
	return label + "_in" + strconv.Itoa(in) + "_out" + strconv.Itoa(out)
}

// FormatG formats x as Python's "%g" does (precision 6, trailing zeros removed, exponent
// form "1e+06" when the decimal exponent is < -4 or ≥ 6), which the contract's case ids use.
func FormatG(x float64) string {
	if math.IsInf(x, 1) {
		return "inf"
	}
	if math.IsInf(x, -1) {
		return "-inf"
	}
	if math.IsNaN(x) {
		return "nan"
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}
