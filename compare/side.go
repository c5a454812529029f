package compare

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/inferprobe/inferprobe/analyze"
	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/run"
)

// Metrics are the per-request metrics compare tests, in report order: the client metrics,
// e2e per output token, and the server metrics (from joined spans; compared only when both
// runs have them).
var Metrics = func() []string {
	out := append([]string{}, artifact.ClientMetrics...)
	out = append(out, artifact.MetricE2EPerOutputToken)
	return append(out, analyze.ServerMetrics...)
}()

// Side describes one run of the comparison: what it was read from and what identifies it —
// the model and API path its session sent to, the engine its artifact names, the workload
// digest and seed, and the SLO policy its report judged by (name and digest; null without).
type Side struct {
	Paths          []string         `json:"paths"`
	Model          string           `json:"model"`
	API            string           `json:"api"`
	Engine         *string          `json:"engine"`
	WorkloadDigest string           `json:"workload_digest"`
	Seed           *int64           `json:"seed"`
	SLO            *analyze.SLOInfo `json:"slo"`
	Warnings       []string         `json:"warnings"`

	report   *analyze.Report
	workload *artifact.Workload
	cases    map[string]*caseSamples
}

// caseSamples is what compare keeps of one case's requests: each metric's values over the
// successful requests, sorted ascending (ms), and how many successful requests lacked it.
type caseSamples struct {
	values  map[string][]float64
	missing map[string]int
}

// loadSide reads one run the way `inferprobe analyze` does — a file, or several artifacts
// or a directory merged as the shards of one run (run.ArtifactPaths, run.Analyze,
// run.AnalyzeShards) — and keeps its report and, per case, every metric's sorted values,
// taken while the analysis still holds the requests (analyze.Options.Inspect), so that the
// requests themselves are not kept. Errors are the analysis's (artifact.ErrInvalidArtifact
// and join.ErrInvalidTelemetry for unusable input, ctx's error).
func loadSide(ctx context.Context, args []string, opts analyze.Options) (*Side, error) {
	paths, merge, err := run.ArtifactPaths(args)
	if err != nil {
		return nil, err
	}
	s := &Side{Paths: paths, cases: map[string]*caseSamples{}}
	opts.Inspect = s.inspect
	var rep *analyze.Report
	if merge {
		rep, err = run.AnalyzeShards(ctx, paths, opts)
	} else {
		rep, err = run.Analyze(ctx, paths[0], opts)
	}
	if err != nil {
		return nil, err
	}
	s.report = rep
	s.SLO = rep.SLO
	s.Warnings = rep.Warnings
	if s.Warnings == nil {
		s.Warnings = []string{}
	}
	return s, nil
}

// inspect takes the side's identity and samples from the analysed input.
func (s *Side) inspect(in *analyze.Input, _ *analyze.Report) {
	a := in.Artifact
	if w := a.Workload; w != nil {
		s.workload = w
		s.WorkloadDigest = w.WorkloadDigest
		s.Seed = ptr(w.Seed)
	}
	for i := range a.Sessions {
		if c := a.Sessions[i].Config; c != nil {
			s.Model = c.Model
			s.API = apiPath(c.Endpoint)
			break
		}
	}
	if a.Header != nil {
		s.Engine = a.Header.Context.Engine
	}
	ids := make([]string, 0, len(in.Cases))
	for id := range in.Cases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.cases[id] = samplesOf(in.Cases[id])
	}
}

// apiPath is the path of an endpoint URL ("/v1/chat/completions"), or the endpoint as given
// when it does not parse; credentials and query never appear.
func apiPath(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Path == "" {
		if i := strings.IndexAny(endpoint, "?#"); i >= 0 {
			endpoint = endpoint[:i]
		}
		if i := strings.LastIndex(endpoint, "@"); i >= 0 {
			endpoint = endpoint[i+1:]
		}
		return endpoint
	}
	return u.Path
}

// samplesOf gathers each metric's finite values over the successful requests and sorts
// them, the metrics concurrently.
func samplesOf(requests []analyze.Request) *caseSamples {
	cs := &caseSamples{values: make(map[string][]float64, len(Metrics)), missing: make(map[string]int, len(Metrics))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, key := range Metrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			values := make([]float64, 0, len(requests))
			missing := 0
			for i := range requests {
				r := &requests[i]
				if r.Status != analyze.StatusOK {
					continue
				}
				if v := r.Metric(key); v.OK && v.Ms == v.Ms && v.Ms-v.Ms == 0 {
					values = append(values, v.Ms)
				} else {
					missing++
				}
			}
			analyze.SortFloats(values)
			mu.Lock()
			cs.values[key], cs.missing[key] = values, missing
			mu.Unlock()
		}()
	}
	wg.Wait()
	return cs
}
