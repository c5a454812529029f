package export

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/synth"
	"github.com/inferprobe/inferprobe/run"
)

// analysed writes a synthetic run (two Poisson cases), analyses it with a collector attached
// and a policy, and returns both.
func analysed(t *testing.T) (*Collector, *analyze.Report) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (synth.Run{Requests: 600, Cases: 2, Seed: 9}).Write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	policy, err := analyze.ParseSLOFlags([]string{"ttft:60"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{}
	opts := analyze.Options{Policy: policy, PolicySource: analyze.SourceFlags}
	c.Attach(&opts)
	rep, err := run.Analyze(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, rep
}

// jsonType names a decoded JSON value's type as the fixture's types.json does: a number
// written with a point or an exponent is a "number", without one an "integer".
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return "number"
		}
		return "integer"
	case []any:
		for _, e := range x {
			if jsonType(e) != "number" {
				return "array of " + jsonType(e)
			}
		}
		return "array of number"
	}
	return "object"
}

// orderedKeys returns a JSON object's keys in the order they are written.
func orderedKeys(t *testing.T, line []byte) ([]string, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	values := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		values[tok.(string)] = v
	}
	return keys, values
}

// The vllm-bench export has, for every case, exactly the keys of the upstream fixture in its
// order, the types vLLM writes for each, Python's separators, and the units: ms for *_ms,
// seconds for latencies, the report's rates.
func TestVLLMBenchMatchesUpstream(t *testing.T) {
	fixture, err := os.ReadFile("testdata/vllm-bench-serve/result.json")
	if err != nil {
		t.Fatal(err)
	}
	wantKeys, wantValues := orderedKeys(t, fixture)
	var types map[string][]string
	data, _ := os.ReadFile("testdata/vllm-bench-serve/types.json")
	if err := json.Unmarshal(data, &types); err != nil {
		t.Fatal(err)
	}
	c, rep := analysed(t)
	var out bytes.Buffer
	if err := WriteVLLMBench(&out, c, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d objects for 2 cases", len(lines))
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, `{"date": "`) || !strings.Contains(line, `, "label": null, `) {
			t.Fatalf("not json.dump's form: %.120s", line)
		}
		keys, values := orderedKeys(t, []byte(line))
		if !slices.Equal(keys, wantKeys) {
			t.Fatalf("case %d keys\n%v\nwant\n%v", i, keys, wantKeys)
		}
		for _, k := range keys {
			allowed, ok := types[k]
			if !ok {
				allowed = []string{jsonType(wantValues[k])} // the statistics: numbers
			}
			if got := jsonType(values[k]); !slices.Contains(allowed, got) {
				t.Errorf("case %d %s: %s, want one of %v", i, k, got, allowed)
			}
		}
		id := rep.CaseOrder[i]
		cr := rep.Cases[id]
		num := func(k string) float64 { f, _ := values[k].(json.Number).Float64(); return f }
		p50 := cr.Latency.Metrics[artifact.MetricTTFT].Successful["p50"].ValueMs
		if math.Abs(num("median_ttft_ms")-*p50) > 1e-9 || math.Abs(num("p50_ttft_ms")-*p50) > 1e-9 {
			t.Errorf("median TTFT %g ms, report p50 %g ms", num("median_ttft_ms"), *p50)
		}
		if math.Abs(num("request_throughput")-*cr.Throughput.RequestsPerSecond) > 1e-9 || math.Abs(num("output_throughput")-*cr.Throughput.OutputTokensPerSecond) > 1e-9 {
			t.Errorf("throughputs %g %g", num("request_throughput"), num("output_throughput"))
		}
		lat := values["latencies"].([]any)
		e2e, _ := lat[0].(json.Number).Float64()
		if len(lat) != cr.Population.Offered || !(e2e > 0.05 && e2e < 5) || num("mean_e2el_ms") < 50 {
			t.Errorf("latencies: %d of %d offered, first %g s, mean e2el %g ms", len(lat), cr.Population.Offered, e2e, num("mean_e2el_ms"))
		}
		if int(num("completed"))+int(num("failed")) != cr.Population.Offered || values["request_rate"].(json.Number) == "" || values["request_goodput"] == nil {
			t.Errorf("counts %v+%v, rate %v, goodput %v", values["completed"], values["failed"], values["request_rate"], values["request_goodput"])
		}
	}
}

func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 1: "1.0", 1.5: "1.5", 1234567: "1234567.0", 1e-5: "1e-05", 0.0001: "0.0001",
		1e16: "1e+16", 123.456: "123.456", -2: "-2.0"} {
		if got := pyFloat(v); got != want {
			t.Errorf("%g: %s, want %s", v, got, want)
		}
	}
	if got := pyString("café\n\"x\""); got != `"caf\u00e9\n\"x\""` {
		t.Errorf("pyString %s", got)
	}
}

// compileBR compiles the upstream Benchmark Report v0.2 JSON Schema.
func compileBR(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/llmd/br_v0_2_json_schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	comp.AssertFormat()
	if err := comp.AddResource("br_v0_2.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := comp.Compile("br_v0_2.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decodeAny(t *testing.T, data []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Each case's llm-d report validates against the upstream schema (as does the upstream
// example, which shows the validator accepts a real report), and carries the units and
// numbers of the report.
func TestLLMDReportValidates(t *testing.T) {
	schema := compileBR(t)
	example, err := os.ReadFile("testdata/llmd/br_v0_2_example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The example's concurrency is YAML's .inf (unlimited), which JSON cannot hold: the only
	// edit before validating it.
	ex, err := yaml.YAMLToJSON(bytes.Replace(example, []byte("concurrency: .inf"), []byte("concurrency: null"), 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(decodeAny(t, ex)); err != nil {
		t.Fatalf("the upstream example does not validate: %v", err)
	}
	c, rep := analysed(t)
	var out bytes.Buffer
	if err := WriteLLMDReport(&out, c, rep, "test-version"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d reports for 2 cases", len(lines))
	}
	for i, line := range lines {
		if err := schema.Validate(decodeAny(t, []byte(line))); err != nil {
			t.Fatalf("case %d does not validate: %v\n%.600s", i, err, line)
		}
		var br struct {
			Version string `json:"version"`
			Results struct {
				RequestPerformance struct {
					Aggregate struct {
						Requests struct{ Total int } `json:"requests"`
						Latency  map[string]struct {
							Units string  `json:"units"`
							P50   float64 `json:"p50"`
						} `json:"latency"`
						Throughput map[string]struct {
							Units string  `json:"units"`
							Mean  float64 `json:"mean"`
						} `json:"throughput"`
					} `json:"aggregate"`
				} `json:"request_performance"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(line), &br); err != nil {
			t.Fatal(err)
		}
		agg := br.Results.RequestPerformance.Aggregate
		cr := rep.Cases[rep.CaseOrder[i]]
		ttft := agg.Latency["time_to_first_token"]
		if br.Version != "0.2" || agg.Requests.Total != cr.Population.Offered || ttft.Units != "ms" ||
			math.Abs(ttft.P50-*cr.Latency.Metrics[artifact.MetricTTFT].Successful["p50"].ValueMs) > 1e-9 ||
			agg.Latency["time_per_output_token"].Units != "ms/token" || agg.Throughput["request_rate"].Units != "queries/s" ||
			math.Abs(agg.Throughput["output_token_rate"].Mean-*cr.Throughput.OutputTokensPerSecond) > 1e-9 {
			t.Errorf("case %d: %+v", i, agg)
		}
	}
}
