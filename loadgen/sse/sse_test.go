package sse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// got is one emitted event, copied out of the parser's buffer.
type got struct {
	Type, ID, Data string
}

// outcome is everything observable about parsing one input.
type outcome struct {
	Events   []got
	Comments int
	Pending  bool
	Err      error
}

func (o outcome) String() string {
	return fmt.Sprintf("events=%q comments=%d pending=%v err=%v", o.Events, o.Comments, o.Pending, o.Err)
}

// feedChunks feeds input split at the given cut offsets (ascending, within range).
func feedChunks(maxLine int, input []byte, cuts []int) outcome {
	p := NewParser(maxLine)
	var o outcome
	emit := func(e Event) { o.Events = append(o.Events, got{e.Type, e.ID, string(e.Data)}) }
	prev := 0
	for _, c := range append(cuts, len(input)) {
		if err := p.Feed(input[prev:c], emit); err != nil {
			o.Err = err
			break
		}
		prev = c
	}
	o.Comments, o.Pending = p.Comments(), p.Pending()
	if o.Err != nil {
		o.Pending = false
	}
	return o
}

func whole(maxLine int, input []byte) outcome { return feedChunks(maxLine, input, nil) }

func byteByByte(maxLine int, input []byte) outcome {
	cuts := make([]int, 0, len(input))
	for i := 1; i < len(input); i++ {
		cuts = append(cuts, i)
	}
	return feedChunks(maxLine, input, cuts)
}

// checkAllSplits asserts that every way of feeding input that tests can afford gives want:
// whole, byte by byte, split once at every offset, split twice at every pair of offsets
// (for short inputs), and the spec-literal reference implementation.
func checkAllSplits(t *testing.T, maxLine int, input []byte, want outcome) {
	t.Helper()
	check := func(how string, o outcome) {
		t.Helper()
		if !reflect.DeepEqual(o, want) {
			t.Fatalf("%s:\n got  %v\n want %v", how, o, want)
		}
	}
	check("reference", reference(maxLine, input))
	check("whole", whole(maxLine, input))
	check("byte by byte", byteByByte(maxLine, input))
	for i := 0; i <= len(input); i++ {
		check(fmt.Sprintf("split at %d", i), feedChunks(maxLine, input, []int{i}))
	}
	if len(input) <= 64 {
		for i := 0; i <= len(input); i++ {
			for j := i; j <= len(input); j++ {
				check(fmt.Sprintf("split at %d,%d", i, j), feedChunks(maxLine, input, []int{i, j}))
			}
		}
	}
}

func ev(data string) got                    { return got{"message", "", data} }
func evT(typ, data string) got              { return got{typ, "", data} }
func evID(id, data string) got              { return got{"message", id, data} }
func evs(g ...got) []got                    { return g }
func ok(events ...got) outcome              { return outcome{Events: events} }
func withComments(o outcome, n int) outcome { o.Comments = n; return o }

