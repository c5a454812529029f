package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kEvent is a trace event decoded with every number kept as written.
type kEvent struct {
	Ph   string                     `json:"ph"`
	Cat  string                     `json:"cat"`
	Name string                     `json:"name"`
	Pid  json.RawMessage            `json:"pid"`
	Tid  json.RawMessage            `json:"tid"`
	Ts   json.Number                `json:"ts"`
	Dur  json.Number                `json:"dur"`
	ID   json.Number                `json:"id"`
	Bp   string                     `json:"bp"`
	Args map[string]json.RawMessage `json:"args"`
}

// kDoc is a decoded trace.
type kDoc struct {
	SchemaVersion       json.Number `json:"schemaVersion"`
	DeviceProperties    []map[string]any
	DistributedInfo     map[string]any `json:"distributedInfo"`
	DisplayTimeUnit     string         `json:"displayTimeUnit"`
	BaseTimeNanoseconds json.Number    `json:"baseTimeNanoseconds"`
	TraceEvents         []kEvent       `json:"traceEvents"`
	TraceName           string         `json:"traceName"`
	Warning             []string       `json:"WARNING"`
}

var threeDecimals = regexp.MustCompile(`^\d+\.\d{3}$`)

// usNs converts a "µs with three decimals" number to integer ns, failing on any other form.
func usNs(t *testing.T, n json.Number) int64 {
	t.Helper()
	s := string(n)
	if !threeDecimals.MatchString(s) {
		t.Fatalf("time %q is not µs with three decimals", s)
	}
	v, err := strconv.ParseInt(strings.Replace(s, ".", "", 1), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func argInt(t *testing.T, e kEvent, k string) int64 {
	t.Helper()
	raw, ok := e.Args[k]
	if !ok {
		t.Fatalf("%s %q has no args[%q]: %v", e.Cat, e.Name, k, e.Args)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		t.Fatalf("args[%q] of %q is %s, not an integer", k, e.Name, raw)
	}
	return v
}

func rawInt(t *testing.T, raw json.RawMessage) int64 {
	t.Helper()
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		t.Fatalf("%s is not an integer", raw)
	}
	return v
}

func decodeTrace(t *testing.T, b []byte) kDoc {
	t.Helper()
	var d kDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	return d
}

func readTruth(t *testing.T, b []byte) []StepTruth {
	t.Helper()
	var out []StepTruth
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var st StepTruth
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			t.Fatalf("truth line %q: %v", sc.Text(), err)
		}
		out = append(out, st)
	}
	return out
}

// union is the length of the union of intervals [s, e), computed by sweeping sorted starts.
func union(iv [][2]int64) int64 {
	iv = slices.Clone(iv)
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmpInt64(a[0], b[0]) })
	var total, hi int64
	started := false
	var lo int64
	for _, x := range iv {
		if !started || x[0] > hi {
			if started {
				total += hi - lo
			}
			lo, hi, started = x[0], x[1], true
			continue
		}
		hi = max(hi, x[1])
	}
	if started {
		total += hi - lo
	}
	return total
}

func annotationName(s Step) string {
	return fmt.Sprintf("execute_context_%d(%d)_generation_%d(%d)", s.ContextRequests, s.ContextTokens, s.GenerationRequests, s.GenerationTokens)
}

// stepCheck is what the test rebuilds of one step from the events.
type stepCheck struct {
	intervals     [][2]int64
	kernels       int
	memcpy, nccl  int64
	graphLaunches int
	gpuAnn        int
	stream7       [][2]int64
	// per stream: intervals with their launch's start
	perStream map[int64][][3]int64
}

// idleSplit sums, per stream, the gaps between consecutive intervals (sorted by start) as
// host wait (the next one's launch began after the previous ended), kernel wait (under
// 30 µs) or other.
func (c *stepCheck) idleSplit() (host, kernel, other int64) {
	for _, iv := range c.perStream {
		iv = slices.Clone(iv)
		slices.SortFunc(iv, func(a, b [3]int64) int { return cmpInt64(a[0], b[0]) })
		for j := 1; j < len(iv); j++ {
			gap := iv[j][0] - iv[j-1][1]
			switch {
			case gap <= 0:
			case iv[j][2] > iv[j-1][1]:
				host += gap
			case gap < 30_000:
				kernel += gap
			default:
				other += gap
			}
		}
	}
	return host, kernel, other
}

