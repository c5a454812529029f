package schedule

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }

func durs(msList ...float64) []time.Duration {
	out := make([]time.Duration, len(msList))
	for i, v := range msList {
		out[i] = ms(v)
	}
	return out
}

func dptr(d time.Duration) *time.Duration { return &d }

func TestBuildTable(t *testing.T) {
	trace := durs(0, 100, 250, 900, 1000, 1500)
	tests := []struct {
		name     string
		spec     Spec
		requests int
		duration time.Duration
		want     []time.Duration
		endpoint *time.Duration
	}{
		// Fixed-rate 4/s, count 4 → [0, .25, .5, .75]; duration 1 s gives the same four.
		{"fixed count", Spec{Mode: FixedRate, Rate: 4}, 4, 0, durs(0, 250, 500, 750), dptr(time.Second)},
		{"fixed duration", Spec{Mode: FixedRate, Rate: 4}, 0, time.Second, durs(0, 250, 500, 750), dptr(time.Second)},
		// Contract: two requests at 10/s span 0.2 s (one whole slot after the last arrival).
		{"fixed two at 10/s", Spec{Mode: FixedRate, Rate: 10}, 2, 0, durs(0, 100), dptr(200 * time.Millisecond)},
		{"fixed one request", Spec{Mode: FixedRate, Rate: 2}, 1, 0, durs(0), dptr(500 * time.Millisecond)},
		{"fixed fractional rate", Spec{Mode: FixedRate, Rate: 3}, 3, 0, []time.Duration{0, 333333333, 666666667}, dptr(time.Second)},
		// Both bounds: the count stops first → its slot end; the window stops first → duration.
		{"fixed count before window", Spec{Mode: FixedRate, Rate: 10}, 3, 10 * time.Second, durs(0, 100, 200), dptr(300 * time.Millisecond)},
		{"fixed window before count", Spec{Mode: FixedRate, Rate: 10}, 100, 250 * time.Millisecond, durs(0, 100, 200), dptr(250 * time.Millisecond)},
		// Burst size 3 / interval 2 s, count 7 → [0,0,0,2,2,2,4]; duration 4 s → 6 arrivals.
		{"burst count partial", Spec{Mode: Burst, BurstSize: 3, BurstInterval: 2 * time.Second}, 7, 0, durs(0, 0, 0, 2000, 2000, 2000, 4000), dptr(6 * time.Second)},
		{"burst count whole", Spec{Mode: Burst, BurstSize: 3, BurstInterval: 2 * time.Second}, 6, 0, durs(0, 0, 0, 2000, 2000, 2000), dptr(4 * time.Second)},
		{"burst duration", Spec{Mode: Burst, BurstSize: 3, BurstInterval: 2 * time.Second}, 0, 4 * time.Second, durs(0, 0, 0, 2000, 2000, 2000), dptr(4 * time.Second)},
		{"burst single", Spec{Mode: Burst, BurstSize: 8, BurstInterval: 1500 * time.Millisecond}, 8, 0, durs(0, 0, 0, 0, 0, 0, 0, 0), dptr(1500 * time.Millisecond)},
		// Replay: whole trace unless bounded; count 2 → first two; duration 1 s keeps offsets < 1.
		{"replay whole", Spec{Mode: Replay, Trace: trace}, 0, 0, trace, nil},
		{"replay count", Spec{Mode: Replay, Trace: trace}, 2, 0, durs(0, 100), nil},
		{"replay duration", Spec{Mode: Replay, Trace: trace}, 0, time.Second, durs(0, 100, 250, 900), dptr(time.Second)},
		{"replay count over trace", Spec{Mode: Replay, Trace: trace}, 50, 0, trace, nil},
		{"replay count and duration", Spec{Mode: Replay, Trace: trace}, 2, time.Second, durs(0, 100), dptr(time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Build(tc.spec, tc.requests, tc.duration, 0, "c/measured")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Offsets, tc.want) {
				t.Errorf("offsets = %v, want %v", s.Offsets, tc.want)
			}
			switch {
			case tc.endpoint == nil && s.EndpointOffset != nil:
				t.Errorf("endpoint = %v, want nil", *s.EndpointOffset)
			case tc.endpoint != nil && s.EndpointOffset == nil:
				t.Errorf("endpoint = nil, want %v", *tc.endpoint)
			case tc.endpoint != nil && *s.EndpointOffset != *tc.endpoint:
				t.Errorf("endpoint = %v, want %v", *s.EndpointOffset, *tc.endpoint)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name     string
		spec     Spec
		requests int
		duration time.Duration
		want     string
	}{
		// Invalid specs.
		{"unknown mode", Spec{Mode: "sometimes"}, 1, 0, "arrival mode must be one of"},
		{"empty mode", Spec{}, 1, 0, "arrival mode must be one of"},
		{"poisson without rate", Spec{Mode: Poisson}, 1, 0, "need a finite rate > 0"},
		{"rate zero", Spec{Mode: FixedRate, Rate: 0}, 1, 0, "need a finite rate > 0"},
		{"rate negative", Spec{Mode: FixedRate, Rate: -1}, 1, 0, "need a finite rate > 0"},
		{"rate inf", Spec{Mode: Poisson, Rate: math.Inf(1)}, 1, 0, "need a finite rate > 0"},
		{"rate nan", Spec{Mode: Poisson, Rate: math.NaN()}, 1, 0, "need a finite rate > 0"},
		{"closed with rate", Spec{Mode: Closed, Rate: 2}, 1, 0, "closed arrivals do not take a rate"},
		{"burst with rate", Spec{Mode: Burst, Rate: 2, BurstSize: 1, BurstInterval: time.Second}, 1, 0, "do not take a rate"},
		{"burst without interval", Spec{Mode: Burst, BurstSize: 3}, 1, 0, "burst interval > 0"},
		{"burst size 0", Spec{Mode: Burst, BurstInterval: time.Second}, 1, 0, "burst size ≥ 1"},
		{"fixed with burst size", Spec{Mode: FixedRate, Rate: 1, BurstSize: 2}, 1, 0, "do not take a burst"},
		{"replay without trace", Spec{Mode: Replay}, 1, 0, "need a non-empty arrival trace"},
		{"replay unsorted", Spec{Mode: Replay, Trace: durs(0, 5, 3)}, 0, 0, "not sorted at offset 2"},
		{"replay negative", Spec{Mode: Replay, Trace: durs(-1, 5)}, 0, 0, "offset 0 is negative"},
		{"poisson with trace", Spec{Mode: Poisson, Rate: 1, Trace: durs(0)}, 1, 0, "do not take an arrival trace"},
		// Open loop without count or duration; closed loop has no schedule.
		{"open without bound", Spec{Mode: Poisson, Rate: 1}, 0, 0, "need a request count or a duration"},
		{"closed", Spec{Mode: Closed}, 1, 0, "a closed loop has no arrival schedule"},
		{"negative requests", Spec{Mode: FixedRate, Rate: 1}, -1, 0, "request count must be ≥ 0"},
		{"negative duration", Spec{Mode: FixedRate, Rate: 1}, 0, -time.Second, "duration must be ≥ 0"},
		{"beyond duration range", Spec{Mode: FixedRate, Rate: 1e-10}, 3, 0, "beyond the longest schedule"},
		{"burst beyond range", Spec{Mode: Burst, BurstSize: 1, BurstInterval: time.Duration(math.MaxInt64 / 2)}, 4, 0, "beyond the longest schedule"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.spec, tc.requests, tc.duration, 1, "s")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Rate 1e9 with duration 0.01 s → too many; exactly 1,000,000 by count is allowed.
func TestMaxArrivals(t *testing.T) {
	_, err := Build(Spec{Mode: FixedRate, Rate: 1e9}, 0, 10*time.Millisecond, 0, "s")
	if !errors.Is(err, ErrTooManyArrivals) {
		t.Fatalf("duration-bound schedule over the cap: err = %v", err)
	}
	if !strings.Contains(err.Error(), "more than 1,000,000 requests") {
		t.Errorf("message %q lacks the contract's wording", err)
	}
	_, err = Build(Spec{Mode: Poisson, Rate: 1}, MaxArrivals+1, 0, 0, "s")
	if !errors.Is(err, ErrTooManyArrivals) {
		t.Fatalf("count over the cap: err = %v", err)
	}
	s, err := Build(Spec{Mode: FixedRate, Rate: 1000}, MaxArrivals, 0, 0, "s")
	if err != nil {
		t.Fatalf("exactly MaxArrivals: %v", err)
	}
	if len(s.Offsets) != MaxArrivals || s.Offsets[MaxArrivals-1] != 999999*time.Millisecond {
		t.Fatalf("len %d, last %v", len(s.Offsets), s.Offsets[len(s.Offsets)-1])
	}
	if *s.EndpointOffset != 1000*time.Second {
		t.Errorf("endpoint %v, want 1000s", *s.EndpointOffset)
	}
	// Exactly at the cap by duration: 1,000,000 arrivals at 1e6/s over 1 s.
	s, err = Build(Spec{Mode: FixedRate, Rate: 1e6}, 0, time.Second, 0, "s")
	if err != nil || len(s.Offsets) != MaxArrivals {
		t.Fatalf("1e6/s for 1 s: len %d, err %v", len(s.Offsets), err)
	}
	// A burst schedule that exceeds the cap within its window.
	_, err = Build(Spec{Mode: Burst, BurstSize: 600_000, BurstInterval: time.Second}, 0, 2*time.Second, 0, "s")
	if !errors.Is(err, ErrTooManyArrivals) {
		t.Fatalf("burst over the cap: err = %v", err)
	}
}

// Poisson is seeded: same seed → identical offsets, different seed (or stream) →
// different; first offset 0; sorted; mean gap ≈ 1/rate (±5% at 2000 draws).
func TestPoisson(t *testing.T) {
	spec := Spec{Mode: Poisson, Rate: 8}
	a, err := Build(spec, 2000, 0, 42, "poisson8_in512_out128/measured")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build(spec, 2000, 0, 42, "poisson8_in512_out128/measured")
	c, _ := Build(spec, 2000, 0, 43, "poisson8_in512_out128/measured")
	d, _ := Build(spec, 2000, 0, 42, "poisson8_in512_out128/warmup")
	if !slices.Equal(a.Offsets, b.Offsets) || *a.EndpointOffset != *b.EndpointOffset {
		t.Fatal("same seed and stream gave different schedules")
	}
	if slices.Equal(a.Offsets, c.Offsets) {
		t.Fatal("different seeds gave the same schedule")
	}
	if slices.Equal(a.Offsets, d.Offsets) {
		t.Fatal("different streams gave the same schedule")
	}
	if a.Offsets[0] != 0 {
		t.Fatalf("first offset %v, want 0", a.Offsets[0])
	}
	if !slices.IsSorted(a.Offsets) {
		t.Fatal("offsets not sorted")
	}
	last := a.Offsets[len(a.Offsets)-1]
	mean := last.Seconds() / float64(len(a.Offsets)-1)
	if math.Abs(mean-1.0/8) > 0.05/8 {
		t.Errorf("mean gap %.5f s, want 0.125 ± 5%%", mean)
	}
	// The endpoint is the (N+1)-th cumulative draw: the first offset of a longer schedule
	// from the same seed beyond these N.
	longer, _ := Build(spec, 2001, 0, 42, "poisson8_in512_out128/measured")
	if !slices.Equal(longer.Offsets[:2000], a.Offsets) {
		t.Fatal("a longer schedule is not an extension of the shorter one")
	}
	if *a.EndpointOffset != longer.Offsets[2000] || *a.EndpointOffset <= last {
		t.Errorf("endpoint %v, want the next draw %v (> last %v)", *a.EndpointOffset, longer.Offsets[2000], last)
	}
	// Duration-bound: every arrival inside [0, duration), endpoint = duration, and the
	// arrivals are a prefix of the count-bound sequence.
	w, err := Build(spec, 0, 30*time.Second, 42, "poisson8_in512_out128/measured")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.Offsets); n < 150 || n > 340 || w.Offsets[n-1] >= 30*time.Second {
		t.Fatalf("30 s at 8/s: %d arrivals, last %v", n, w.Offsets[n-1])
	}
	if !slices.Equal(w.Offsets, a.Offsets[:len(w.Offsets)]) || a.Offsets[len(w.Offsets)] < 30*time.Second {
		t.Fatal("duration-bound schedule is not the prefix of the sequence below the window")
	}
	if *w.EndpointOffset != 30*time.Second {
		t.Errorf("endpoint %v, want 30s", *w.EndpointOffset)
	}
}

// The Poisson sequence for a seed is part of a workload's identity (same seed → same
// schedule across inferprobe builds): pin the first offsets so a change in the generator
// (math/rand/v2's PCG and ExpFloat64) is noticed.
func TestPoissonGolden(t *testing.T) {
	s, err := Build(Spec{Mode: Poisson, Rate: 2}, 5, 0, 7, "poisson2_in512_out128/measured")
	if err != nil {
		t.Fatal(err)
	}
	want := goldenPoisson
	if !slices.Equal(s.Offsets, want) {
		t.Fatalf("offsets = %#v, want %#v", s.Offsets, want)
	}
}

func TestModeOpenLoop(t *testing.T) {
	for m, want := range map[Mode]bool{Closed: false, FixedRate: true, Poisson: true, Burst: true, Replay: true, "x": false} {
		if m.OpenLoop() != want {
			t.Errorf("%q.OpenLoop() = %v", m, !want)
		}
	}
}

// Case labels: c<concurrency> ("closed" without one), fixed<rate>, poisson<rate> and
// burst<size>x<interval>s with Python's %g, and replay.
func TestCaseLabel(t *testing.T) {
	tests := []struct {
		spec Spec
		conc int
		want string
	}{
		{Spec{Mode: Closed}, 8, "c8"},
		{Spec{Mode: Closed}, 0, "closed"},
		{Spec{Mode: FixedRate, Rate: 2}, 0, "fixed2"},
		{Spec{Mode: FixedRate, Rate: 2.0}, 0, "fixed2"},
		{Spec{Mode: Poisson, Rate: 0.5}, 0, "poisson0.5"},
		{Spec{Mode: Burst, BurstSize: 8, BurstInterval: 1500 * time.Millisecond}, 0, "burst8x1.5s"},
		{Spec{Mode: Burst, BurstSize: 8, BurstInterval: time.Second}, 0, "burst8x1s"},
		{Spec{Mode: Burst, BurstSize: 2, BurstInterval: 100 * time.Millisecond}, 0, "burst2x0.1s"},
		{Spec{Mode: Replay, Trace: durs(0)}, 0, "replay"},
		// Python's %g (values checked against CPython's '%g' % x).
		{Spec{Mode: FixedRate, Rate: 100000}, 0, "fixed100000"},
		{Spec{Mode: FixedRate, Rate: 1e6}, 0, "fixed1e+06"},
		{Spec{Mode: FixedRate, Rate: 1234567}, 0, "fixed1.23457e+06"},
		{Spec{Mode: Poisson, Rate: 0.0001}, 0, "poisson0.0001"},
		{Spec{Mode: Poisson, Rate: 0.00001}, 0, "poisson1e-05"},
		{Spec{Mode: Poisson, Rate: 0.1234567}, 0, "poisson0.123457"},
		{Spec{Mode: Poisson, Rate: 3.14159265}, 0, "poisson3.14159"},
		{Spec{Mode: Poisson, Rate: 250.0}, 0, "poisson250"},
		{Spec{Mode: Poisson, Rate: 99999.95}, 0, "poisson99999.9"},
		{Spec{Mode: Poisson, Rate: 999999.5}, 0, "poisson1e+06"},
	}
	for _, tc := range tests {
		if got := CaseLabel(tc.spec, tc.conc); got != tc.want {
			t.Errorf("CaseLabel(%+v, %d) = %q, want %q", tc.spec, tc.conc, got, tc.want)
		}
	}
	if got := CaseID("c8", 512, 128); got != "c8_in512_out128" {
		t.Errorf("CaseID = %q", got)
	}
	if got := CaseID(CaseLabel(Spec{Mode: Poisson, Rate: 0.5}, 0), 1024, 64); got != "poisson0.5_in1024_out64" {
		t.Errorf("CaseID = %q", got)
	}
	// --rate 2,2.0 yields one case id (the caller's usage error).
	if CaseLabel(Spec{Mode: FixedRate, Rate: 2}, 0) != CaseLabel(Spec{Mode: FixedRate, Rate: 2.0000001}, 0) {
		t.Error("rates equal to 6 significant digits should share a label")
	}
	for x, want := range map[float64]string{math.Inf(1): "inf", math.Inf(-1): "-inf", math.NaN(): "nan"} {
		if got := FormatG(x); got != want {
			t.Errorf("FormatG(%v) = %q, want %q", x, got, want)
		}
	}
}

// FuzzBuild checks that Build never panics and that every schedule it returns keeps the
// contract's invariants, whatever the numbers.
func FuzzBuild(f *testing.F) {
	f.Add(uint8(1), 4.0, 0, int64(0), 4, int64(0), int64(0), "s")
	f.Add(uint8(2), 0.5, 0, int64(0), 0, int64(time.Second), int64(1), "case/measured")
	f.Add(uint8(3), 0.0, 3, int64(2*time.Second), 7, int64(0), int64(0), "")
	f.Add(uint8(4), 0.0, 0, int64(0), 2, int64(time.Second), int64(0), "")
	f.Fuzz(func(t *testing.T, mode uint8, rate float64, size int, interval int64, requests int, duration int64, seed int64, stream string) {
		modes := []Mode{Closed, FixedRate, Poisson, Burst, Replay}
		spec := Spec{Mode: modes[int(mode)%len(modes)], Rate: rate, BurstSize: size, BurstInterval: time.Duration(interval)}
		if spec.Mode == Replay {
			spec = Spec{Mode: Replay, Trace: durs(0, 1, 1, 7, 1000)}
		}
		if requests > 20000 || requests < -1 {
			requests %= 20000
		}
		if spec.Mode == FixedRate || spec.Mode == Poisson {
			if rate > 1e5 {
				return // keeps the fuzzer's schedules small; the cap is tested elsewhere
			}
		}
		if spec.Mode == Burst && size > 1000 {
			return
		}
		if d := time.Duration(duration); d > 0 && interval > 0 && d/time.Duration(max(interval, 1)) > 1000 {
			return
		}
		s, err := Build(spec, requests, time.Duration(duration), seed, stream)
		if err != nil {
			return
		}
		if len(s.Offsets) > MaxArrivals || (requests > 0 && len(s.Offsets) > requests) {
			t.Fatalf("%d offsets for %d requests", len(s.Offsets), requests)
		}
		if !slices.IsSorted(s.Offsets) || (len(s.Offsets) > 0 && s.Offsets[0] < 0) {
			t.Fatalf("offsets not sorted or negative: %v", s.Offsets[:min(len(s.Offsets), 10)])
		}
		if duration > 0 {
			for _, o := range s.Offsets {
				if o >= time.Duration(duration) {
					t.Fatalf("offset %v outside window %v", o, time.Duration(duration))
				}
			}
		}
		if s.EndpointOffset != nil && len(s.Offsets) > 0 && *s.EndpointOffset < s.Offsets[len(s.Offsets)-1] {
			t.Fatalf("endpoint %v before last arrival %v", *s.EndpointOffset, s.Offsets[len(s.Offsets)-1])
		}
	})
}

// goldenPoisson is Build(Spec{Poisson, Rate 2}, 5, 0, seed 7, "poisson2_in512_out128/measured").
var goldenPoisson = []time.Duration{0, 904499300, 1988457203, 2009637531, 2302206858}