func TestFraming(t *testing.T) {
	const json1 = `{"choices":[{"delta":{"content":"héllo ✓ 😀"}}]}`
	cases := []struct {
		name  string
		input string
		want  outcome
	}{
		{"LF", "data: a\n\ndata: b\n\n", ok(ev("a"), ev("b"))},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", ok(ev("a"), ev("b"))},
		{"CR", "data: a\r\rdata: b\r\r", ok(ev("a"), ev("b"))},
		{"mixed line ends", "data: a\r\n\ndata: b\r\r\ndata: c\n\r", ok(ev("a"), ev("b"), ev("c"))},
		{"CR CR LF is two line ends", "data: a\r\r\n", ok(ev("a"))},
		{"LF CR is two line ends", "data: a\n\r", ok(ev("a"))},
		{"no space after colon", "data:a\n\ndata:{\"x\":1}\n\n", ok(ev("a"), ev(`{"x":1}`))},
		{"only one space removed", "data:  a \n\n", ok(ev(" a "))},
		{"tab is not removed", "data:\ta\n\n", ok(ev("\ta"))},
		{"multi-line data joined by LF", "data: a\ndata:b\ndata: c\n\n", ok(ev("a\nb\nc"))},
		{"multi-line data with CRLF", "data: a\r\ndata: b\r\n\r\n", ok(ev("a\nb"))},
		{"multi-line data with CR", "data: a\rdata: b\r\r", ok(ev("a\nb"))},
		{"empty data line makes an empty event", "data:\n\n", ok(ev(""))},
		{"data field without colon", "data\n\n", ok(ev(""))},
		{"data lines with empty ones", "data\ndata\n\n", ok(ev("\n"))},
		{"trailing empty data line", "data: a\ndata:\n\n", ok(ev("a\n"))},
		{"comment lines counted and ignored", ": keep-alive\n\n:\ndata: a\n: mid\n\n", withComments(ok(ev("a")), 3)},
		{"comment only stream", ":ping\n\n:ping\r\n\r\n", withComments(ok(), 2)},
		{"event field", "event: delta\ndata: a\n\ndata: b\n\n", ok(evT("delta", "a"), ev("b"))},
		{"event type reset when nothing dispatched", "event: x\n\ndata: a\n\n", ok(ev("a"))},
		{"last event field wins", "event: x\nevent: y\ndata: a\n\n", ok(evT("y", "a"))},
		{"empty event value means message", "event:\ndata: a\n\n", ok(ev("a"))},
		{"id persists across events", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", ok(evID("7", "a"), evID("7", "b"), evID("", "c"))},
		{"id set without data is kept", "id: 9\n\ndata: a\n\n", ok(evID("9", "a"))},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", ok(evID("1", "a"), evID("1", "b"))},
		{"retry field is not data", "retry: 1500\ndata: a\n\nretry: 1x\n\n", ok(ev("a"))},
		{"unknown field ignored", "foo: bar\ndata: a\nDATA: no\nData: no\n\n", ok(ev("a"))},
		{"field names are exact", " data: a\ndata : b\n\n", ok()},
		{"several events in one read", "data: 1\n\ndata: 2\n\ndata: 3\n\n", ok(ev("1"), ev("2"), ev("3"))},
		{"UTF-8 and JSON intact", "data: " + json1 + "\n\n", ok(ev(json1))},
		{"invalid UTF-8 passed through", "data: \xff\xfe\xc3\n\n", ok(ev("\xff\xfe\xc3"))},
		{"NUL in data kept", "data: a\x00b\n\n", ok(ev("a\x00b"))},
		{"BOM at start ignored", "\xEF\xBB\xBFdata: a\n\n", ok(ev("a"))},
		{"only one BOM ignored", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", ok(ev("b"))},
		{"BOM later is not special", "data: a\n\n\xEF\xBB\xBFdata: b\n\n", ok(ev("a"))},
		{"partial BOM is data of an unknown field", "\xEF\xBBdata: a\n\n", ok()},
		{"incomplete event discarded", "data: a\n\ndata: b\n", outcome{Events: evs(ev("a")), Pending: true}},
		{"incomplete line discarded", "data: a\n\ndata: b", outcome{Events: evs(ev("a")), Pending: true}},
		{"trailing CR ends the event", "data: a\r\r", ok(ev("a"))},
		{"done sentinel", "data: {\"x\":1}\n\ndata: [DONE]\n\n", ok(ev(`{"x":1}`), ev("[DONE]"))},
		{"empty input", "", ok()},
		{"blank lines only", "\n\r\n\r\n\n", ok()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAllSplits(t, 1024, []byte(tc.input), tc.want)
		})
	}
}

func TestCRAtEndOfReadThenLF(t *testing.T) {
	// The CRLF pair is split across two reads: it must count as one line end, so one event
	// ends at the second CRLF, not two.
	p := NewParser(0)
	var n int
	emit := func(Event) { n++ }
	for _, part := range []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"} {
		if err := p.Feed([]byte(part), emit); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("events = %d, want 1", n)
	}
	if p.Pending() {
		t.Fatal("pending after a complete event")
	}
}

