package sim

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// Truncated-trace faults (Faults.ProfileTruncatedTrace).
const (
	TruncateJSON = "json" // the JSON stops mid-event inside a valid gzip stream
	TruncateGzip = "gzip" // the gzip file is cut at half its bytes
)

// Profile-start faults (Faults.ProfileStart).
const (
	ProfileStart500     = "500"     // POST /start_profile answers 500; nothing starts
	ProfileStartTimeout = "timeout" // the profile starts, but the reply never comes (held until the client gives up)
)

// profiler is the state of the simulated torch profiler: whether a profile is running.
type profiler struct {
	mu     sync.Mutex
	active bool
}

// startProfile opens a profiling window on every engine (a no-op while one is open).
func (s *Server) startProfile() {
	s.prof.mu.Lock()
	defer s.prof.mu.Unlock()
	if s.prof.active {
		return
	}
	s.prof.active = true
	for _, e := range s.engines {
		e.startRecording(MaxProfiledSteps)
	}
}

// handleStartProfile is POST /start_profile: 404 without Config.ProfilerDir (a server
// started without the profiler), else 200 — a second start while one runs is 200 too, as
// vLLM answers — or the Faults.ProfileStart fault.
func (s *Server) handleStartProfile(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ProfilerDir == "" {
		s.notFound(w, r)
		return
	}
	switch s.cfg.Faults.ProfileStart {
	case ProfileStart500:
		writeJSON(w, http.StatusInternalServerError, []byte(`{"object":"error","message":"profiler failed to start","type":"InternalServerError","param":null,"code":500}`))
		s.countHTTP(r.URL.Path, r.Method, http.StatusInternalServerError)
		return
	case ProfileStartTimeout:
		s.startProfile()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	s.startProfile()
	w.WriteHeader(http.StatusOK)
	s.countHTTP(r.URL.Path, r.Method, http.StatusOK)
}

// handleStopProfile is POST /stop_profile: 404 without Config.ProfilerDir; else it ends a
// running profile, writing one trace per engine (unless Faults.ProfileStopNoFile), and
// answers 200 (also with nothing running, as vLLM does). A trace that cannot be written is
// a 500.
func (s *Server) handleStopProfile(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ProfilerDir == "" {
		s.notFound(w, r)
		return
	}
	s.prof.mu.Lock()
	defer s.prof.mu.Unlock()
	if s.prof.active {
		s.prof.active = false
		ts := nowNs()
		for rank, e := range s.engines {
			steps, dropped := e.stopRecording()
			if s.cfg.Faults.ProfileStopNoFile {
				continue
			}
			tr := KinetoTrace{Rank: rank, WorldSize: len(s.engines), BaseNs: s.profBaseNs,
				Seed: int64(s.cfg.Seed) + int64(rank), Dropped: dropped}
			if err := writeTrace(s.cfg.ProfilerDir, tr, ts, steps, s.cfg.Faults.ProfileTruncatedTrace); err != nil {
				msg, _ := jsonString(err.Error())
				writeJSON(w, http.StatusInternalServerError, []byte(`{"object":"error","message":`+msg+`,"type":"InternalServerError","param":null,"code":500}`))
				s.countHTTP(r.URL.Path, r.Method, http.StatusInternalServerError)
				return
			}
		}
	}
	w.WriteHeader(http.StatusOK)
	s.countHTTP(r.URL.Path, r.Method, http.StatusOK)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
	s.countHTTP(r.URL.Path, r.Method, http.StatusNotFound)
}

// traceName is the file name of engine rank's trace stopped at ts (Unix ns), as vLLM's
// torch profiler names a worker's trace: rank<N>.<ts>.pt.trace.json.gz.
func traceName(rank int, ts int64) string {
	return fmt.Sprintf("rank%d.%d.pt.trace.json.gz", rank, ts)
}

// truthName is the file name of the ground truth beside traceName(rank, ts):
// rank<N>.<ts>.steps.jsonl (never a match for rank<N>.*.pt.trace.json[.gz]).
func truthName(rank int, ts int64) string {
	return fmt.Sprintf("rank%d.%d.steps.jsonl", rank, ts)
}

// writeTrace writes tr's trace of steps into dir as traceName(tr.Rank, ts), gzipped, and
// its ground truth as truthName(tr.Rank, ts), streaming both; each goes through NAME.tmp
// renamed to NAME, the ground truth first, so a trace that appears always has its truth
// beside it. With truncate TruncateJSON the trace's JSON stops in the middle of the first
// event's ts value past half its bytes (inside traceEvents), but the gzip stream around it
// is complete and valid; with TruncateGzip the gzip file stops at half its bytes. The
// ground truth is the whole window's either way.
func writeTrace(dir string, tr KinetoTrace, ts int64, steps []Step, truncate string) error {
	final := filepath.Join(dir, traceName(tr.Rank, ts))
	tr.Name = final
	truthPath := filepath.Join(dir, truthName(tr.Rank, ts))
	var cut int64 = -1
	if truncate == TruncateJSON {
		var n countWriter
		if err := tr.Write(&n, StepsOf(steps), nil); err != nil {
			return err
		}
		cut = int64(n) / 2
	}
	err := writeRenamed(truthPath, func(f io.Writer) error {
		return tr.Write(io.Discard, StepsOf(steps), f)
	})
	if err != nil {
		return err
	}
	if truncate == TruncateGzip {
		var n countWriter
		if err := writeGzip(&n, tr, steps, -1); err != nil {
			return err
		}
		return writeRenamed(final, func(f io.Writer) error {
			return writeGzip(&cutWriter{w: f, limit: int64(n) / 2, exact: true}, tr, steps, -1)
		})
	}
	return writeRenamed(final, func(f io.Writer) error { return writeGzip(f, tr, steps, cut) })
}

// writeGzip writes tr's trace of steps gzipped to f; with cut ≥ 0 the JSON stops as
// cutWriter stops it past cut bytes.
func writeGzip(f io.Writer, tr KinetoTrace, steps []Step, cut int64) error {
	zw := gzip.NewWriter(f)
	var w io.Writer = zw
	if cut >= 0 {
		w = &cutWriter{w: zw, limit: cut}
	}
	if err := tr.Write(w, StepsOf(steps), nil); err != nil {
		return err
	}
	return zw.Close()
}

// writeRenamed creates path+".tmp", lets write fill it, and renames it to path; on an
// error the .tmp file is removed.
func writeRenamed(path string, write func(io.Writer) error) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path + ".tmp")
		return err
	}
	return os.Rename(path+".tmp", path)
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// cutWriter passes bytes to w until limit, then (unless exact) until the next `"ts": `
// and two more bytes (the middle of an event), and drops the rest.
type cutWriter struct {
	w       io.Writer
	limit   int64
	exact   bool // stop at limit
	n       int64
	matched int // bytes of cutMark matched past the limit; len(cutMark)+2 when cut
}

var cutMark = []byte(`"ts": `)

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.exact {
		k := int(min(max(c.limit-c.n, 0), int64(len(p))))
		c.n += int64(k)
		if _, err := c.w.Write(p[:k]); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	k := 0
	for ; k < len(p) && c.matched < len(cutMark)+2; k++ {
		if c.n+int64(k) < c.limit {
			continue
		}
		switch {
		case c.matched >= len(cutMark):
			c.matched++
		case p[k] == cutMark[c.matched]:
			c.matched++
		case p[k] == cutMark[0]:
			c.matched = 1
		default:
			c.matched = 0
		}
	}
	c.n += int64(k)
	if _, err := c.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
}