// TestKinetoTraceMatchesSteps writes a synthetic window and checks the document against
// the steps independently: top-level fields, times, annotations, launches, correlations,
// flows, and the ground truth's figures recomputed from the events.
func TestKinetoTraceMatchesSteps(t *testing.T) {
	const base = int64(1_700_000_000_000_000_000)
	steps := slices.Collect(SyntheticSteps(120, base+5_000_000_000, 42))
	var doc, truthBuf bytes.Buffer
	k := KinetoTrace{Rank: 1, WorldSize: 2, BaseNs: base, Seed: 9, Name: "rank1.5.pt.trace.json.gz"}
	if err := k.Write(&doc, StepsOf(steps), &truthBuf); err != nil {
		t.Fatal(err)
	}
	d := decodeTrace(t, doc.Bytes())
	if d.SchemaVersion != "1" || d.DisplayTimeUnit != "ms" || d.BaseTimeNanoseconds.String() != strconv.FormatInt(base, 10) ||
		d.TraceName != k.Name || len(d.DeviceProperties) != 1 || d.Warning != nil {
		t.Fatalf("top level: %v %q %v %q %d", d.SchemaVersion, d.DisplayTimeUnit, d.BaseTimeNanoseconds, d.TraceName, len(d.DeviceProperties))
	}
	if d.DistributedInfo["rank"] != json.Number("1") || d.DistributedInfo["world_size"] != json.Number("2") || d.DistributedInfo["backend"] != "nccl" {
		t.Fatalf("distributedInfo %v", d.DistributedInfo)
	}
	truth := readTruth(t, truthBuf.Bytes())
	if len(truth) != len(steps) {
		t.Fatalf("%d truth lines for %d steps", len(truth), len(steps))
	}
	checks := checkEvents(t, d, steps, base)
	graphs := 0
	for i, st := range steps {
		tr, c := truth[i], checks[i]
		host, kernel, other := c.idleSplit()
		lo, hi := c.intervals[0][0], c.intervals[0][1]
		for _, iv := range c.intervals {
			lo, hi = min(lo, iv[0]), max(hi, iv[1])
		}
		want := StepTruth{Step: i, Rank: 1, StartNs: st.StartNs, EndNs: st.EndNs,
			ContextRequests: st.ContextRequests, ContextTokens: st.ContextTokens,
			GenerationRequests: st.GenerationRequests, GenerationTokens: st.GenerationTokens,
			GPUBusyNs: union(c.intervals), Kernels: c.kernels, MemcpyNs: c.memcpy, NCCLNs: c.nccl, GraphLaunches: c.graphLaunches,
			GPUIdleNs: hi - lo - union(c.intervals), HostWaitNs: host, KernelWaitNs: kernel, OtherIdleNs: other}
		if (tr.GraphLaunches == 1) == (host > 0) || kernel == 0 {
			t.Fatalf("step %d: host wait %d under graph %d, kernel wait %d", i, host, tr.GraphLaunches, kernel)
		}
		if tr != want {
			t.Fatalf("step %d truth\n got %+v\nwant %+v", i, tr, want)
		}
		var sum int64
		for _, iv := range c.intervals {
			sum += iv[1] - iv[0]
		}
		if tr.GPUBusyNs >= sum || c.gpuAnn != 2 || tr.NCCLNs == 0 || tr.MemcpyNs == 0 {
			t.Fatalf("step %d: busy %d, sum %d (streams must overlap), %d GPU annotations", i, tr.GPUBusyNs, sum, c.gpuAnn)
		}
		short, long := gapsOf(c.stream7)
		if !short || !long {
			t.Fatalf("step %d: stream 7 has no gap under 30 µs (%v) or none over (%v)", i, short, long)
		}
		graphs += tr.GraphLaunches
	}
	if graphs == 0 {
		t.Fatal("no CUDA-graph step")
	}
}

// gapsOf reports whether sorted-by-start intervals on one stream have a gap under 30 µs and
// one over it.
func gapsOf(iv [][2]int64) (short, long bool) {
	iv = slices.Clone(iv)
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmpInt64(a[0], b[0]) })
	for j := 1; j < len(iv); j++ {
		g := iv[j][0] - iv[j-1][1]
		short = short || (g > 0 && g < 30_000)
		long = long || g > 30_000
	}
	return short, long
}

// seenEvents is what checkEvents gathered for the GPU checks.
type seenEvents struct {
	launches     map[int64]kEvent // by correlation
	flowS, flowF map[int64]int    // flow starts and ends by id
	gpu          []kEvent         // kernels and memcpys
}

