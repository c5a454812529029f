package trace

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

func hijack(write string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if write != "" {
			_, _ = buf.WriteString(write)
			_ = buf.Flush()
		}
		_ = conn.Close()
	}
}

func TestStartOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		h       http.HandlerFunc
		outcome string
		status  *int
		stops   int
		reason  string
	}{
		{"200", statusHandler(200), artifact.StartAcknowledged, artifact.Ptr(200), 1, artifact.StopPhaseEnd},
		{"204", statusHandler(204), artifact.StartAcknowledged, artifact.Ptr(204), 1, artifact.StopPhaseEnd},
		{"404", statusHandler(404), artifact.StartRejected, artifact.Ptr(404), 0, artifact.StopStartRejected},
		{"405", statusHandler(405), artifact.StartRejected, artifact.Ptr(405), 0, artifact.StopStartRejected},
		{"401", statusHandler(401), artifact.StartRejected, artifact.Ptr(401), 0, artifact.StopStartRejected},
		{"403", statusHandler(403), artifact.StartRejected, artifact.Ptr(403), 0, artifact.StopStartRejected},
		{"407", statusHandler(407), artifact.StartRejected, artifact.Ptr(407), 0, artifact.StopStartRejected},
		{"400", statusHandler(400), artifact.StartUnknown, artifact.Ptr(400), 1, artifact.StopStartUnknown},
		{"408", statusHandler(408), artifact.StartUnknown, artifact.Ptr(408), 1, artifact.StopStartUnknown},
		{"500", statusHandler(500), artifact.StartUnknown, artifact.Ptr(500), 1, artifact.StopStartUnknown},
		{"502", statusHandler(502), artifact.StartUnknown, artifact.Ptr(502), 1, artifact.StopStartUnknown},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/stop_profile", http.StatusTemporaryRedirect)
		}, artifact.StartUnknown, artifact.Ptr(307), 1, artifact.StopStartUnknown},
		{"malformed", hijack("garbage\r\n\r\n"), artifact.StartUnknown, nil, 1, artifact.StopStartUnknown},
		{"dropped", hijack(""), artifact.StartUnknown, nil, 1, artifact.StopStartUnknown},
		{"timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, artifact.StartUnknown, nil, 1, artifact.StopStartUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.h)
			c, mem := newController(t, f.srv.URL, func(o *Options) { o.Timeout = 300 * time.Millisecond })
			ctx := context.Background()
			c.PhaseStart(ctx, "c1", "measured")
			c.PhaseEnd(ctx, "c1", "measured")
			c.Close(ctx)
			starts, stops := f.counts()
			if starts != 1 || stops != tc.stops {
				t.Fatalf("starts %d stops %d, want 1 and %d", starts, stops, tc.stops)
			}
			ws := windows(mem)
			if len(ws) != 1 {
				t.Fatalf("%d records, want 1", len(ws))
			}
			w := ws[0]
			if w.StartOutcome != tc.outcome || w.StopReason != tc.reason {
				t.Fatalf("outcome %q reason %q, want %q %q", w.StartOutcome, w.StopReason, tc.outcome, tc.reason)
			}
			if (w.StartStatus == nil) != (tc.status == nil) || (tc.status != nil && *w.StartStatus != *tc.status) {
				t.Fatalf("start status %v, want %v", w.StartStatus, tc.status)
			}
			if (tc.outcome == artifact.StartAcknowledged) != (w.StartError == nil) {
				t.Fatalf("start error %v", w.StartError)
			}
			if (tc.outcome == artifact.StartAcknowledged) != (w.StartConfirmedAtNS != nil) {
				t.Fatalf("confirmed %v", w.StartConfirmedAtNS)
			}
			if tc.stops == 0 && (w.StopRequestedAtNS != nil || w.StopStatus != nil) {
				t.Fatalf("a rejected start has stop fields: %v %v", w.StopRequestedAtNS, w.StopStatus)
			}
			if tc.stops == 1 && (w.StopStatus == nil || *w.StopStatus != 200 || w.StopError != nil || w.ProfilerMayBeRunning) {
				t.Fatalf("stop status %v error %v may-run %v", w.StopStatus, w.StopError, w.ProfilerMayBeRunning)
			}
			if w.ControlURL != f.srv.URL+"/start_profile" || w.CaseID != "c1" || w.Phase != "measured" || w.SessionID != "s1" || w.RunID != "r1" || w.Profiler != "vllm-torch" {
				t.Fatalf("record identity %+v", w)
			}
		})
	}
}

