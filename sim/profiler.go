package sim

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
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
		s.prof.mu.Lock()
		s.prof.active = true
		s.prof.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	s.prof.mu.Lock()
	s.prof.active = true
	s.prof.mu.Unlock()
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
	if s.prof.active && !s.cfg.Faults.ProfileStopNoFile {
		ts := nowNs()
		for rank := range s.engines {
			if err := writeTrace(s.cfg.ProfilerDir, rank, ts); err != nil {
				msg, _ := jsonString(err.Error())
				writeJSON(w, http.StatusInternalServerError, []byte(`{"object":"error","message":`+msg+`,"type":"InternalServerError","param":null,"code":500}`))
				s.countHTTP(r.URL.Path, r.Method, http.StatusInternalServerError)
				return
			}
		}
	}
	s.prof.active = false
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

// writeTrace writes engine rank's trace into dir: a minimal Kineto JSON document
// (schemaVersion, baseTimeNanoseconds = ts, the rank, an empty traceEvents), gzipped,
// written to NAME.tmp and renamed to NAME.
func writeTrace(dir string, rank int, ts int64) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, `{"schemaVersion":1,"deviceProperties":[],"distributedInfo":{"backend":"nccl","rank":%d,"world_size":1},"baseTimeNanoseconds":%d,"traceEvents":[]}`, rank, ts)
	if err := zw.Close(); err != nil {
		return err
	}
	final := filepath.Join(dir, traceName(rank, ts))
	if err := os.WriteFile(final+".tmp", buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(final+".tmp", final)
}