// checkEvents checks every event and rebuilds the per-step figures from them.
func checkEvents(t *testing.T, d kDoc, steps []Step, base int64) []stepCheck {
	t.Helper()
	seen := seenEvents{launches: map[int64]kEvent{}, flowS: map[int64]int{}, flowF: map[int64]int{}}
	launches, flowS, flowF := seen.launches, seen.flowS, seen.flowF
	annotations := 0
	checks := make([]stepCheck, len(steps))
	meta := map[string]int{}
	for _, e := range d.TraceEvents {
		switch {
		case e.Ph == "M":
			meta[e.Name]++
			usNs(t, e.Ts)
		case e.Ph == "s" || e.Ph == "f":
			if e.Cat != "ac2g" || e.Name != "ac2g" || (e.Ph == "f") != (e.Bp == "e") {
				t.Fatalf("flow %+v", e)
			}
			id, _ := e.ID.Int64()
			if e.Ph == "s" {
				flowS[id]++
			} else {
				flowF[id]++
			}
		case e.Cat == "user_annotation":
			i := int(argInt(t, e, "External id")) - 1
			st := steps[i]
			if i != annotations || e.Name != annotationName(st) || base+usNs(t, e.Ts) != st.StartNs || usNs(t, e.Dur) != st.EndNs-st.StartNs {
				t.Fatalf("annotation %d: %+v for %+v", annotations, e, st)
			}
			annotations++
		case e.Cat == "cuda_runtime":
			c := argInt(t, e, "correlation")
			if _, dup := launches[c]; dup {
				t.Fatalf("correlation %d launched twice", c)
			}
			launches[c] = e
			if e.Name == "cudaGraphLaunch" {
				checks[argInt(t, e, "External id")-1].graphLaunches++
			}
		case e.Cat == "kernel" || e.Cat == "gpu_memcpy":
			seen.gpu = append(seen.gpu, e)
		case e.Cat == "gpu_user_annotation":
			i := argInt(t, e, "External id") - 1
			if e.Name != annotationName(steps[i]) {
				t.Fatalf("gpu annotation %q for step %d", e.Name, i)
			}
			checks[i].gpuAnn++
		case e.Ph == "i" && e.Name == "Record Window End":
		default:
			t.Fatalf("unexpected event %+v", e)
		}
	}
	if annotations != len(steps) || meta["process_name"] != 2 || meta["thread_name"] != 3 {
		t.Fatalf("%d annotations, metadata %v", annotations, meta)
	}
	checkGPU(t, &seen, steps, checks, base)
	return checks
}

// checkGPU checks every GPU op against its launch and flows and adds it to its step's
// figures; then that every launch covers one op (a graph launch several).
func checkGPU(t *testing.T, seen *seenEvents, steps []Step, checks []stepCheck, base int64) {
	t.Helper()
	launches, flowS, flowF := seen.launches, seen.flowS, seen.flowF
	perCorr := map[int64]int{}
	for _, e := range seen.gpu {
		c := argInt(t, e, "correlation")
		perCorr[c]++
		l, ok := launches[c]
		if !ok || flowS[c] != 1 || flowF[c] == 0 {
			t.Fatalf("%s %q correlation %d: launch %v, flow starts %d, ends %d", e.Cat, e.Name, c, ok, flowS[c], flowF[c])
		}
		start, end := base+usNs(t, e.Ts), base+usNs(t, e.Ts)+usNs(t, e.Dur)
		if base+usNs(t, l.Ts)+usNs(t, l.Dur) > start {
			t.Fatalf("%q starts before its launch ends", e.Name)
		}
		if argInt(t, e, "stream") != rawInt(t, e.Tid) || argInt(t, e, "device") != rawInt(t, e.Pid) || rawInt(t, e.Pid) != 1 {
			t.Fatalf("%q stream/device args differ from tid/pid: %v", e.Name, e.Args)
		}
		i := argInt(t, l, "External id") - 1
		if argInt(t, e, "External id") != i+1 || start < steps[i].StartNs || end > steps[i].EndNs {
			t.Fatalf("%q outside its step %d", e.Name, i)
		}
		c2 := &checks[i]
		c2.intervals = append(c2.intervals, [2]int64{start, end})
		if c2.perStream == nil {
			c2.perStream = map[int64][][3]int64{}
		}
		c2.perStream[rawInt(t, e.Tid)] = append(c2.perStream[rawInt(t, e.Tid)], [3]int64{start, end, base + usNs(t, l.Ts)})
		if rawInt(t, e.Tid) == 7 {
			c2.stream7 = append(c2.stream7, [2]int64{start, end})
		}
		switch {
		case e.Cat == "gpu_memcpy":
			c2.memcpy += end - start
		case strings.HasPrefix(e.Name, "nccl"):
			c2.nccl += end - start
			c2.kernels++
		default:
			c2.kernels++
		}
	}
	for c, n := range flowF {
		if n != perCorr[c] {
			t.Fatalf("correlation %d: %d flow ends for %d GPU ops", c, n, perCorr[c])
		}
	}
	for c, l := range launches {
		if l.Name == "cudaGraphLaunch" && perCorr[c] < 2 {
			t.Fatalf("graph launch %d covers %d kernels", c, perCorr[c])
		}
		if l.Name != "cudaGraphLaunch" && perCorr[c] != 1 {
			t.Fatalf("%s %d covers %d ops", l.Name, c, perCorr[c])
		}
	}
}