func TestEmitTimingIsPerRead(t *testing.T) {
	// An event is emitted during the Feed call that delivers its terminating blank line, not
	// later: the client times each event by the read that completed it.
	p := NewParser(0)
	var at []int
	parts := []string{"data: a\n", "\n", "data: b\r", "\r", "data: c\r\n", "\r", "\n"}
	for i, part := range parts {
		if err := p.Feed([]byte(part), func(Event) { at = append(at, i) }); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{1, 3, 5}; !reflect.DeepEqual(at, want) {
		t.Fatalf("emitted during reads %v, want %v", at, want)
	}
}

func TestLineTooLong(t *testing.T) {
	long := strings.Repeat("x", 20)
	cases := []struct {
		name, input string
		want        outcome
	}{
		{"terminated long line", "data: a\n\ndata: " + long + "\n\n", outcome{Events: evs(ev("a")), Err: ErrLineTooLong}},
		{"unterminated long line", "data: a\n\ndata: " + long, outcome{Events: evs(ev("a")), Err: ErrLineTooLong}},
		{"long comment", ":" + long + "\n", outcome{Err: ErrLineTooLong}},
		{"exactly at limit", "data:" + long[:11] + "\n\n", ok(ev(long[:11]))},
		{"one over limit", "data:" + long[:12] + "\n\n", outcome{Err: ErrLineTooLong}},
		{"event data too long", "data:123456\ndata:123456\ndata:123456\n\n", outcome{Err: ErrEventTooLong}},
		{"event data at limit", "data:1234567\ndata:12345678\n\n", ok(ev("1234567\n12345678"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkAllSplits(t, 16, []byte(tc.input), tc.want)
		})
	}
}

func TestErrorIsStickyAndBufferBounded(t *testing.T) {
	p := NewParser(1 << 10)
	chunk := bytes.Repeat([]byte("y"), 100)
	var err error
	fed := 0
	for i := 0; i < 1000 && err == nil; i++ {
		err = p.Feed(chunk, func(Event) { t.Fatal("no event expected") })
		fed += len(chunk)
	}
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	if fed > 1<<10+len(chunk) {
		t.Fatalf("error only after %d bytes", fed)
	}
	if cap(p.line) > 1<<10 {
		t.Fatalf("buffered %d bytes", cap(p.line))
	}
	if err := p.Feed([]byte("data: a\n\n"), func(Event) { t.Fatal("emitted after error") }); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("second Feed err = %v", err)
	}
	p.Reset()
	n := 0
	if err := p.Feed([]byte("data: a\n\n"), func(Event) { n++ }); err != nil || n != 1 {
		t.Fatalf("after Reset: err=%v events=%d", err, n)
	}
}

func TestSixteenMiBLine(t *testing.T) {
	// The default bound: a 16 MiB line passes, one byte more is ErrLineTooLong. The line
	// arrives in 64 KiB reads, as from a socket.
	piece := bytes.Repeat([]byte("z"), 1<<16)
	feedLine := func(p *Parser, extra int, emit func(Event)) error {
		if err := p.Feed([]byte("data:"), emit); err != nil {
			return err
		}
		left := DefaultMaxLine - len("data:") + extra
		for left > 0 {
			n := min(left, len(piece))
			if err := p.Feed(piece[:n], emit); err != nil {
				return err
			}
			left -= n
		}
		return p.Feed([]byte("\n\n"), emit)
	}
	p := NewParser(0)
	n := 0
	err := feedLine(p, 0, func(e Event) {
		n++
		if len(e.Data) != DefaultMaxLine-len("data:") || e.Data[0] != 'z' {
			t.Fatalf("data length %d", len(e.Data))
		}
	})
	if err != nil || n != 1 {
		t.Fatalf("err %v, events %d", err, n)
	}
	if cap(p.line) > retainLimit || cap(p.data) > retainLimit {
		t.Fatalf("kept big buffers: line %d data %d", cap(p.line), cap(p.data))
	}
	p.Reset()
	if err := feedLine(p, 1, func(Event) { t.Fatal("emitted") }); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v", err)
	}
	if cap(p.line) != 0 {
		t.Fatal("buffer kept after the error")
	}
}

