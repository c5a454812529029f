package analyze

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func TestSortGlobalIsAStableSortByIndexThenIntended(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n += 7 {
		list := make([]Request, n)
		for i := range list {
			if rng.IntN(10) > 0 {
				list[i].RequestIndex = artifact.Ptr(int64(rng.IntN(n/2 + 1)))
			}
			list[i].IntendedAtNS = artifact.Ptr(int64(rng.IntN(3)))
			list[i].RequestID = string(rune('a'+i%26)) + strings.Repeat("x", i) // identity
		}
		want := append([]Request(nil), list...)
		// An insertion sort, stable by construction, is the reference.
		for i := 1; i < len(want); i++ {
			for j := i; j > 0 && globalLess(&want[j], &want[j-1]); j-- {
				want[j], want[j-1] = want[j-1], want[j]
			}
		}
		sortGlobal(list)
		for i := range list {
			if list[i].RequestID != want[i].RequestID {
				t.Fatalf("n=%d: position %d holds %q, want %q", n, i, list[i].RequestID, want[i].RequestID)
			}
		}
	}
}

func TestMergeRefusesOneIndexFromTwoShards(t *testing.T) {
	part := func(k int64, idx int64) *Input {
		a := &artifact.Artifact{Path: "s" + string(rune('0'+k)), Sessions: []artifact.Session{{SessionID: "s", Status: artifact.StatusRunning}},
			Workload: &artifact.Workload{WorkloadDigest: "d", Shard: &artifact.ShardInfo{Shard: k, Shards: 2, RunID: "r"}}}
		r := Request{Request: artifact.Request{SessionID: "s", CaseID: "c", Phase: artifact.PhaseMeasured, Status: StatusOK, RequestIndex: &idx, Shard: &k}}
		return &Input{Artifact: a, Cases: map[string][]Request{"c": {r}}, RequestRecords: 1}
	}
	_, err := MergeShards([]*Input{part(0, 4), part(1, 4)})
	if !errors.Is(err, ErrShardSet) || !strings.Contains(err.Error(), "request index 4 of case c recorded by shards 0 and 1") {
		t.Fatalf("%v", err)
	}
	in, err := MergeShards([]*Input{part(1, 3), part(0, 4)})
	if err != nil || len(in.Cases["c"]) != 2 || *in.Cases["c"][0].RequestIndex != 3 || in.Shards[0].Path != "s0" {
		t.Fatalf("merge %v: %+v", err, in)
	}
	// Shards of one run that asked for different models are refused.
	other := part(1, 3)
	other.Artifact.Sessions[0].Config = &artifact.SessionConfig{Model: "other-model"}
	withModel := part(0, 4)
	withModel.Artifact.Sessions[0].Config = &artifact.SessionConfig{Model: "m"}
	if _, err := MergeShards([]*Input{withModel, other}); !errors.Is(err, ErrShardSet) || !strings.Contains(err.Error(), `asked model "other-model", s0 model "m"`) {
		t.Fatalf("two models: %v", err)
	}
	if _, err := MergeShards(nil); !errors.Is(err, ErrShardSet) {
		t.Fatalf("no parts: %v", err)
	}
}

// Each shard's self-audit: its CPU utilisation from its measured window's client health and
// the cases its own requests show client-limited.
func TestShardSelfAudit(t *testing.T) {
	part := func(k int64, cpu float64, held bool) *Input {
		w := artifact.PhaseWindow{SessionID: "s", CaseID: "c", Phase: artifact.PhaseMeasured,
			StartedAtNS: artifact.Ptr(int64(0)), DrainedAtNS: artifact.Ptr(int64(2e9)),
			ClientHealth: &artifact.ClientHealth{CPUUserSeconds: artifact.Ptr(cpu), CPUSystemSeconds: artifact.Ptr(0.0), CPUs: 2}}
		a := &artifact.Artifact{Path: "s" + string(rune('0'+k)), Sessions: []artifact.Session{{SessionID: "s", Status: artifact.StatusCompleted}},
			Workload:     &artifact.Workload{WorkloadDigest: "d", Shard: &artifact.ShardInfo{Shard: k, Shards: 2, RunID: "r"}},
			PhaseWindows: []artifact.PhaseWindow{w}}
		idx := k
		r := Request{Request: artifact.Request{SessionID: "s", CaseID: "c", Phase: artifact.PhaseMeasured, Status: StatusOK, RequestIndex: &idx, Shard: &k}}
		r.HeldForSlot = artifact.Ptr(held)
		return &Input{Artifact: a, Cases: map[string][]Request{"c": {r}}, RequestRecords: 1}
	}
	in, err := MergeShards([]*Input{part(0, 1, false), part(1, 3.8, true)})
	if err != nil {
		t.Fatal(err)
	}
	// CPU: 1 s and 3.8 s over 2 s × 2 CPUs.
	s0, s1 := in.Shards[0], in.Shards[1]
	if !near(s0.CPUUtilization, 0.25) || !near(s1.CPUUtilization, 0.95) || len(s0.ClientLimitedCases) != 0 ||
		len(s1.ClientLimitedCases) != 1 || s1.ClientLimitedCases[0] != "c" {
		t.Fatalf("audits %+v / %+v", s0, s1)
	}
	var b strings.Builder
	renderShards(&b, shardsReport(in))
	if !strings.Contains(b.String(), "shard 1: completed, 1 request (1 measured, 0 failed, 0 dropped), client CPU 95%, client-limited in c\n") {
		t.Fatalf("text:\n%s", b.String())
	}
}

