package trace

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// TestAgainstSim runs one window against the sim for each of its profiler settings.
func TestAgainstSim(t *testing.T) {
	cases := []struct {
		name    string
		mod     func(c *sim.Config, dir string)
		outcome string
		reason  string
		files   int
	}{
		{"no profiler", func(c *sim.Config, dir string) {}, artifact.StartRejected, artifact.StopStartRejected, 0},
		{"acknowledged", func(c *sim.Config, dir string) { c.ProfilerDir, c.Engines = dir, 2 }, artifact.StartAcknowledged, artifact.StopPhaseEnd, 2},
		{"start 500", func(c *sim.Config, dir string) { c.ProfilerDir, c.Faults.ProfileStart = dir, sim.ProfileStart500 }, artifact.StartUnknown, artifact.StopStartUnknown, 0},
		// The start took effect before the reply was lost: the unknown start's stop writes a
		// trace, and it is listed.
		{"start timeout", func(c *sim.Config, dir string) { c.ProfilerDir, c.Faults.ProfileStart = dir, sim.ProfileStartTimeout }, artifact.StartUnknown, artifact.StopStartUnknown, 1},
		{"stop writes nothing", func(c *sim.Config, dir string) { c.ProfilerDir, c.Faults.ProfileStopNoFile = dir, true }, artifact.StartAcknowledged, artifact.StopPhaseEnd, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := testkit.StartSim(t, func(c *sim.Config) { tc.mod(c, dir) })
			c, mem := newController(t, srv.URL(), func(o *Options) {
				o.Dir, o.Timeout, o.Settle, o.Poll = dir, 300*time.Millisecond, 50*time.Millisecond, 5*time.Millisecond
			})
			ctx := context.Background()
			c.PhaseStart(ctx, "c1", "measured")
			c.PhaseEnd(ctx, "c1", "measured")
			c.Close(ctx)
			ws := windows(mem)
			if len(ws) != 1 {
				t.Fatalf("%d records", len(ws))
			}
			w := ws[0]
			if w.StartOutcome != tc.outcome || w.StopReason != tc.reason || len(w.TraceFiles) != tc.files {
				t.Fatalf("outcome %q reason %q files %+v", w.StartOutcome, w.StopReason, w.TraceFiles)
			}
			for i, f := range w.TraceFiles {
				if f.Rank != i || !strings.HasPrefix(filepath.Base(f.Path), "rank") || f.Bytes <= 0 {
					t.Fatalf("file %+v", f)
				}
			}
			if tc.name == "start timeout" && (w.StartStatus != nil || w.StartError == nil || *w.StartError != "no reply within 300ms") {
				t.Fatalf("start status %v error %v", w.StartStatus, w.StartError)
			}
		})
	}
}
