package kineto

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/trace/kineto/kinetogen"
)

var (
	benchOnce  sync.Once
	benchTrace []byte
)

// benchData is a 64 MiB synthetic vLLM trace (kinetogen: 40 launches per step on two
// streams, flows, a graph launch every 8 steps).
func benchData(b *testing.B) []byte {
	benchOnce.Do(func() {
		var buf bytes.Buffer
		if _, err := kinetogen.Write(&buf, kinetogen.Config{Bytes: 64 << 20, GraphEvery: 8}); err != nil {
			b.Fatal(err)
		}
		benchTrace = buf.Bytes()
	})
	return benchTrace
}

// BenchmarkImport reads, attributes and encodes a trace (launch detail) held in memory:
// MB/s of trace JSON and allocations per trace.
func BenchmarkImport(b *testing.B) {
	data := benchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c := newCollector()
		info, err := readDoc(bytes.NewReader(data), DefaultMaxEventBytes, c.add)
		if err != nil {
			b.Fatal(err)
		}
		r := &fileResult{c: c, info: info, attach: "kineto:bench:0"}
		r.attribute()
		var sum Summary
		if err := r.emitAll(Options{Detail: DetailLaunch}, &sum, func(rec artifact.Record) error {
			_, err := artifact.MarshalLine(rec)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScan is the reader alone: every event parsed, nothing kept.
func BenchmarkScan(b *testing.B) {
	data := benchData(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readDoc(bytes.NewReader(data), DefaultMaxEventBytes, func(*event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStdlibToken is the reference the hand-written reader was measured against:
// encoding/json's Decoder.Token over the same trace, doing nothing with the tokens.
func BenchmarkStdlibToken(b *testing.B) {
	data := benchData(b)[:16<<20]
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		d := json.NewDecoder(bytes.NewReader(data))
		for {
			if _, err := d.Token(); err != nil {
				if err != io.EOF && err.Error() != "unexpected EOF" {
					break
				}
				break
			}
		}
	}
}
