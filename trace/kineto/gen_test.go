package kineto

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// traceBuilder writes Kineto Chrome traces the way libkineto's output_json does: ts and
// dur in µs with three decimals, relative to baseTimeNanoseconds; CPU events on (pid, tid)
// of the process and thread, GPU events on (device, stream); ac2g flows "s" at the launch
// and "f" (with "bp":"e") at the GPU activity.
type traceBuilder struct {
	base   int64
	rank   int
	events []string
}

const (
	cpuPID = 4242
	cpuTID = 4243
	base0  = int64(1_767_225_600_000_000_000)
)

func newTrace() *traceBuilder { return &traceBuilder{base: base0, rank: 0} }

func us(ns int64) string { return fmt.Sprintf("%d.%03d", ns/1000, ns%1000) }

// step writes a vLLM step annotation (user_annotation on the CPU thread and
// gpu_user_annotation on device 0) for [startNS, endNS) and [gpuStart, gpuEnd).
func (b *traceBuilder) step(name string, start, end, gpuStart, gpuEnd int64) {
	b.cpuRange(name, start, end)
	if gpuEnd > gpuStart {
		b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":"gpu_user_annotation","name":%q,"pid":0,"tid":7,"ts":%s,"dur":%s,"args":{"External id":1}}`,
			name, us(gpuStart), us(gpuEnd-gpuStart)))
	}
}

func (b *traceBuilder) cpuRange(name string, start, end int64) {
	b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":"user_annotation","name":%q,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{"External id":2,"Record function id":0}}`,
		name, cpuPID, cpuTID, us(start), us(end-start)))
}

// launch writes a cuda_runtime call with correlation corr and its ac2g flow start (flow id
// flowID, 0 for none).
func (b *traceBuilder) launch(name string, corr, flowID, ts, dur int64) {
	b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":"cuda_runtime","name":%q,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{"External id":9,"cbid":211,"correlation":%d}}`,
		name, cpuPID, cpuTID, us(ts), us(dur), corr))
	if flowID != 0 {
		b.events = append(b.events, fmt.Sprintf(`{"ph":"s","id":%d,"pid":%d,"tid":%d,"ts":%s,"cat":"ac2g","name":"ac2g"}`, flowID, cpuPID, cpuTID, us(ts)))
	}
}

// gpu writes a GPU activity of category cat on (device 0, stream) with correlation corr
// and, when flowID is not 0, the end of flow flowID bound to it.
func (b *traceBuilder) gpu(cat, name string, stream, corr, flowID, ts, dur int64) {
	b.events = append(b.events, fmt.Sprintf(`{"ph":"X","cat":%q,"name":%q,"pid":0,"tid":%d,"ts":%s,"dur":%s,"args":{"External id":9,"queued":0,"device":0,"context":1,"stream":%d,"correlation":%d,"registers per thread":32,"shared memory":0,"blocks per SM":1.5,"warps per SM":6,"grid":[108,1,1],"block":[128,1,1],"est. achieved occupancy %%":19}}`,
		cat, name, stream, us(ts), us(dur), stream, corr))
	if flowID != 0 {
		b.events = append(b.events, fmt.Sprintf(`{"ph":"f","id":%d,"pid":0,"tid":%d,"ts":%s,"cat":"ac2g","name":"ac2g","bp":"e"}`, flowID, stream, us(ts)))
	}
}

// kernel is a launch with one kernel linked by both flow and correlation (id corr).
func (b *traceBuilder) kernel(name string, stream, corr, launchTS, start, dur int64) {
	b.launch("cudaLaunchKernel", corr, corr, launchTS, 3_000)
	b.gpu("kernel", name, stream, corr, corr, start, dur)
}

func (b *traceBuilder) bytes() []byte {
	var w bytes.Buffer
	fmt.Fprintf(&w, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85000000000}],\n")
	fmt.Fprintf(&w, "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": 2},\n  \"vllm_version\": \"0.30.0\",\n", b.rank)
	fmt.Fprintf(&w, "  \"record_shapes\": 0,\n  \"with_stack\": 0,\n  \"baseTimeNanoseconds\": %d,\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n", b.base)
	fmt.Fprintf(&w, "  {\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0.000, \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"python3\"}},\n", cpuPID)
	for i, e := range b.events {
		w.WriteString("  ")
		w.WriteString(e)
		if i < len(b.events)-1 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
	}
	w.WriteString("  ],\n  \"traceName\": \"rank0.1767225600.pt.trace.json\"\n}\n")
	return w.Bytes()
}

func (b *traceBuilder) write(t testing.TB, name string, gz bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	data := b.bytes()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(data)
		zw.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// imported is the records of one import, sorted by type.
type imported struct {
	sum   Summary
	its   []*artifact.Iteration
	refs  []*artifact.ActivityRef
	caps  []*artifact.Capabilities
	order []string
}

func importPath(t testing.TB, path string, opts Options) (imported, error) {
	t.Helper()
	var out imported
	var err error
	out.sum, err = ImportFile(context.Background(), path, opts, func(r artifact.Record) error {
		out.order = append(out.order, r.RecordKind().EventType)
		switch v := r.(type) {
		case *artifact.Iteration:
			out.its = append(out.its, v)
		case *artifact.ActivityRef:
			out.refs = append(out.refs, v)
		case *artifact.Capabilities:
			out.caps = append(out.caps, v)
		default:
			t.Fatalf("unexpected record %T", r)
		}
		return nil
	})
	return out, err
}

func mustImport(t testing.TB, b *traceBuilder, opts Options) imported {
	t.Helper()
	out, err := importPath(t, b.write(t, "rank0.1.pt.trace.json", false), opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refByCorr returns the activity ref whose cuda correlation is corr.
func (im imported) refByCorr(t *testing.T, corr int64) *artifact.ActivityRef {
	t.Helper()
	for _, r := range im.refs {
		if r.CUDACorrelationID != nil && *r.CUDACorrelationID == corr {
			return r
		}
	}
	t.Fatalf("no activity ref with correlation %d among %d", corr, len(im.refs))
	return nil
}

func names(refs []*artifact.ActivityRef) string {
	var s []string
	for _, r := range refs {
		s = append(s, r.ActivityRef)
	}
	return strings.Join(s, "\n")
}
