package artifact

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const (
	testSession = "9b2f0c1e-3a4d-4e8f-9a1b-2c3d4e5f6a7b"
	startNS     = int64(1_767_225_600_123_456_789) // 2026-01-01, beyond float64's exact range
)

func sampleRequest() Request {
	return Request{
		SessionID:           testSession,
		RequestID:           "c8_in512_out128_measured_0_3",
		CaseID:              "c8_in512_out128",
		Phase:               PhaseMeasured,
		TimestampNS:         Ptr(startNS + 1),
		StartedAtNS:         Ptr(startNS + 1),
		EndedAtNS:           Ptr(startNS + 812_345_679),
		Endpoint:            "http://127.0.0.1:8000/v1/chat/completions",
		Model:               "Qwen/Qwen2.5-0.5B-Instruct",
		Concurrency:         Ptr(int64(8)),
		TargetInputTokens:   512,
		TargetOutputTokens:  128,
		Stream:              true,
		Status:              RequestOK,
		E2ELatencyMS:        Ptr(812.345678),
		TTFTMS:              Ptr(41.25),
		FirstChunkLatencyMS: Ptr(40.5),
		ChunkInterarrivalMS: []float64{6.1, 5.9, 0.004, 12},
		PromptTokens:        Ptr(int64(512)),
		PromptTokenSource:   "server_usage",
		PromptTokenExact:    true,
		OutputTokens:        Ptr(int64(128)),
		OutputTokenSource:   "server_usage",
		OutputTokenExact:    true,
		TotalTokens:         Ptr(int64(640)),
		FinishReason:        Ptr("length"),
		ArrivalMode:         ArrivalClosed,
		RequestIndex:        Ptr(int64(3)),
		IntendedAtNS:        Ptr(startNS),
		DispatchLagMS:       Ptr(0.000001),
		HeldForSlot:         Ptr(false),
		InFlightAtDispatch:  Ptr(int64(7)),
		PromptMode:          "unique",
		PromptID:            Ptr("r-1a2b3c4d5e6f"),
		SharedPrefixTokens:  Ptr(int64(0)),
		PromptDigest:        Ptr("0123456789abcdef"),
		XRequestID:          Ptr("inferprobe-run-1-c8_in512_out128_measured_0_3"),
		TraceID:             Ptr("4bf92f3577b34da6a3ce929d0e0e4736"),
		FirstAnswerMS:       Ptr(95.5),
	}
}

func sampleWorkload() Workload {
	w := Workload{
		SessionID: testSession,
		Seed:      42,
		Generator: Generator{Name: "inferprobe.synthetic", Version: 1},
		Cases: []WorkloadCase{
			{CaseID: "c8_in512_out128", InputTokens: 512, OutputTokens: 128, Concurrency: Ptr(int64(8)), Arrival: ArrivalSpec{Mode: ArrivalClosed}},
			{CaseID: "poisson2_in512_out128", InputTokens: 512, OutputTokens: 128, MaxInFlight: Ptr(int64(128)),
				Arrival: ArrivalSpec{Mode: "poisson", RatePerSecond: Ptr(2.0)}},
		},
		Measurement: Measurement{RequestCount: Ptr(int64(200)), MaxInFlight: Ptr(int64(128)), Overflow: Ptr("wait"), DrainTimeoutSeconds: 60, TimeoutSeconds: 60},
		Prompts:     PromptSpec{Mode: "shared-prefix", SharedPrefixRatio: Ptr(0.75), PrefixGroups: Ptr(int64(4))},
		Warmup:      Warmup{Requests: 4, Prompts: "separate"},
		Decoding: Decoding{Stream: true, StreamIncludeUsage: true, MaxTokensField: "max_tokens",
			ExtraBody: json.RawMessage(`{"temperature":0,"ignore_eos":true}`), OtherSettings: "server defaults"},
		Tokenizer:    Tokenizer{Source: "tiktoken", Exact: false, Name: Ptr("o200k_base")},
		Cache:        WorkloadCache{Requested: "cold", ResetURL: Ptr(RedactURL("http://u:p@127.0.0.1:8000/reset_prefix_cache?token=x"))},
		ChatTemplate: ChatTemplate{AppliedBy: "server"},
	}
	d, err := w.TrafficDigest()
	if err != nil {
		panic(err)
	}
	w.WorkloadDigest = d
	return w
}

