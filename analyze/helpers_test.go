package analyze

import (
	"fmt"
	"math"

	"github.com/inferprobe/inferprobe/artifact"
)

const (
	second = int64(1_000_000_000)
	start  = 100 * second
)

func p64(v int64) *int64    { return &v }
func pf(v float64) *float64 { return &v }
func ps(v string) *string   { return &v }
func eq(a *float64, b float64) bool {
	return a != nil && math.Abs(*a-b) <= 1e-9*math.Max(1, math.Abs(b))
}
func fstr(v *float64) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprint(*v)
}

// req builds the measured request i of case c1 as the upstream population tests do: intended
// and sent at START + i·0.1 s, ended 0.5 s later, one session, unique ids and index i.
func req(i int, status string, mods ...func(*Request)) Request {
	at := start + int64(i)*second/10
	r := Request{Request: artifact.Request{
		SessionID:    "s1",
		RequestID:    fmt.Sprintf("c1_measured_%d", i),
		CaseID:       "c1",
		Phase:        artifact.PhaseMeasured,
		XRequestID:   ps(fmt.Sprintf("stormlog-run-c1_measured_%d", i)),
		RequestIndex: p64(int64(i)),
		Status:       status,
		IntendedAtNS: p64(at),
		StartedAtNS:  p64(at),
		EndedAtNS:    p64(at + second/2),
		ArrivalMode:  ModeFixedRate,
	}}
	for _, m := range mods {
		m(&r)
	}
	return r
}

// okReq is a successful request with a TTFT (nil = not streamed), e2e 500 ms and 10
// server-reported output tokens.
func okReq(i int, ttft *float64, mods ...func(*Request)) Request {
	base := []func(*Request){func(r *Request) {
		r.TTFTMS = ttft
		r.E2ELatencyMS = pf(500)
		r.OutputTokens = p64(10)
		r.OutputTokenSource = "server_usage"
		r.Stream = ttft != nil
	}}
	return req(i, StatusOK, append(base, mods...)...)
}

func reqs(n int, status string, mods ...func(*Request)) []Request {
	out := make([]Request, n)
	for i := range out {
		out[i] = req(i, status, mods...)
	}
	return out
}

// window is the upstream tests' fixed-rate window: start, window end +1 s, drained +2 s,
// 10 scheduled arrivals, endpoint 1 s.
func window(mods ...func(*artifact.PhaseWindow)) *artifact.PhaseWindow {
	w := &artifact.PhaseWindow{
		SessionID:                 "s1",
		CaseID:                    "c1",
		Phase:                     artifact.PhaseMeasured,
		ArrivalMode:               ModeFixedRate,
		StartedAtNS:               p64(start),
		WindowEndedAtNS:           p64(start + second),
		DrainedAtNS:               p64(start + 2*second),
		ScheduledArrivals:         p64(10),
		ScheduledEndpointOffsetNS: p64(second),
		AbandonedRequests:         &artifact.AbandonedRequests{},
	}
	for _, m := range mods {
		m(w)
	}
	return w
}

// oneSecond is a scheduled window of exactly 1 s.
var oneSecond = NewInterval(KindScheduledWindow, 0, second, CohortArrival)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