// Shards whose measured windows did not overlap (one ran after another's had ended) are a
// problem; windows that overlap, however unequal their starts, are not.
func TestStartSkewProblems(t *testing.T) {
	audit := func(k int64, start, end int64) ShardAudit {
		return ShardAudit{Shard: k, measured: map[string]*artifact.PhaseWindow{"c": {CaseID: "c", Phase: artifact.PhaseMeasured,
			StartedAtNS: artifact.Ptr(start), WindowEndedAtNS: artifact.Ptr(end)}}}
	}
	// 2 s windows 1.9 s apart still overlap.
	if p := startSkewProblems([]ShardAudit{audit(0, 1e9, 3e9), audit(1, 2.9e9, 4.9e9)}); len(p) != 0 {
		t.Fatalf("overlapping: %v", p)
	}
	p := startSkewProblems([]ShardAudit{audit(0, 5_155e6, 7_155e6), audit(1, 1e9, 3e9), audit(2, 1e9+5e6, 2e9)})
	if len(p) != 1 || !strings.HasPrefix(p[0], "c/measured: shard 0 started its window 3.155 s after shard 2's had ended: ") {
		t.Fatalf("one after another: %v", p)
	}
	// Every shard that started after the first end is named.
	p = startSkewProblems([]ShardAudit{audit(0, 0, 1e9), audit(1, 2e9, 3e9), audit(2, 4e9, 5e9), audit(3, 5e8, 1.5e9)})
	if len(p) != 1 || !strings.HasPrefix(p[0], "c/measured: shard 2 started its window 3.000 s after shard 0's had ended (shard 1 also started after it had ended): ") {
		t.Fatalf("three in turn: %v", p)
	}
	// Coordinated shards (each with a clock alignment) started together: their warm-ups
	// drained apart.
	coord := []ShardAudit{audit(0, 0, 1e9), audit(1, 1.5e9, 2e9)}
	for i := range coord {
		coord[i].ClockOffsetNS = artifact.Ptr(int64(0))
	}
	if p := startSkewProblems(coord); len(p) != 1 || !strings.Contains(p[0], "had ended: the shards started together, but their earlier phases (warm-up) drained further apart than the window lasts, ") ||
		!strings.HasSuffix(p[0], "(lengthen the measured window)") {
		t.Fatalf("coordinated: %v", p)
	}
	// Back to back (the start at the other's end) is one after another; a window with no end
	// but its drain uses the drain; one with neither is left out.
	touching := []ShardAudit{audit(0, 0, 10e6), audit(1, 10e6, 20e6)}
	if p := startSkewProblems(touching); len(p) != 1 || !strings.Contains(p[0], "shard 1 started its window 0.000 s after shard 0's") {
		t.Fatalf("back to back: %v", p)
	}
	drained := []ShardAudit{audit(0, 0, 10e6), audit(1, 5e6, 15e6)}
	drained[0].measured["c"].WindowEndedAtNS, drained[0].measured["c"].DrainedAtNS = nil, artifact.Ptr(int64(4e6))
	if p := startSkewProblems(drained); len(p) != 1 || !strings.Contains(p[0], "shard 1 started its window 0.001 s after shard 0's") {
		t.Fatalf("drain as the end: %v", p)
	}
	drained[0].measured["c"].DrainedAtNS = nil
	if p := startSkewProblems(drained); len(p) != 0 {
		t.Fatalf("a window with no end: %v", p)
	}
}

