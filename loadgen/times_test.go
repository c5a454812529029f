package loadgen

import (
	"math"
	"testing"
	"time"
)

// TestWorkloadTimesMessages: every duration setting is checked as written, in seconds,
// against one rule (artifact.Range), and says which bound it breaks, word for word.
func TestWorkloadTimesMessages(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	burst := func(w *Workload) { a := "burst"; w.Arrival, w.BurstSize = &a, 2 }
	cases := []struct {
		name string
		mod  func(w *Workload)
		want string
	}{
		{"duration over the maximum", func(w *Workload) { w.Duration = f(1e300) }, "--duration must be at most 604800 seconds (7 days), not 1e+300"},
		{"duration infinite", func(w *Workload) { w.Duration = f(math.Inf(1)) }, "--duration must be at most 604800 seconds (7 days), not +Inf"},
		{"duration NaN", func(w *Workload) { w.Duration = f(math.NaN()) }, "--duration must be a number, not NaN"},
		{"duration a nanosecond", func(w *Workload) { w.Duration = f(1e-9) }, "--duration must be at least 0.001 seconds (1 ms), not 1e-09"},
		{"duration zero", func(w *Workload) { w.Duration = f(0) }, "--duration must be at least 0.001 seconds (1 ms), not 0"},
		{"duration negative", func(w *Workload) { w.Duration = f(-2) }, "--duration must be at least 0.001 seconds (1 ms), not -2"},
		{"timeout negative", func(w *Workload) { w.Timeout = f(-1) }, "--timeout must be > 0 seconds, not -1"},
		{"drain timeout zero", func(w *Workload) { w.DrainTimeout = f(0) }, "--drain-timeout must be > 0 seconds, not 0"},
		{"drain timeout huge", func(w *Workload) { w.DrainTimeout = f(1e9) }, "--drain-timeout must be at most 604800 seconds (7 days), not 1000000000"},
		{"cache reset timeout", func(w *Workload) { w.CacheResetTimeout = f(-0.5) }, "--cache-reset-timeout must be at least 0 seconds, not -0.5"},
		{"burst interval negative", func(w *Workload) { burst(w); w.BurstInterval = -1 }, "--burst-interval must be > 0 seconds, not -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := Workload{Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "m"}
			tc.mod(&w)
			_, err := w.Config()
			if err == nil || err.Error() != tc.want || !IsUsage(err) {
				t.Fatalf("error %v, want the usage error %q", err, tc.want)
			}
		})
	}
	w := Workload{Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "m", Duration: f(0.001), Timeout: f(604800)}
	c, err := w.Config()
	if err != nil || c.Duration != time.Millisecond || c.Timeout != 7*24*time.Hour {
		t.Fatalf("the bounds themselves: %+v, %v", c, err)
	}
}