func TestStopFailureSaysProfilerMayRun(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	f.stopStatus = 503
	var warns []string
	c, mem := newController(t, f.srv.URL, func(o *Options) { o.Warn = func(s string) { warns = append(warns, s) } })
	ctx := context.Background()
	c.PhaseStart(ctx, "c1", "measured")
	c.PhaseEnd(ctx, "c1", "measured")
	w := windows(mem)[0]
	if !w.ProfilerMayBeRunning || w.StopStatus == nil || *w.StopStatus != 503 || w.StopError == nil || *w.StopError != "HTTP 503" {
		t.Fatalf("%+v", w)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "the profiler may still be running") {
		t.Fatalf("warnings %q", warns)
	}
	if _, stops := f.counts(); stops != 1 {
		t.Fatalf("stops %d: a failed stop is not retried", stops)
	}
}

func TestWindowPerCaseOnlyProfiledPhase(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	c, mem := newController(t, f.srv.URL, nil)
	ctx := context.Background()
	for _, cs := range []string{"c1", "c2"} {
		c.PhaseStart(ctx, cs, "warmup")
		c.PhaseEnd(ctx, cs, "warmup")
		c.PhaseStart(ctx, cs, "measured")
		c.PhaseEnd(ctx, cs, "measured")
	}
	c.Close(ctx)
	starts, stops := f.counts()
	ws := windows(mem)
	if starts != 2 || stops != 2 || len(ws) != 2 || ws[0].CaseID != "c1" || ws[1].CaseID != "c2" {
		t.Fatalf("starts %d stops %d records %d", starts, stops, len(ws))
	}
	for _, w := range ws {
		if w.Phase != "measured" || w.StopReason != artifact.StopPhaseEnd {
			t.Fatalf("%+v", w)
		}
	}
}

func TestCancelledRunStopsOnce(t *testing.T) {
	f := newFakeServer(t, statusHandler(200))
	c, mem := newController(t, f.srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	c.PhaseStart(ctx, "c1", "measured")
	cancel()
	c.Close(ctx) // the load generator skips PhaseEnd once ctx has ended
	c.Close(ctx)
	c.PhaseEnd(ctx, "c1", "measured")
	ws := windows(mem)
	if _, stops := f.counts(); stops != 1 || len(ws) != 1 || ws[0].StopReason != artifact.StopCancelled || ws[0].StopStatus == nil || *ws[0].StopStatus != 200 {
		t.Fatalf("stops %d records %+v", stops, ws)
	}
}

func TestControlURLs(t *testing.T) {
	base, err := ControlBase("https://user:secret@gpu1:8000/v1/chat/completions?k=v")
	if err != nil || base != "https://gpu1:8000" {
		t.Fatalf("%q %v", base, err)
	}
	for _, bad := range []string{"", "gpu1:8000", "ftp://x/", "http://", "http://%zz"} {
		if _, err := ControlBase(bad); err == nil {
			t.Errorf("ControlBase(%q): no error", bad)
		}
	}
	c, _ := newController(t, "http://u:pw@proxy:9000/engine/?token=abc", nil)
	if got := c.StartURL(); got != "http://proxy:9000/engine/start_profile" {
		t.Fatalf("start URL %q", got)
	}
	if c.stop != "http://u:pw@proxy:9000/engine/stop_profile" {
		t.Fatalf("stop URL %q", c.stop)
	}
	for _, o := range []Options{
		{ControlBase: "http://h", Phase: "cooldown", Sink: &artifact.Memory{}},
		{ControlBase: "http://h", Phase: "measured"},
		{ControlBase: "h:1", Phase: "measured", Sink: &artifact.Memory{}},
		{ControlBase: "http://h", Phase: "measured", Sink: &artifact.Memory{}, MaxDuration: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}
