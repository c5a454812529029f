package analyze

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

func TestAbsentBlock(t *testing.T) {
	b := VLLMTelemetry(nil, []string{"c1"}, []artifact.Capabilities{{Component: "nvml"}})
	if got := string(toJSON(t, b)); got != `{"status":"absent"}` {
		t.Errorf("absent block %s", got)
	}
	var buf strings.Builder
	if err := RenderVLLMText(&buf, b); err != nil || buf.Len() != 0 {
		t.Errorf("text %q", buf.String())
	}
	// A capability record alone (every scrape failed to be written) is collected.
	b = VLLMTelemetry(nil, nil, []artifact.Capabilities{{Component: "vllm.metrics", Available: false}})
	raw := string(toJSON(t, b))
	if b.Status != VLLMCollected || !strings.Contains(raw, `"capabilities":{"vllm.metrics":{"available":false,"supported":[]`) || !strings.Contains(raw, `"cases":{}`) {
		t.Errorf("block %s", raw)
	}
}

// VLLMBlockOf reads the scrapes, measured windows and capabilities of an
// artifact written by artifact.Writer.
func TestFromArtifact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := prom.NewScraper(prom.Config{URL: "http://127.0.0.1:8000/metrics", SessionID: "sess", RunID: "run-1", ClockDomain: "host/boot/unix_epoch_ns"})
	if err != nil {
		t.Fatal(err)
	}
	tally := engine.TallyOf(scrapeWindow(t, preText, postText))
	recs := []artifact.Record{
		artifact.PhaseWindow{SessionID: "s", CaseID: testCase, Phase: "warmup"},
		artifact.PhaseWindow{SessionID: "s", CaseID: testCase, Phase: artifact.PhaseMeasured},
		artifact.PhaseWindow{SessionID: "s", CaseID: "c2", Phase: artifact.PhaseMeasured},
		scrapeWindow(t, preText, postText)[0], scrapeWindow(t, preText, postText)[1],
		s.Capabilities(artifact.Context{RunID: "run-1", SessionID: "s", ClockDomain: "h/unix_epoch_ns", ClockKind: "wall", CollectionMode: "active", Provenance: "observed"}, tally),
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := VLLMBlockOf(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Cases) != 2 || b.Cases[testCase].State != StateResolved || b.Cases["c2"].State != StateUnresolved {
		t.Fatalf("cases %v", keysOf(b.Cases))
	}
	if d := b.Cases[testCase].Engines["0"].Counters["request_success"].Delta; *d != 32 {
		t.Errorf("delta %v", *d)
	}
	c, ok := b.Capabilities["vllm.metrics"]
	if !ok || !c.Available {
		t.Fatalf("capabilities %+v", b.Capabilities)
	}
	// Metadata came back through JSON: numbers are float64 there.
	if c.Metadata["ok_scrapes"] != float64(2) || c.Metadata["per_request_attribution"] != "none" {
		t.Errorf("metadata %v", c.Metadata)
	}
	if b.Engine.Scrapes.OK != 2 || len(b.Engine.Epochs) != 1 || *b.Engine.SourceURL != "http://127.0.0.1:8000/metrics" {
		t.Errorf("engine summary %+v", b.Engine)
	}
	raw := toJSON(t, b)
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil || generic["observation_scope"] != artifact.ScopeEngineAggregate || generic["note"] != VLLMNote {
		t.Errorf("block %v", err)
	}
}
