package capacity

import (
	"math"
	"testing"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
)

// caseOf is a case report over requests with e2e 1, 2, …, ok ms, then failed ones.
func caseOf(t *testing.T, ok, failed int, policy *analyze.Policy, rule analyze.Rule) *analyze.CaseReport {
	t.Helper()
	var reqs []analyze.Request
	for i := 1; i <= ok; i++ {
		reqs = append(reqs, analyze.Request{Request: artifact.Request{Status: artifact.RequestOK, Phase: artifact.PhaseMeasured, E2ELatencyMS: artifact.Ptr(float64(i))}})
	}
	for range failed {
		reqs = append(reqs, analyze.Request{Request: artifact.Request{Status: artifact.RequestError, Phase: artifact.PhaseMeasured}})
	}
	c := &analyze.CaseReport{Latency: analyze.LatencyOf(reqs, rule, false)}
	if policy != nil {
		c.SLO = analyze.Evaluate(policy, analyze.SourceFlags, reqs, nil, nil)
	}
	return c
}

func rule(conf float64) analyze.Rule {
	return analyze.Rule{Confidence: conf, Margin: 0, Tails: analyze.TailsSymmetric}
}

func quantileTest(maxMs float64) []Test {
	return []Test{{Kind: artifact.TestQuantile, Key: artifact.MetricE2E, Level: 0.95, MaxMs: maxMs}}
}

func TestJudgeQuantile(t *testing.T) {
	r := rule(0.95)
	c := caseOf(t, 200, 0, nil, r)
	// The symmetric 95 % interval of the p95 of 200 values 1..200 is [X(184), X(197)].
	for _, tc := range []struct {
		maxMs float64
		want  string
	}{{197, artifact.DecisionPass}, {196.9, artifact.DecisionExtend}, {184, artifact.DecisionExtend}, {183.9, artifact.DecisionFail}} {
		got, tests := Judge(c, quantileTest(tc.maxMs), r)
		if got != tc.want || *tests[0].Lower != 184 || *tests[0].Upper != 197 {
			t.Errorf("max %g: %s with bounds [%v, %v], want %s with [184, 197]", tc.maxMs, got, *tests[0].Lower, *tests[0].Upper, tc.want)
		}
	}
}

// The confidence is the interval's: a threshold inside the 99.9 % interval but above the
// 80 % one passes at 0.8 and is extended at 0.999.
func TestJudgeConfidenceChangesTheInterval(t *testing.T) {
	lowConf, hiConf := rule(0.8), rule(0.999)
	d80, t80 := Judge(caseOf(t, 200, 0, nil, lowConf), quantileTest(195), lowConf)
	d999, t999 := Judge(caseOf(t, 200, 0, nil, hiConf), quantileTest(195), hiConf)
	if d80 != artifact.DecisionPass || d999 != artifact.DecisionExtend || !(*t999[0].Upper > *t80[0].Upper) {
		t.Fatalf("0.8: %s %v; 0.999: %s %v", d80, *t80[0].Upper, d999, *t999[0].Upper)
	}
}

func TestJudgeFailuresAreNotGood(t *testing.T) {
	r := rule(0.95)
	// 180 fast successes and 20 failures: the penalised p95 lies among the failures.
	got, tests := Judge(caseOf(t, 180, 20, nil, r), quantileTest(1000), r)
	if got != artifact.DecisionFail {
		t.Fatalf("%s %+v, want fail: 10 %% of requests failed", got, tests[0])
	}
	// Too few requests for the interval: extended, with the reason.
	got, tests = Judge(caseOf(t, 10, 0, nil, r), quantileTest(1000), r)
	if got != artifact.DecisionExtend || tests[0].Reason == "" {
		t.Fatalf("%s %+v, want extend with a reason", got, tests[0])
	}
}

func TestJudgeAttainment(t *testing.T) {
	policy, err := analyze.ParsePolicy([]byte(`{"format":"stormlog.infer.slo","version":1,"name":"t","criteria":[{"metric":"e2e","boundary":"client","max_ms":190}],"attainment_target":0.9}`))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := TestsOf(policy, 0.5)
	if err != nil || len(tests) != 2 || tests[1].Name() != "attainment" || tests[0].Name() != "client.e2e p50" {
		t.Fatalf("tests %+v, %v", tests, err)
	}
	r := rule(0.95)
	// 190 of 200 met: 0.95, Clopper-Pearson 95 % [0.9101, 0.9757] ≥ 0.9: pass.
	_, st := Judge(caseOf(t, 200, 0, policy, r), tests[1:], r)
	if st[0].Decision != artifact.DecisionPass || math.Abs(*st[0].Lower-0.9101) > 1e-3 {
		t.Fatalf("%+v, want pass with lower 0.9101", st[0])
	}
	// 190 met of 220 offered (30 failed): 0.864, upper bound 0.906 ≥ 0.9: extend.
	_, st = Judge(caseOf(t, 200, 20, policy, r), tests[1:], r)
	if st[0].Decision != artifact.DecisionExtend {
		t.Fatalf("%+v, want extend", st[0])
	}
}

func TestClopperPearson(t *testing.T) {
	for _, tc := range []struct {
		x, n       int
		alpha      float64
		lower, upp float64
	}{
		{5, 10, 0.025, 0.18709, 0.81291},
		{0, 10, 0.025, 0, 1 - math.Pow(0.025, 0.1)},
		{10, 10, 0.025, math.Pow(0.025, 0.1), 1},
		{95, 100, 0.025, 0.88716, 0.98357},
	} {
		lo, hi := ClopperPearson(tc.x, tc.n, tc.alpha)
		if math.Abs(lo-tc.lower) > 1e-4 || math.Abs(hi-tc.upp) > 1e-4 {
			t.Errorf("%d/%d: [%.5f, %.5f], want [%.5f, %.5f]", tc.x, tc.n, lo, hi, tc.lower, tc.upp)
		}
	}
	if lo, hi := ClopperPearson(3, 2, 0.05); lo != 0 || hi != 1 {
		t.Errorf("x > n: [%g, %g], want [0, 1]", lo, hi)
	}
}

func TestTestsOfErrors(t *testing.T) {
	if _, err := TestsOf(nil, 0.95); err == nil {
		t.Error("nil policy: want an error")
	}
	p, _ := analyze.ParseSLOFlags([]string{"e2e:100"})
	if _, err := TestsOf(p, 0.97); err == nil {
		t.Error("level 0.97: want an error")
	}
	q, _ := analyze.ParseSLOFlags([]string{"server.itl:100"})
	if _, err := TestsOf(q, 0.95); err == nil {
		t.Error("server.itl: want an error")
	}
}