// sampleRecords is one of every typed record, in artifact order.
func sampleRecords() []Record {
	host := Host{Name: "gpu-01", BootID: Ptr("4f1c9e1a-77a0-4f3d-9a5e-0b7d2a1c3e55")}
	w := sampleWorkload()
	slo := json.RawMessage(pySLOCanonical)
	d, err := Digest(slo)
	if err != nil {
		panic(err)
	}
	return []Record{
		&Session{SessionID: testSession, TimestampNS: startNS, Status: StatusRunning, Config: &SessionConfig{
			Endpoint: "http://127.0.0.1:8000/v1/chat/completions", Model: "m", Concurrency: []int64{8}, InputTokens: []int64{512},
			OutputTokens: []int64{128}, RequestCount: Ptr(int64(200)), Stream: true, StreamIncludeUsage: true, Tokenizer: "auto",
			SystemSampler: "none", Arrivals: []ArrivalSpec{{Mode: ArrivalClosed}, {Mode: "burst", BurstSize: Ptr(int64(8)), BurstIntervalSeconds: Ptr(1.5)}},
			MaxInFlight: Ptr(int64(128)), Overflow: Ptr("wait"), Prompts: PromptSpec{Mode: "repeat"}, CacheState: "unspecified", CacheResetTimeoutSeconds: 10,
			ServerMetrics:      &MetricsConfig{URL: "http://127.0.0.1:8000/metrics", IntervalSeconds: 1, TimeoutSeconds: 60, Authorization: Ptr("bearer")},
			ServerSpans:        json.RawMessage(`null`),
			EnvironmentProxies: EnvironmentProxies{Policy: "ignored", Schemes: []string{"https"}},
		}},
		Ptr(NewArtifactHeader("run-1", testSession, "v0.1.0", startNS, host, 4242)),
		&w,
		&SLORecord{SessionID: testSession, Source: "flags", Digest: d, SLO: slo},
		&CacheState{SessionID: testSession, CaseID: "c8_in512_out128", Requested: "cold", Reset: &CacheReset{
			URL: "http://127.0.0.1:8000/reset_prefix_cache", AtNS: Ptr(startNS + 5), AnsweredAtNS: Ptr(startNS + 900_000_005),
			Status: Ptr(int64(200)), Success: json.RawMessage(`true`), Answer: "acknowledged", Attempts: 2},
			Attempted: true, Acknowledged: true, Verified: "unverified", Reason: "the server acknowledged the reset, but it cannot be confirmed", RunKind: "cold_start"},
		&PhaseWindow{SessionID: testSession, CaseID: "c8_in512_out128", Phase: PhaseMeasured, ArrivalMode: ArrivalClosed,
			StartedAtNS: Ptr(startNS), WindowEndedAtNS: Ptr(startNS + 10_000_000_000), DrainedAtNS: Ptr(startNS + 10_500_000_000),
			DrainTimeoutSeconds: Ptr(60.0), PromptsDigest: Ptr("fedcba9876543210"),
			AbandonedRequests: &AbandonedRequests{RunningAtStart: 1, WaitedSeconds: 0.31, StillRunning: 0}},
		Ptr(sampleRequest()),
		&Capabilities{Context: NewArtifactHeader("run-1", testSession, "v0.1.0", startNS, host, 4242).Context, EventID: "capabilities:vllm.metrics",
			Metadata: map[string]any{"failed_scrapes": 0.0, "per_request_attribution": "none"}, Component: "vllm.metrics", Available: true,
			Supported: []string{"counters", "histograms"}, Enabled: []string{"counters"}, Collected: []string{"counters"}},
		&ClockAlignment{Context: NewArtifactHeader("run-1", testSession, "", startNS, host, 4242).Context, EventID: "cli:clock-offset",
			Metadata: map[string]any{}, FromClockDomain: "srv/unix_epoch_ns#server", ToClockDomain: host.ClockDomain(),
			OffsetNS: -1_500_000, UncertaintyNS: 5, ValidFromNS: Ptr(startNS)},
		&Session{SessionID: testSession, TimestampNS: startNS + 11_000_000_000, Status: StatusCompleted, Summary: &SessionSummary{
			SessionID: testSession, Source: ProducerProfile, Host: "gpu-01", PID: 4242, StartedAtNS: startNS, EndedAtNS: startNS + 11_000_000_000,
			DurationSeconds: 11, Status: StatusCompleted, RequestsRecorded: 1}},
	}
}

