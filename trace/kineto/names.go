package kineto

import (
	"bytes"
	"regexp"
	"strconv"

	"github.com/inferprobe/inferprobe/artifact"
)

// stepName is what an iteration annotation's name says: its dialect (an artifact
// Iteration* source), the producer and id of an iteration range, and the request and
// token counts of an engine step (-1 when the name gives none).
type stepName struct {
	source     string
	producer   string
	id         string // iteration ranges only
	name       string
	nc, nct    int64
	ng, ngt    int64
	generation bool
}

var (
	// vLLM: execute_context_{nc}({nct})_generation_{ng}({ngt}), optionally followed by
	// more fields (detailed_trace_annotation).
	vllmStep = regexp.MustCompile(`^execute_context_(\d{1,12})\((\d{1,15})\)_generation_(\d{1,12})\((\d{1,15})\)`)
	// SGLang: step[EXTEND bs=8 toks=4096], step[DECODE bs=64]; other modes are steps
	// without counts.
	sglangStep = regexp.MustCompile(`^step\[([A-Z_]+)((?: [a-z_]+=\d{1,15})*)\]$`)
	sglangKV   = regexp.MustCompile(` ([a-z_]+)=(\d{1,15})`)
	// inferprobe.iteration/<producer>/<id> and the seed's stormlog.iteration/<producer>/<id>.
	iterationRange = regexp.MustCompile(`^(inferprobe|stormlog)\.iteration/([^/]{1,200})/([^/]{1,200})$`)
)

var (
	prefixVLLM   = []byte("execute_context_")
	prefixSGLang = []byte("step[")
	prefixIP     = []byte("inferprobe.iteration/")
	prefixSL     = []byte("stormlog.iteration/")
)

// parseStepName reports whether an annotation's name marks an engine step or iteration
// range, and what it says. Names that cannot be one are refused by their first bytes,
// without a regular expression.
func parseStepName(raw []byte, esc bool) (stepName, bool) {
	if !bytes.HasPrefix(raw, prefixVLLM) && !bytes.HasPrefix(raw, prefixSGLang) &&
		!bytes.HasPrefix(raw, prefixIP) && !bytes.HasPrefix(raw, prefixSL) {
		return stepName{}, false
	}
	name := unquote(raw, esc)
	sn := stepName{name: name, nc: -1, nct: -1, ng: -1, ngt: -1}
	if m := vllmStep.FindStringSubmatch(name); m != nil {
		sn.source, sn.producer = artifact.IterationVLLM, "vllm"
		sn.nc, sn.nct, sn.ng, sn.ngt = atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
		return sn, true
	}
	if m := sglangStep.FindStringSubmatch(name); m != nil {
		sn.source, sn.producer = artifact.IterationSGLang, "sglang"
		var bs, toks int64 = -1, -1
		for _, kv := range sglangKV.FindAllStringSubmatch(m[2], -1) {
			switch kv[1] {
			case "bs":
				bs = atoi(kv[2])
			case "toks":
				toks = atoi(kv[2])
			}
		}
		switch m[1] {
		case "EXTEND", "PREFILL":
			sn.nc, sn.nct = bs, toks
		case "DECODE":
			sn.ng, sn.ngt, sn.generation = bs, toks, true
		}
		return sn, true
	}
	if m := iterationRange.FindStringSubmatch(name); m != nil {
		sn.source = artifact.IterationInferprobe
		if m[1] == "stormlog" {
			sn.source = artifact.IterationStormlog
		}
		sn.producer, sn.id = m[2], m[3]
		return sn, true
	}
	return stepName{}, false
}

func atoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// rankInName is the worker's global rank in a vLLM trace file name (rank<N>.… or
// dp…_rank<N>.…).
var rankInName = regexp.MustCompile(`(?:^|_)rank(\d{1,9})\.`)

// rankFromName returns the rank a trace file's base name gives, or -1.
func rankFromName(base string) int64 {
	if m := rankInName.FindStringSubmatch(base); m != nil {
		return atoi(m[1])
	}
	return -1
}
