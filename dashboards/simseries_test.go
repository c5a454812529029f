package dashboards

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// TestVLLMRSSPanelOnTheSim: the GPU dashboard's "vLLM process RSS" query selects series the
// embedded default engine (the simulated vLLM) exports on its one /metrics page:
// process_resident_memory_bytes above zero, and vllm:num_requests_running of the served model
// (the query joins them on the scrape target).
func TestVLLMRSSPanelOnTheSim(t *testing.T) {
	var expr string
	for _, p := range loadDashboards(t)["gpu-memory.json"].Panels {
		if p.Title == "vLLM process RSS" && len(p.Targets) == 1 {
			expr = p.Targets[0].Expr
		}
	}
	names, err := metricNames(expr)
	if err != nil || !slices.Equal(names, []string{"process_resident_memory_bytes", "vllm:num_requests_running"}) {
		t.Fatalf("RSS panel query %q selects %v (%v)", expr, names, err)
	}
	var served string
	srv := testkit.StartSim(t, func(c *sim.Config) { served = c.Model })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rss := mfs["process_resident_memory_bytes"]
	if rss == nil || len(rss.GetMetric()) != 1 || rss.GetMetric()[0].GetGauge().GetValue() <= 0 {
		t.Errorf("the sim's process_resident_memory_bytes: %v", rss)
	}
	found := false
	for _, m := range mfs["vllm:num_requests_running"].GetMetric() {
		for _, l := range m.GetLabel() {
			found = found || l.GetName() == "model_name" && l.GetValue() == served
		}
	}
	if !found {
		t.Errorf("the sim exports no vllm:num_requests_running{model_name=%q}", served)
	}
}
