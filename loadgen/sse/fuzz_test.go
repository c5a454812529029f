package sse

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// FuzzChunking checks, for any input and any way of cutting it into reads, that chunked
// feeding gives exactly what whole feeding gives (events, comment count, pending state and
// error), that byte-by-byte feeding does too, and that both agree with the reference
// transcription of the standard. A small maxLine makes the bounds reachable.
func FuzzChunking(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\ndata:b\rdata: c\n\n"), uint64(1), uint8(0))
	f.Add([]byte(": ping\n\nevent: e\nid: 1\nretry: 10\ndata: {\"x\":\"é\"}\n\n"), uint64(2), uint8(8))
	f.Add([]byte("\xEF\xBB\xBFdata: a\r"), uint64(3), uint8(3))
	f.Add([]byte("data: [DONE]\n\n"), uint64(4), uint8(0))
	f.Add([]byte("data:1234567\ndata:12345678\n\n"), uint64(5), uint8(16))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, small uint8) {
		maxLine := 0 // default
		if small != 0 {
			maxLine = int(small)
		}
		want := whole(maxLine, in)
		if ref := reference(maxLine, in); !reflect.DeepEqual(want, ref) {
			t.Fatalf("whole %v\nreference %v", want, ref)
		}
		r := rand.New(rand.NewPCG(seed, seed>>7))
		var cuts []int
		for off := 0; off < len(in); {
			off += 1 + r.IntN(8)
			if off < len(in) {
				cuts = append(cuts, off)
			}
		}
		if got := feedChunks(maxLine, in, cuts); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunked at %v: %v\nwhole %v", cuts, got, want)
		}
		if len(in) < 512 {
			if got := byteByByte(maxLine, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("byte by byte: %v\nwhole %v", got, want)
			}
		}
	})
}
