package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/run"
)

// TestRunWritesItsTables: a demo run writes its tables and HTML page into its TablesDir,
// and the page to open is the last run's index.html.
func TestRunWritesItsTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Start(ctx, Options{Dir: dir, MetricsListen: "127.0.0.1:0", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(d.Runs))
	}
	if want := filepath.Join(dir, "tables", "demo-poisson", "index.html"); d.Page() != want {
		t.Errorf("Page() = %q, want %q", d.Page(), want)
	}
	r := d.Runs[0] // the closed loop: 4 warmup and 40 measured requests
	spec := r.Spec()
	spec.Warn = func(msg string) { t.Log(msg) }
	res := run.New(spec).Execute(ctx)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	page, err := os.ReadFile(filepath.Join(r.TablesDir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"c4_in256_out64", "SLO policy: demo"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	csv, err := os.ReadFile(filepath.Join(r.TablesDir, "request_metrics.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(string(csv), "\n") - 1; rows != 40 {
		t.Errorf("request_metrics.csv has %d rows, want one per measured request (40)", rows)
	}
}
