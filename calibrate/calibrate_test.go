package calibrate

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"
)

// fakeSteps is a host that is clean below limit (requests/s).
func fakeSteps(limit float64, tried *[]float64) stepFunc {
	return func(_ context.Context, rate float64) (Step, error) {
		*tried = append(*tried, rate)
		return Step{RatePerSecond: rate, Clean: rate < limit, PeakInFlight: ptr(int64(rate / 10))}, nil
	}
}

func ptr[T any](v T) *T { return &v }

func TestLadderDoublesThenBisects(t *testing.T) {
	var tried []float64
	var seen int
	o := Options{StartRate: 250, MaxRate: 16000, Refine: 3, Progress: func(Step) { seen++ }}
	res := &Result{}
	if err := ladder(context.Background(), o, res, fakeSteps(1300, &tried)); err != nil {
		t.Fatal(err)
	}
	// 250 500 1000 clean, 2000 limited; then (1000+2000)/2 = 1500 limited,
	// 1250 clean, round(1375) = 1375 limited.
	want := []float64{250, 500, 1000, 2000, 1500, 1250, 1375}
	if !reflect.DeepEqual(tried, want) || len(res.Steps) != len(want) || seen != len(want) {
		t.Fatalf("tried %v, steps %d, progress %d", tried, len(res.Steps), seen)
	}
	if *res.CleanRate != 1250 || *res.LimitedRate != 1375 || *res.CleanInFlight != 125 {
		t.Fatalf("clean %v limited %v in flight %v", *res.CleanRate, *res.LimitedRate, *res.CleanInFlight)
	}
}

func TestLadderEnds(t *testing.T) {
	cases := []struct {
		name           string
		o              Options
		limit          float64
		want           []float64
		clean, limited *float64
	}{
		{"every rate clean, capped at max", Options{StartRate: 300, MaxRate: 1000, Refine: 3}, 1e9, []float64{300, 600, 1000}, ptr(1000.0), nil},
		{"start limited", Options{StartRate: 300, MaxRate: 1000, Refine: 3}, 100, []float64{300}, nil, ptr(300.0)},
		{"no refinement", Options{StartRate: 100, MaxRate: 1000, Refine: -1}, 250, []float64{100, 200, 400}, ptr(200.0), ptr(400.0)},
		{"bisection stops at whole rates", Options{StartRate: 1, MaxRate: 8, Refine: 5}, 2.5, []float64{1, 2, 4, 3}, ptr(2.0), ptr(3.0)},
	}
	for _, c := range cases {
		var tried []float64
		res := &Result{}
		if err := ladder(context.Background(), c.o, res, fakeSteps(c.limit, &tried)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tried, c.want) || !reflect.DeepEqual(res.CleanRate, c.clean) || !reflect.DeepEqual(res.LimitedRate, c.limited) {
			t.Errorf("%s: tried %v clean %v limited %v", c.name, tried, res.CleanRate, res.LimitedRate)
		}
	}
}

func TestLadderStepError(t *testing.T) {
	boom := errors.New("boom")
	res := &Result{}
	n := 0
	err := ladder(context.Background(), Options{StartRate: 1, MaxRate: 8}, res, func(_ context.Context, r float64) (Step, error) {
		if n++; n == 2 {
			return Step{}, boom
		}
		return Step{RatePerSecond: r, Clean: true}, nil
	})
	if !errors.Is(err, boom) || len(res.Steps) != 1 {
		t.Fatalf("err %v, steps %d", err, len(res.Steps))
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{StartRate: -1}, {StartRate: 10, MaxRate: 5}, {Step: time.Millisecond}, {Gap: time.Microsecond}, {MaxInFlight: -1, InputTokens: 1},
		{StartRate: 99, Step: 100 * time.Millisecond}, {OutputTokens: 1501, Gap: 10 * time.Millisecond}, {OutputTokens: 1 << 62, Gap: time.Hour}, {MaxInFlight: 50001},
	} {
		if err := o.Validate(); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", o, err)
		}
	}
	// At the bounds: 10 arrivals a step, a stream of half the timeout.
	for _, o := range []Options{{StartRate: 100, Step: 100 * time.Millisecond}, {OutputTokens: 1500, Gap: 10 * time.Millisecond}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
	}
}

// One real step against the embedded engine: its artifact, audit and health are recorded,
// whatever this host's load makes of the verdict.
func TestRunOneStep(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Options{Dir: dir, StartRate: 50, MaxRate: 50, Step: 300 * time.Millisecond, Refine: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || res.CPUs < 1 {
		t.Fatalf("result %+v", res)
	}
	s := res.Steps[0]
	if s.RatePerSecond != 50 || s.Audit.ScheduledRatePerSecond == nil || s.Audit.CPUUtilization == nil || s.PeakInFlight == nil {
		t.Fatalf("step %+v", s)
	}
	if (res.CleanRate != nil) == (res.LimitedRate != nil) || (res.CleanRate != nil) != s.Clean {
		t.Fatalf("clean %v limited %v for a step clean=%v", res.CleanRate, res.LimitedRate, s.Clean)
	}
	if _, err := os.Stat(s.Artifact); err != nil {
		t.Fatal(err)
	}
}