// TestKinetoTraceDeterministic: the same steps and seed give the same bytes; another seed
// another layout; SyntheticSteps yields the same steps on every range and stops on break.
func TestKinetoTraceDeterministic(t *testing.T) {
	write := func(seed int64) []byte {
		var b bytes.Buffer
		if err := WriteKinetoTrace(&b, 0, 1000, slices.Collect(SyntheticSteps(30, 2_000_000_000, 3)), seed); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if !bytes.Equal(write(5), write(5)) || bytes.Equal(write(5), write(6)) {
		t.Fatal("the layout is not a function of the seed")
	}
	seq := SyntheticSteps(50, 0, 8)
	a, b := slices.Collect(seq), slices.Collect(seq)
	if !slices.Equal(a, b) || len(a) != 50 {
		t.Fatal("SyntheticSteps differs between ranges")
	}
	for i, st := range a {
		if st.EndNs <= st.StartNs || (i > 0 && st.StartNs <= a[i-1].EndNs) || st.GenerationTokens != st.GenerationRequests {
			t.Fatalf("step %d %+v", i, st)
		}
	}
	n := 0
	for range seq {
		if n++; n == 3 {
			break
		}
	}
}

// TestKinetoTraceEdgeSteps: zero-length and tiny steps still give a valid document and a
// consistent truth; a step ending before it starts is an error; an empty window is valid;
// dropped steps are a WARNING.
func TestKinetoTraceEdgeSteps(t *testing.T) {
	steps := []Step{{StartNs: 10_000, EndNs: 10_000, GenerationRequests: 1, GenerationTokens: 1}, {StartNs: 20_000, EndNs: 21_000, ContextRequests: 1, ContextTokens: 3}}
	var doc, tb bytes.Buffer
	k := KinetoTrace{BaseNs: 50_000, Dropped: 7} // the base after the first step: clamped to 0
	if err := k.Write(&doc, StepsOf(steps), &tb); err != nil {
		t.Fatal(err)
	}
	d := decodeTrace(t, doc.Bytes())
	tr := readTruth(t, tb.Bytes())
	if len(tr) != 2 || tr[0].GPUBusyNs != 0 || tr[1].GPUBusyNs > 800 || len(d.Warning) != 1 || !strings.Contains(d.Warning[0], "7 steps dropped") {
		t.Fatalf("truth %+v warning %v", tr, d.Warning)
	}
	for _, e := range d.TraceEvents {
		if e.Ts != "" && usNs(t, e.Ts) != 0 {
			t.Fatalf("a time before baseTimeNanoseconds was not clamped to 0: %+v", e)
		}
	}
	if err := k.Write(&doc, StepsOf([]Step{{StartNs: 5, EndNs: 4}}), nil); err == nil {
		t.Fatal("a step ending before its start was written")
	}
	doc.Reset()
	if err := (&KinetoTrace{}).Write(&doc, StepsOf(nil), nil); err != nil {
		t.Fatal(err)
	}
	if d := decodeTrace(t, doc.Bytes()); len(d.TraceEvents) == 0 {
		t.Fatal("an empty window has no metadata")
	}
}

// FuzzKinetoTrace: any steps give a valid JSON document (or the step-order error) and a
// truth whose busy time is the union of the step's GPU events.
func FuzzKinetoTrace(f *testing.F) {
	f.Add(int64(0), int64(10_000_000), 3, 100, 20, int64(1))
	f.Add(int64(-5), int64(0), 0, 0, 0, int64(-1))
	f.Add(int64(1<<40), int64(1), 1<<20, 1<<20, 1<<20, int64(7))
	f.Fuzz(func(t *testing.T, start, dur int64, ctx, tok, gen int, seed int64) {
		if dur < 0 || dur > 1<<40 || start < -(1<<50) || start > 1<<50 {
			return
		}
		steps := []Step{{StartNs: start, EndNs: start + dur, ContextRequests: ctx, ContextTokens: tok, GenerationRequests: gen, GenerationTokens: gen},
			{StartNs: start + dur, EndNs: start + 2*dur, GenerationRequests: 1, GenerationTokens: 1}}
		var doc, tb bytes.Buffer
		k := KinetoTrace{BaseNs: start - 1000, Seed: seed}
		if err := k.Write(&doc, StepsOf(steps), &tb); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(doc.Bytes()) {
			t.Fatalf("invalid JSON for %+v", steps)
		}
		for _, tr := range readTruth(t, tb.Bytes()) {
			if tr.GPUBusyNs < 0 || tr.GPUBusyNs > tr.EndNs-tr.StartNs {
				t.Fatalf("busy %d outside [0, %d]", tr.GPUBusyNs, tr.EndNs-tr.StartNs)
			}
		}
	})
}