func TestRetry(t *testing.T) {
	p := NewParser(0)
	if _, ok := p.Retry(); ok {
		t.Fatal("retry before any field")
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"retry: 1500\n", 1500, true},
		{"retry: 15x\n", 1500, true}, // invalid: ignored, previous kept
		{"retry:\n", 1500, true},
		{"retry: 99999999999999999999999\n", 1<<63 - 1, true},
		{"retry: 0\n", 0, true},
	} {
		if err := p.Feed([]byte(tc.in), func(Event) {}); err != nil {
			t.Fatal(err)
		}
		if got, ok := p.Retry(); got != tc.want || ok != tc.ok {
			t.Fatalf("%q: retry %d %v, want %d %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEventsCounter(t *testing.T) {
	p := NewParser(0)
	_ = p.Feed([]byte("data: a\n\n:c\n\ndata: b\n\n"), func(Event) {})
	if p.Events() != 2 || p.Comments() != 1 {
		t.Fatalf("events %d comments %d", p.Events(), p.Comments())
	}
}

// fixture reads a captured stream of a real OpenAI-compatible server (Ollama v0.17.4,
// taken with curl -N), copied into testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOllamaFixtures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		events int
	}{
		{"ollama-stream.body.sse", 18},
		{"ollama-stream-usage.body.sse", 19},
		{"ollama-stream-stop.body.sse", 6},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := fixture(t, tc.file)
			w := whole(0, in)
			if w.Err != nil || w.Pending || w.Comments != 0 {
				t.Fatalf("whole: %v", w)
			}
			if len(w.Events) != tc.events {
				t.Fatalf("events %d, want %d", len(w.Events), tc.events)
			}
			// Every event is exactly the text after "data: " on each data line.
			var lines []string
			for _, l := range strings.Split(string(in), "\n") {
				if s, ok := strings.CutPrefix(l, "data: "); ok {
					lines = append(lines, s)
				}
			}
			for i, e := range w.Events {
				if e.Type != "message" || e.ID != "" || e.Data != lines[i] {
					t.Fatalf("event %d = %+v, want data %q", i, e, lines[i])
				}
			}
			if w.Events[len(w.Events)-1].Data != "[DONE]" {
				t.Fatal("last event is not [DONE]")
			}
			checkAllSplits(t, 0, in, w)
			// The same stream with CRLF and with CR line ends parses identically.
			crlf := bytes.ReplaceAll(in, []byte("\n"), []byte("\r\n"))
			checkAllSplits(t, 0, crlf, w)
			cr := bytes.ReplaceAll(in, []byte("\n"), []byte("\r"))
			checkAllSplits(t, 0, cr, w)
		})
	}
}

func TestRandomSplitsOfFixtures(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"ollama-stream.body.sse", "ollama-stream-usage.body.sse"} {
		in := fixture(t, name)
		want := whole(0, in)
		for range 500 {
			got := feedChunks(0, in, randomCuts(r, len(in)))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: random split differs:\n%v\n%v", name, got, want)
			}
		}
	}
}

func randomCuts(r *rand.Rand, n int) []int {
	var cuts []int
	for off := 0; off < n; {
		off += 1 + r.IntN(64)
		if off < n {
			cuts = append(cuts, off)
		}
	}
	return cuts
}

func TestFeedAllocations(t *testing.T) {
	in := fixture(t, "ollama-stream-usage.body.sse")
	p := NewParser(0)
	emit := func(Event) {}
	_ = p.Feed(in, emit) // warm the buffers
	allocs := testing.AllocsPerRun(50, func() {
		p.Reset()
		for off := 0; off < len(in); off += 97 {
			_ = p.Feed(in[off:min(off+97, len(in))], emit)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per stream, want 0", allocs)
	}
}

func BenchmarkFeed(b *testing.B) {
	in := fixture(b, "ollama-stream-usage.body.sse")
	p := NewParser(0)
	events := 0
	emit := func(Event) { events++ }
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		p.Reset()
		// 512-byte reads: events straddle reads, as on a real socket.
		for off := 0; off < len(in); off += 512 {
			_ = p.Feed(in[off:min(off+512, len(in))], emit)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
