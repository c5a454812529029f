package compare

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// checkWorkloads refuses two runs whose workload digests differ (ErrDigestMismatch naming
// what differs) unless allow is set, when the difference becomes a warning. A run without
// an infer.workload record cannot be checked: a warning says so.
func (r *Result) checkWorkloads(allow bool) error {
	bw, cw := r.base.workload, r.cand.workload
	switch {
	case bw == nil || cw == nil:
		which := "base"
		if bw != nil {
			which = "candidate"
		} else if cw == nil {
			which = "base and candidate"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("the %s run records no workload: cases are matched by id alone", which))
		return nil
	case bw.WorkloadDigest == cw.WorkloadDigest:
		return nil
	}
	what := workloadDifferences(bw, cw)
	msg := fmt.Sprintf("workload digests %s (base) and %s (candidate) differ: %s", short(bw.WorkloadDigest), short(cw.WorkloadDigest), what)
	if !allow {
		return fmt.Errorf("%w: %s; compare runs of one workload, or pass --allow-digest-mismatch to compare them anyway", ErrDigestMismatch, msg)
	}
	r.Warnings = append(r.Warnings, msg+" (compared anyway: --allow-digest-mismatch)")
	return nil
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// workloadDifferences names the workload fields whose values differ (seed, prompts,
// decoding, ...) and the cases whose specification differs or that one workload lacks.
func workloadDifferences(b, c *artifact.Workload) string {
	var out []string
	fields := []struct {
		name string
		b, c any
	}{
		{"seed", b.Seed, c.Seed}, {"generator", b.Generator, c.Generator}, {"measurement", b.Measurement, c.Measurement},
		{"prompts", b.Prompts, c.Prompts}, {"warmup", b.Warmup, c.Warmup}, {"decoding", b.Decoding, c.Decoding},
		{"tokenizer", b.Tokenizer, c.Tokenizer}, {"cache", b.Cache, c.Cache}, {"chat_template", b.ChatTemplate, c.ChatTemplate},
	}
	for _, f := range fields {
		if !sameJSON(f.b, f.c) {
			out = append(out, f.name)
		}
	}
	bc, cc := map[string]artifact.WorkloadCase{}, map[string]artifact.WorkloadCase{}
	for _, x := range b.Cases {
		bc[x.CaseID] = x
	}
	for _, x := range c.Cases {
		cc[x.CaseID] = x
	}
	var ids []string
	for id := range bc {
		ids = append(ids, id)
	}
	for id := range cc {
		if _, ok := bc[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		x, inB := bc[id]
		y, inC := cc[id]
		switch {
		case !inB:
			out = append(out, "case "+id+" (candidate only)")
		case !inC:
			out = append(out, "case "+id+" (base only)")
		case !sameJSON(x, y):
			out = append(out, "case "+id)
		}
	}
	if len(out) == 0 {
		return "the recorded digests differ but no compared field does (an older or edited artifact)"
	}
	return strings.Join(out, ", ")
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return reflect.DeepEqual(a, b)
	}
	return string(ja) == string(jb)
}

// nameDifferences warns of differences that do not stop the comparison but change what it
// means: models, API paths, engines and SLO policies.
func (r *Result) nameDifferences() {
	b, c := r.base, r.cand
	if b.Model != c.Model {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the runs used different models: %q (base) and %q (candidate)", b.Model, c.Model))
	}
	if b.API != c.API {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the runs used different APIs: %s (base) and %s (candidate)", b.API, c.API))
	}
	if be, ce := deref(b.Engine), deref(c.Engine); be != ce {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the runs name different engines: %q (base) and %q (candidate)", be, ce))
	}
	switch {
	case b.SLO == nil && c.SLO == nil:
	case b.SLO == nil || c.SLO == nil:
		which := "base"
		if c.SLO == nil {
			which = "candidate"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("only the %s run was judged by an SLO policy: attainment is not compared", map[string]string{"base": "candidate", "candidate": "base"}[which]))
	case b.SLO.Digest != c.SLO.Digest:
		r.Warnings = append(r.Warnings, fmt.Sprintf("the runs were judged by different SLO policies: %s (%s) and %s (%s); attainment is not compared — pass one --slo or --slo-file to judge both by one policy",
			b.SLO.Name, short(b.SLO.Digest), c.SLO.Name, short(c.SLO.Digest)))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
