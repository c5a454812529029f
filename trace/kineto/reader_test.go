package kineto

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/inferprobe/inferprobe/artifact"
)

// eventDigest lists what readDoc handed out, for comparing two reads.
func eventDigest(t *testing.T, data []byte, oneByte bool, maxValue int) ([]string, docInfo, error) {
	t.Helper()
	var out []string
	r := bytes.NewReader(data)
	var in = iotestReader(r, oneByte)
	info, err := readDoc(in, maxValue, func(ev *event) error {
		out = append(out, fmt.Sprintf("%c|%s|%s|%d|%d|%d|%d|%d|%d|%x", ev.ph, ev.cat, ev.name, ev.pid, ev.tid, ev.ts, ev.dur, ev.id, ev.corr, ev.has))
		return nil
	})
	return out, info, err
}

func iotestReader(r *bytes.Reader, oneByte bool) interface{ Read([]byte) (int, error) } {
	if oneByte {
		return iotest.OneByteReader(r)
	}
	return r
}

// TestReadBoundaries: a read one byte at a time (every value crosses a buffer end) hands
// out the same events as a read of the whole file; the top-level fields are kept.
func TestReadBoundaries(t *testing.T) {
	data := twoSteps().bytes()
	whole, info, err := eventDigest(t, data, false, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	bytewise, info2, err := eventDigest(t, data, true, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(whole, bytewise) || info != info2 {
		t.Fatalf("reads differ:\n%v\n%v", whole, bytewise)
	}
	if !info.hasBase || info.baseTimeNS != base0 || !info.hasRank || info.rank != 0 || info.events != int64(len(whole)) {
		t.Errorf("info %+v", info)
	}
	if want := "X|kernel|ampere_bf16_s16816gemm|0|7|100000|200000|0|1|"; !strings.HasPrefix(whole[5], want) {
		t.Errorf("event 5 = %s, want prefix %s", whole[5], want)
	}
}

// TestTruncatedOffsets: a file cut at any byte before its closing brace fails with the
// cut's offset.
func TestTruncatedOffsets(t *testing.T) {
	data := twoSteps().bytes()
	last := bytes.LastIndexByte(data, '}')
	for cut := 0; cut <= last; cut += 1 + cut/50 {
		_, _, err := eventDigest(t, data[:cut], false, 1<<20)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != int64(cut) || !strings.Contains(se.Msg, "cut short") {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	path := filepath.Join(t.TempDir(), "rank0.cut.pt.trace.json")
	os.WriteFile(path, data[:1000], 0o644)
	_, err := importPath(t, path, Options{})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "at byte 1000 (decompressed)") {
		t.Fatalf("import of a cut file: %v", err)
	}
}

// TestMalformed: each malformed document fails at the offset of its first bad byte.
func TestMalformed(t *testing.T) {
	cases := []struct{ doc, at string }{
		{`{"traceEvents":[{"ph":"X","ts":1.0,,"dur":2}]}`, `,"dur"`},
		{`{"traceEvents":[{"ph":"X" "ts":1}]}`, `"ts"`},
		{`{"traceEvents":[{"ph":"X","ts":01}]}`, `01`},
		{`{"traceEvents":[{"name":"a` + "\x01" + `"}]}`, "\x01"},
		{`{"traceEvents":[{"name":"\q"}]}`, `\q`},
		{`{"traceEvents":[] "x":1}`, `"x"`},
		{`{"traceEvents":[]} trailing`, `trailing`},
		{`{"traceEvents":{"a":1}}`, `{"a"`},
		{`{"a":tru}`, `tru}`},
		{`[1]`, `[1]`},
		{`{"traceEvents":[{"args":{"correlation":1 "x":2}}]}`, `"x"`},
	}
	for _, c := range cases {
		_, _, err := eventDigest(t, []byte(c.doc), false, 1<<20)
		var se *SyntaxError
		want := int64(strings.Index(c.doc, c.at))
		if !errors.As(err, &se) || se.Offset != want {
			t.Errorf("%s: %v, want offset %d", c.doc, err, want)
		}
	}
	deep := `{"x":` + strings.Repeat("[", maxDepth+5) + strings.Repeat("]", maxDepth+5) + `}`
	if _, _, err := eventDigest(t, []byte(deep), false, 1<<20); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
	big := `{"traceEvents":[{"name":"` + strings.Repeat("a", 3<<20) + `"}]}`
	if _, _, err := eventDigest(t, []byte(big), false, 2<<20); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("event over the limit: %v", err)
	}
	if _, _, err := eventDigest(t, []byte(big), false, 8<<20); err != nil {
		t.Errorf("event under the limit: %v", err)
	}
}

// TestGzip: a gzip trace gives the records of the plain one; a cut gzip fails naming the
// decompressed offset; a gzip bomb is stopped at the decompressed-size limit.
func TestGzip(t *testing.T) {
	b := twoSteps()
	plain, err := importPath(t, b.write(t, "rank0.1.pt.trace.json", false), Options{})
	if err != nil {
		t.Fatal(err)
	}
	gzPath := b.write(t, "rank0.1.pt.trace.json.gz", true)
	gz, err := importPath(t, gzPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gz.its) != 2 || gz.its[0].GPUBusyNS != plain.its[0].GPUBusyNS || len(gz.refs) != len(plain.refs) ||
		gz.sum.DecompressedBytes != int64(len(b.bytes())) {
		t.Errorf("gzip import differs: %+v vs %+v", gz.sum, plain.sum)
	}
	raw, _ := os.ReadFile(gzPath)
	cut := filepath.Join(t.TempDir(), "cut.json.gz")
	os.WriteFile(cut, raw[:len(raw)/2], 0o644)
	if _, err := importPath(t, cut, Options{}); err == nil || !strings.Contains(err.Error(), "decompressed") {
		t.Errorf("cut gzip: %v", err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(`{"traceEvents":[`))
	zw.Write(bytes.Repeat([]byte(" "), 16<<20))
	zw.Close()
	bomb := filepath.Join(t.TempDir(), "bomb.json.gz")
	os.WriteFile(bomb, z.Bytes(), 0o644)
	_, err = importPath(t, bomb, Options{MaxDecompressedBytes: 1 << 20})
	if !errors.Is(err, ErrDecompressedLimit) || !strings.Contains(err.Error(), bomb) {
		t.Errorf("bomb (%d bytes compressed): %v", z.Len(), err)
	}
}

// TestLimitsAndReimport: a file over MaxBytes is registered only; a file already imported
// (same path, size, digest) is skipped; one changed since is imported again.
func TestLimitsAndReimport(t *testing.T) {
	path := twoSteps().write(t, "rank0.1.pt.trace.json", false)
	over, err := importPath(t, path, Options{MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if over.sum.Status != StatusOverMaxBytes || len(over.caps) != 1 || len(over.its)+len(over.refs) != 0 || over.caps[0].Available {
		t.Fatalf("over max bytes: %+v", over)
	}
	first, err := importPath(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := importPath(t, path, Options{Imported: []FileKey{first.sum.FileKey}})
	if err != nil || again.sum.Status != StatusAlreadyImported || len(again.order) != 0 {
		t.Fatalf("re-import: %v %+v", err, again)
	}
	stale := first.sum.FileKey
	stale.SHA256, stale.Content = strings.Repeat("0", 64), "1:00000000" // a changed file: another digest and content
	if again, _ := importPath(t, path, Options{Imported: []FileKey{stale}}); again.sum.Status != StatusImported {
		t.Fatalf("changed file skipped: %+v", again.sum)
	}
	// The same trace gzipped under another name is the same content: skipped, naming the first.
	gz := twoSteps().write(t, "rank0.copy.pt.trace.json.gz", true)
	if dup, err := importPath(t, gz, Options{Imported: []FileKey{first.sum.FileKey}}); err != nil || dup.sum.Status != StatusAlreadyImported ||
		dup.sum.SameAs != path || len(dup.order) != 0 || !strings.Contains(dup.sum.String(), "already imported (the same trace as "+path+")") {
		t.Fatalf("renamed, recompressed copy: %v %+v", err, dup.sum)
	}
	// The capabilities record's summary survives the artifact and names the file.
	art := filepath.Join(t.TempDir(), "a.jsonl")
	w, _ := artifact.NewWriter(art)
	first.caps[0].Context.RunID = "run-1"
	w.Write(first.caps[0])
	w.Close()
	a, err := artifact.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if got := ImportedFiles(a.Capabilities, "run-1"); !reflect.DeepEqual(got, []FileKey{first.sum.FileKey}) {
		t.Errorf("imported files %+v, want %+v", got, first.sum.FileKey)
	}
	if got := ImportedFiles(a.Capabilities, "run-2"); len(got) != 0 {
		t.Errorf("another run's files: %+v", got)
	}
}

func TestImportCancelled(t *testing.T) {
	b := newTrace()
	for i := range int64(70_000) {
		b.gpu("kernel", "k", 7, i, 0, i*10, 5)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := b.write(t, "rank0.json", false)
	if _, err := ImportFile(ctx, path, Options{}, func(artifact.Record) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled import: %v", err)
	}
}