func TestEveryRecordWritesItsKindFirst(t *testing.T) {
	for _, rec := range sampleRecords() {
		line, err := MarshalLine(rec)
		if err != nil {
			t.Fatalf("%T: %v", rec, err)
		}
		k := rec.RecordKind()
		prefix := `{"event_type":"` + k.EventType + `","schema_version":` + map[int64]string{1: "1", 2: "2"}[k.SchemaVersion] + `,`
		if !strings.HasPrefix(string(line), prefix) {
			t.Errorf("%T line starts %.60s, want %s", rec, line, prefix)
		}
		if strings.Contains(string(line), "\n") {
			t.Errorf("%T line contains a newline", rec)
		}
	}
}

func TestRoundTripEveryRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleRecords()
	for _, rec := range want {
		if err := w.Write(rec); err != nil {
			t.Fatalf("Write(%T): %v", rec, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []Record
	st, err := Read(mustOpen(t, path), func(r Line) error {
		got = append(got, r.Value)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != len(want) || st.Truncated != nil || st.MissingFinalNewline {
		t.Fatalf("stats %+v", st)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			gj, _ := json.Marshal(got[i])
			wj, _ := json.Marshal(want[i])
			t.Errorf("record %d (%T) differs\n got %s\nwant %s", i, want[i], gj, wj)
		}
	}
	a, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(a.Sessions) != 2 || a.Header == nil || a.Workload == nil || len(a.SLOs) != 1 || len(a.CacheStates) != 1 ||
		len(a.PhaseWindows) != 1 || len(a.Requests) != 1 || len(a.Capabilities) != 1 || len(a.ClockAlignments) != 1 || len(a.Others) != 0 {
		t.Fatalf("ReadFile sorted records wrongly: %+v", a.Stats)
	}
	if fs := a.FinalSession(); fs == nil || fs.Status != StatusCompleted || fs.Summary.RequestsRecorded != 1 {
		t.Fatalf("FinalSession = %+v", fs)
	}
	if a.Header.Context.ClockDomain != "gpu-01/4f1c9e1a-77a0-4f3d-9a5e-0b7d2a1c3e55/unix_epoch_ns" {
		t.Fatalf("clock domain %q", a.Header.Context.ClockDomain)
	}
	if !reflect.DeepEqual(a.Requests[0], sampleRequest()) {
		t.Fatalf("request differs: %+v", a.Requests[0])
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestRequestNullIsNotZero(t *testing.T) {
	// A dropped request: never sent, so no latency, tokens from the plan.
	dropped := Request{SessionID: testSession, RequestID: "poisson2_measured_0_9", CaseID: "poisson2", Phase: PhaseMeasured,
		TimestampNS: Ptr(startNS), StartedAtNS: Ptr(startNS), EndedAtNS: Ptr(startNS), Status: RequestDropped,
		ErrorMessage: Ptr("in-flight limit of 1 reached"), PromptTokens: Ptr(int64(512)), PromptTokenSource: "tiktoken",
		ArrivalMode: "poisson", RequestIndex: Ptr(int64(9)), IntendedAtNS: Ptr(startNS - 3), MaxInFlight: Ptr(int64(1))}
	line, err := MarshalLine(dropped)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"e2e_latency_ms":null`, `"ttft_ms":null`, `"first_chunk_latency_ms":null`, `"http_status":null`,
		`"output_tokens":null`, `"total_tokens":null`, `"concurrency":null`, `"x_request_id":null`, `"trace_id":null`,
		`"first_answer_ms":null`, `"server_error_type":null`, `"server_error_code":null`, `"dispatch_lag_ms":null`, `"held_for_slot":null`, `"chunk_interarrival_ms":[]`,
		`"started_at_ns":1767225600123456789`, `"intended_at_ns":1767225600123456786`, `"max_in_flight":1`} {
		if !strings.Contains(string(line), want) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}
	// A zero is a zero: a 0 ms lag and a 0-token answer survive as values.
	zero := dropped
	zero.DispatchLagMS = Ptr(0.0)
	zero.OutputTokens = Ptr(int64(0))
	var got []*Request
	_, err = Read(strings.NewReader(string(line)+"\n"+string(mustLine(t, zero))+"\n"), func(r Line) error {
		got = append(got, r.Value.(*Request))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].E2ELatencyMS != nil || got[0].DispatchLagMS != nil || got[0].OutputTokens != nil || got[0].HTTPStatus != nil {
		t.Fatalf("nulls decoded as values: %+v", got[0])
	}
	if got[0].ChunkInterarrivalMS == nil || len(got[0].ChunkInterarrivalMS) != 0 {
		t.Fatalf("chunk gaps %#v, want empty non-nil", got[0].ChunkInterarrivalMS)
	}
	if got[1].DispatchLagMS == nil || *got[1].DispatchLagMS != 0 || got[1].OutputTokens == nil || *got[1].OutputTokens != 0 {
		t.Fatalf("zeros lost: %+v", got[1])
	}
}

func mustLine(t *testing.T, rec any) []byte {
	t.Helper()
	b, err := MarshalLine(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIntegersAreNeverFloats(t *testing.T) {
	r := sampleRequest()
	r.StartedAtNS = Ptr(int64(math.MaxInt64))
	line := string(mustLine(t, r))
	if !strings.Contains(line, `"started_at_ns":9223372036854775807`) {
		t.Fatalf("int64 max not exact: %s", line)
	}
	// Every integer-typed field renders as a bare integer literal.
	intField := regexp.MustCompile(`"(timestamp_ns|started_at_ns|ended_at_ns|intended_at_ns|request_index|prompt_tokens|output_tokens|total_tokens|target_input_tokens|target_output_tokens|concurrency|in_flight_at_dispatch)":(-?[0-9.eE+]+)`)
	for _, m := range intField.FindAllStringSubmatch(line, -1) {
		if strings.ContainsAny(m[2], ".eE+") {
			t.Errorf("%s written as %s", m[1], m[2])
		}
	}
}

func TestMarshalLineRefusesHeaderless(t *testing.T) {
	if _, err := MarshalLine(map[string]int{"a": 1}); err == nil {
		t.Error("record without event_type accepted")
	}
	if _, err := MarshalLine([]int{1}); err == nil {
		t.Error("array accepted")
	}
	if _, err := MarshalLine(struct {
		Header
		V float64 `json:"v"`
	}{Header: HeaderOf(KindMetricsScrape), V: math.NaN()}); err == nil {
		t.Error("NaN float64 accepted")
	}
	type scrape struct {
		Header
		Value Float `json:"value"`
	}
	line, err := MarshalLine(scrape{Header: HeaderOf(KindMetricsScrape), Value: Float(math.Inf(-1))})
	if err != nil || string(line) != `{"event_type":"infer.vllm_scrape","schema_version":1,"value":"-Inf"}` {
		t.Fatalf("Header-embedding record: %s, %v", line, err)
	}
	// HTML characters stay readable.
	line = mustLine(t, CacheState{Reason: "a <redacted> & b"})
	if !strings.Contains(string(line), `"reason":"a <redacted> & b"`) {
		t.Fatalf("escaped: %s", line)
	}
}

func TestFloatNonFiniteStrings(t *testing.T) {
	type sample struct {
		Values []Float `json:"values"`
		Gauge  *Float  `json:"gauge"`
	}
	in := sample{Values: []Float{Float(math.NaN()), Float(math.Inf(1)), Float(math.Inf(-1)), 0.25, 3}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"values":["NaN","+Inf","-Inf",0.25,3],"gauge":null}` {
		t.Fatalf("marshal = %s", b)
	}
	var out sample
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(out.Values[0])) || !math.IsInf(float64(out.Values[1]), 1) || !math.IsInf(float64(out.Values[2]), -1) ||
		out.Values[3] != 0.25 || out.Values[4] != 3 || out.Gauge != nil {
		t.Fatalf("unmarshal = %+v", out)
	}
	for _, bad := range []string{`"nan"`, `"Infinity"`, `"inf"`, `"1.5"`, `true`, `1e400`} {
		var f Float
		if err := json.Unmarshal([]byte(bad), &f); err == nil {
			t.Errorf("Float accepted %s as %v", bad, f)
		}
	}
}

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"": "",
		"http://127.0.0.1:8000/reset_prefix_cache":                                  "http://127.0.0.1:8000/reset_prefix_cache",
		"https://user:s3cret@host.example:8443/flush_cache?api_key=sk-abc&x=1#frag": "https://host.example:8443/flush_cache?<redacted>",
		"http://token@host/v1?":                                                     "http://host/v1",
		"http://[::1]:8000/metrics":                                                 "http://[::1]:8000/metrics",
		"user:pass@host":                                                            "user:<redacted>",
		"http://host/%zz":                                                           Redacted,
	}
	for in, want := range cases {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	for in := range cases {
		if got := RedactURL(in); strings.Contains(got, "s3cret") || strings.Contains(got, "sk-abc") || strings.Contains(got, "pass") || strings.Contains(got, "token") {
			t.Errorf("RedactURL(%q) leaks: %q", in, got)
		}
	}
}

func TestHostIdentityAndClockDomain(t *testing.T) {
	boot := func(string) ([]byte, error) { return []byte("4f1c9e1a-77a0-4f3d-9a5e-0b7d2a1c3e55\n"), nil }
	noBoot := func(string) ([]byte, error) { return nil, os.ErrPermission }
	name := func() (string, error) { return "gpu-01", nil }
	h := hostIdentity(name, boot)
	if h.Name != "gpu-01" || h.BootID == nil || *h.BootID != "4f1c9e1a-77a0-4f3d-9a5e-0b7d2a1c3e55" {
		t.Fatalf("host %+v", h)
	}
	if got := h.ClockDomain(); got != "gpu-01/4f1c9e1a-77a0-4f3d-9a5e-0b7d2a1c3e55/unix_epoch_ns" {
		t.Fatalf("clock domain %q", got)
	}
	h = hostIdentity(name, noBoot)
	if h.BootID != nil || h.ClockDomain() != "gpu-01/unix_epoch_ns" {
		t.Fatalf("host without boot id %+v %q", h, h.ClockDomain())
	}
	h = hostIdentity(func() (string, error) { return "", errors.New("no") }, func(string) ([]byte, error) { return []byte(" \n"), nil })
	if h.Name != "unknown" || h.BootID != nil {
		t.Fatalf("fallback host %+v", h)
	}
	real := HostIdentity()
	if real.Name == "" {
		t.Fatal("empty hostname")
	}
	if _, err := os.Stat(BootIDPath); err == nil && real.BootID == nil {
		t.Fatal("boot id readable but not reported")
	}
}

func TestNewSessionID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if !re.MatchString(id) {
			t.Fatalf("session id %q is not a v4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("duplicate session id %q", id)
		}
		seen[id] = true
	}
}
