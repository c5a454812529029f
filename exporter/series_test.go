package exporter

import (
	"slices"
	"testing"
)

// TestSeriesDescribesEveryFamily: the generated list holds every family of the catalogue
// with its labels, and each with a type and a help text.
func TestSeriesDescribesEveryFamily(t *testing.T) {
	got, err := Series()
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]SeriesDoc{}
	for _, s := range got {
		by[s.Name] = s
		if s.Help == "" || (s.Type != "counter" && s.Type != "gauge" && s.Type != "histogram") {
			t.Errorf("%s: type %q, help %q", s.Name, s.Type, s.Help)
		}
	}
	for name, labels := range catalogue {
		s, ok := by[name]
		if !ok {
			t.Errorf("%s missing from Series()", name)
			continue
		}
		if !slices.Equal(s.Labels, labels) {
			t.Errorf("%s labels %v, want %v", name, s.Labels, labels)
		}
	}
	for _, name := range []string{"inferprobe_probe_client_limited", "inferprobe_config_last_reload_successful",
		"inferprobe_config_last_reload_success_timestamp_seconds"} {
		if _, ok := by[name]; !ok {
			t.Errorf("%s missing from Series()", name)
		}
	}
	if s := by["inferprobe_ttft_seconds"]; s.Type != "histogram" {
		t.Errorf("inferprobe_ttft_seconds type %q, want histogram", s.Type)
	}
	if s := by["inferprobe_requests_total"]; s.Type != "counter" {
		t.Errorf("inferprobe_requests_total type %q, want counter", s.Type)
	}
}
