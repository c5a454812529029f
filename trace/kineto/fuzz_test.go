package kineto

import (
	"bytes"
	"errors"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// FuzzReadTrace feeds arbitrary bytes through the reader and the attribution: no input
// panics; an input that fails does so with a *SyntaxError whose offset lies in the input;
// an input that reads gives records that encode.
func FuzzReadTrace(f *testing.F) {
	f.Add(twoSteps().bytes())
	g := newTrace()
	g.cpuRange("step[EXTEND bs=8 toks=4096]", 0, 100_000)
	g.launch("cudaGraphLaunch", 5, 5, 1_000, 100)
	g.gpu("kernel", "k", 7, 5, 5, 2_000, 10)
	g.gpu("gpu_memset", "Memset (Device)", 8, 5, 5, 2_005, 10)
	g.cpuRange("stormlog.iteration/p/1", 50, 90_000)
	f.Add(g.bytes())
	f.Add([]byte(`{"traceEvents":[{"ph":"f","id":"x","bp":"e","ts":-1e3,"cat":"ac2g"},{"ph":"X","cat":"gpu_user_annotation","name":"execute_context_1(1)_generation_0(0)","ts":1,"dur":-5}],"baseTimeNanoseconds":"7"}`))
	f.Add([]byte(`{"distributedInfo":{"rank":"3"},"traceEvents":[1,"a",null,[{}]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newCollector()
		info, err := readDoc(bytes.NewReader(data), 1<<16, c.add)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > int64(len(data)) {
				t.Fatalf("error %v (offset outside 0..%d)", err, len(data))
			}
			return
		}
		for _, detail := range []string{DetailLaunch, DetailKernel} {
			r := &fileResult{c: c, info: info, attach: "kineto:f:0"}
			r.attribute()
			var sum Summary
			err := r.emitAll(Options{Detail: detail}, &sum, func(rec artifact.Record) error {
				_, err := artifact.MarshalLine(rec)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Linked+sumOf(sum.Unresolved) != sum.Activities {
				t.Fatalf("linked %d + unresolved %v != %d activities", sum.Linked, sum.Unresolved, sum.Activities)
			}
		}
	})
}

func sumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
