package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// bomb is one element-bomb shape sent to the receiver: copies bodies at
// once, each with the headers of gz.
type bomb struct {
	name   string
	body   []byte
	gz     bool
	json   bool
	copies int
}

// bombs are the element bombs of the receiver's threat model, over OTLP/HTTP: a gzip body
// inflating to 19 MiB of empty ResourceSpans (alone and four at once), a gzip body of empty
// ResourceSpans just under the 16 MiB decompressed limit, a plain 21 MiB body of them, kvlist
// values nested 5,000 levels, and a span with 2 million attributes.
func bombs() []bomb {
	empty := func(n int) []byte { return bytes.Repeat([]byte{0x0a, 0x00}, n) }
	gz19 := gzipBytes(empty(19 << 19))
	kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "a")
	attr := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv)
	return []bomb{
		{name: "gzip 19 MiB of empty ResourceSpans", body: gz19, gz: true, copies: 1},
		{name: "four of them at once", body: gz19, gz: true, copies: 4},
		{name: "gzip just under 16 MiB of empty ResourceSpans", body: gzipBytes(empty((16<<20 - 2) / 2)), gz: true, copies: 1},
		{name: "plain 21 MiB of empty ResourceSpans", body: empty(21 << 19), copies: 1},
		{name: "kvlist nested 5,000 levels", body: nestedKVList(5000), copies: 1},
		{name: "one span with 2,000,000 attributes", body: wrapSpan(bytes.Repeat(attr, 2_000_000)), copies: 1},
		{name: "JSON nested 100,000 brackets", body: []byte(`{"resourceSpans":[` + strings.Repeat(`{"a":[`, 50000) + strings.Repeat(`]}`, 50000) + `]}`), json: true, copies: 1},
	}
}

// runBombs sends every bomb to a fresh child receiver, printing each answer and the child's
// peak RSS, then one real export (which must be accepted). It fails when a bomb is accepted,
// when the real export is not, or when the child's RSS reaches cfg.maxRSSMiB.
func runBombs(cfg config) error {
	t, stop, err := startChild(cfg)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("receiver pid %d, GOMAXPROCS=%d; RSS before the bombs %.1f MiB\n", t.pid, cfg.procs, float64(rssKiB(t.pid, "VmRSS"))/1024)
	var failed []string
	var mu sync.Mutex // guards failed
	for _, b := range bombs() {
		stopSampling := sampleRSS(t.pid)
		codes := make([]string, b.copies)
		var wg sync.WaitGroup
		for i := 0; i < b.copies; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, err := sendBomb(t.client, t.url, b)
				codes[i] = fmt.Sprint(code)
				if err != nil {
					codes[i] = err.Error()
				}
				if code == 200 {
					mu.Lock()
					failed = append(failed, b.name+" accepted")
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		peak := stopSampling()
		fmt.Printf("%-48s %9d bytes sent  answers %v  peak RSS %.1f MiB\n", b.name, len(b.body), codes, float64(peak)/1024)
	}
	code, err := send(t.client, t.url, t.payload)
	fmt.Printf("a real export of %d spans afterwards: %d %v\n", t.batch, code, err)
	if code != 200 {
		failed = append(failed, "the real export afterwards was not accepted")
	}
	hwm := rssKiB(t.pid, "VmHWM")
	fmt.Printf("receiver VmHWM over all bombs: %.1f MiB (limit %d MiB)\n", float64(hwm)/1024, cfg.maxRSSMiB)
	if hwm >= int64(cfg.maxRSSMiB)*1024 {
		failed = append(failed, fmt.Sprintf("VmHWM %d KiB reached the limit", hwm))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

func sendBomb(client *http.Client, url string, b bomb) (int, error) {
	contentType, encoding := "application/x-protobuf", ""
	if b.json {
		contentType = "application/json"
	}
	if b.gz {
		encoding = "gzip"
	}
	return post(client, url, b.body, contentType, encoding)
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// nestedKVList is one span whose attribute is a kvlist value nested levels deep.
func nestedKVList(levels int) []byte {
	value := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "leaf")
	for i := 0; i < levels; i++ {
		kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "k")
		kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), value)
		list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), kv)
		value = protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), list)
	}
	kv := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "root")
	kv = protowire.AppendBytes(protowire.AppendTag(kv, 2, protowire.BytesType), value)
	return wrapSpan(protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), kv))
}

// wrapSpan wraps span fields into Span → ScopeSpans → ResourceSpans → ExportTraceServiceRequest.
func wrapSpan(spanFields []byte) []byte {
	b := spanFields
	for _, field := range []protowire.Number{2, 2, 1} {
		b = protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), b)
	}
	return b
}