// A shard with no closing session reads as stopped mid-run, unless only its last line (the
// closing record) was cut and every window it owed is here; counts take their plural.
func TestShardProblems(t *testing.T) {
	cut := ShardAudit{Shard: 1, Path: "s1.jsonl", Status: "not_closed", RequestRecords: 29, MeasuredRequests: 26, MissingWindows: []string{}, Truncated: true}
	p := shardProblems(&cut)
	if len(p) != 1 || p[0] != "shard 1 (s1.jsonl) has no closing infer.session record and its last line was cut short (most likely that record): every phase window it owed is here, so none of its 29 requests is missing, but the merged session reads as not closed" {
		t.Fatalf("cut closing record: %q", p)
	}
	died := cut
	died.RequestRecords, died.MeasuredRequests, died.MissingWindows = 1, 0, []string{"c/measured"}
	p = shardProblems(&died)
	want := []string{
		"shard 1 (s1.jsonl) has no closing infer.session record: it stopped mid-run after recording 1 request (0 measured); its unsent arrivals are missing from the merged run",
		"shard 1 wrote no phase window for c/measured: those cases are phase_window_incomplete",
		"shard 1 (s1.jsonl): its last line was cut short and ignored",
	}
	if !slices.Equal(p, want) {
		t.Fatalf("died mid-run:\n%q\nwant\n%q", p, want)
	}
}

// A shard whose own audit finds its host contended names the case; the merged window's
// client health is the shards' together (CPU and CPUs summed, the worst shard's GC), without
// host figures (shards may share a host).
func TestShardHostContentionAndMergedHealth(t *testing.T) {
	part := func(k int64, busy float64, pause float64) *Input {
		w := artifact.PhaseWindow{SessionID: "s", CaseID: "c", Phase: artifact.PhaseMeasured,
			StartedAtNS: artifact.Ptr(int64(0)), DrainedAtNS: artifact.Ptr(int64(2e9)),
			ClientHealth: &artifact.ClientHealth{CPUUserSeconds: artifact.Ptr(0.2), CPUSystemSeconds: artifact.Ptr(0.1), CPUs: 2,
				GCCycles: k + 1, GCPauseSeconds: pause, HostCPUs: 2, HostCPUBusySeconds: artifact.Ptr(busy)}}
		a := &artifact.Artifact{Path: "s" + string(rune('0'+k)), Sessions: []artifact.Session{{SessionID: "s", Status: artifact.StatusCompleted}},
			Workload:     &artifact.Workload{WorkloadDigest: "d", Shard: &artifact.ShardInfo{Shard: k, Shards: 2, RunID: "r"}},
			PhaseWindows: []artifact.PhaseWindow{w}}
		var reqs []Request
		for i := k; i < 6; i += 2 {
			r := openRequest(StatusOK, float64(10*i), 3) // every arrival 3 ms late
			r.SessionID, r.CaseID, r.Phase, r.RequestIndex, r.Shard = "s", "c", artifact.PhaseMeasured, artifact.Ptr(i), artifact.Ptr(k)
			r.StartedAtNS, r.EndedAtNS = artifact.Ptr(int64(1e6*(10*i+3))), artifact.Ptr(int64(1e6*(10*i+20)))
			reqs = append(reqs, r)
		}
		return &Input{Artifact: a, Cases: map[string][]Request{"c": reqs}, RequestRecords: len(reqs)}
	}
	// Shard 0's host: 3.5 of 4 CPU-s busy, 3.2 of them others'; shard 1's: 0.5.
	in, err := MergeShards([]*Input{part(0, 3.5, 0.004), part(1, 0.5, 0.001)})
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := in.Shards[0], in.Shards[1]
	if !slices.Equal(s0.HostContendedCases, []string{"c"}) || len(s1.HostContendedCases) != 0 ||
		!slices.Equal(s1.ClientLimitedCases, []string{"c"}) {
		t.Fatalf("audits %+v / %+v", s0, s1)
	}
	var b strings.Builder
	renderShards(&b, shardsReport(in))
	if !strings.Contains(b.String(), "shard 0: completed, 3 requests (3 measured, 0 failed, 0 dropped), dispatch lag p50 3.000 ms p99 3.000 ms max 3.000 ms, client CPU 8%, client-limited in c, its host contended in c\n") {
		t.Fatalf("text:\n%s", b.String())
	}
	h := windowOfCase(in, "c").ClientHealth
	if h == nil || *h.CPUUserSeconds != 0.4 || !near(h.CPUSystemSeconds, 0.2) || h.CPUs != 4 || h.GCCycles != 1 || h.GCPauseSeconds != 0.004 ||
		h.HostCPUs != 0 || h.HostCPUBusySeconds != nil {
		t.Fatalf("merged health %+v", h)
	}
}

// windowOfCase is the merged measured window of case c.
func windowOfCase(in *Input, c string) *artifact.PhaseWindow {
	for i := range in.Artifact.PhaseWindows {
		if w := &in.Artifact.PhaseWindows[i]; w.CaseID == c && w.Phase == artifact.PhaseMeasured {
			return w
		}
	}
	return nil
}
