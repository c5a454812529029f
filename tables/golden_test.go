package tables_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/internal/synth"
	"github.com/inferprobe/inferprobe/tables"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestTablesSynthGolden")

// TestTablesSynthGolden pins the bytes of the tables of internal/synth's deterministic run
// (40 measured requests over two Poisson cases, spans with some quarantined as
// multiple_spans, timeouts, errors and drops). Regenerate with:
// go test ./tables -run TestTablesSynthGolden -update
func TestTablesSynthGolden(t *testing.T) {
	dir := t.TempDir()
	s := tables.New(dir)
	if err := (synth.Run{Requests: 40, Cases: 2, Seed: 1, Spans: true, Sent: true}).Write(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tables.RequestMetricsFile, tables.ManifestFile,
		"request_plots/request_e2e_time.csv", "request_plots/request_unaccounted_time.csv",
		"request_plots/request_inter_arrival_delay.csv", "request_plots/request_num_gen_tokens.csv",
		"request_plots/request_arrival_time_series.csv", "request_plots/request_completion_time_series.csv"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "synth", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate with -update)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from %s (regenerate with -update after checking the change)", name, path)
		}
	}
}
