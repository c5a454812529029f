package analyze

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// block is a run of whole lines (the last block may end without a newline).
type block struct {
	data  []byte
	final bool
	err   error // a read error met after the previous block
	res   chan blockResult
}

// blockResult is a decoded block: its records in order, its read statistics (line numbers
// local to the block) and its error.
type blockResult struct {
	items []blockItem
	stats artifact.Stats
	err   error
}

// blockItem is one record of a block: an infer.request v1 (request; packed into req when
// measured, else its join keys in warmup when it was sent), or any other record (value, with
// raw for the kinds kept as JSON when repeated: infer.artifact and infer.workload).
type blockItem struct {
	value    artifact.Record
	line     int // 1-based line within the block (records other than requests)
	raw      []byte
	kind     artifact.Kind
	request  bool
	measured bool
	sent     bool
	session  string // a request's session_id
	req      Request
	warmup   join.Request
}

// startDecoding starts the splitter and o.workers decoding goroutines (registered in wg) and
// returns the blocks in file order, each with the channel its decoded result arrives on. The
// channel is closed after the last block, or early when ctx ends.
func startDecoding(ctx context.Context, wg *sync.WaitGroup, r io.Reader, o readOptions, rc *recycler) <-chan *block {
	work := make(chan *block)
	order := make(chan *block, 2*o.workers)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(work)
		splitBlocks(ctx, r, o, rc, work, order)
	}()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := packer{keepGaps: o.keepGaps}
			rd := artifact.Reader{MaxLineBytes: o.maxLineBytes, ReuseRequests: true} // packer copies what it keeps
			for b := range work {
				if b.err != nil {
					b.res <- blockResult{err: b.err}
					continue
				}
				res := decodeBlock(rd, &p, b.data, rc.itemList())
				if res.err == nil {
					rc.release(b.data)
				}
				b.res <- res
			}
		}()
	}
	return order
}

// decodeBlock reads one block with artifact.Reader.ReadBytes, packing measured requests with p, into
// items (an empty list to append to).
func decodeBlock(rd artifact.Reader, p *packer, data []byte, items []blockItem) blockResult {
	if n := bytes.Count(data, newline) + 1; cap(items) < n {
		items = make([]blockItem, 0, n) // at most one record a line: the list never grows
	}
	st, err := rd.ReadBytes(data, func(rec artifact.Line) error {
		switch v := rec.Value.(type) {
		case *artifact.Request:
			it := blockItem{request: true, measured: v.Phase == artifact.PhaseMeasured, session: p.internAt(slotSession, v.SessionID)}
			if it.measured {
				it.req = p.request(v)
			} else {
				it.warmup, it.sent = p.joinKeys(v)
			}
			items = append(items, it)
		case *artifact.ArtifactHeader, *artifact.Workload:
			items = append(items, blockItem{value: rec.Value, line: rec.Line, kind: rec.Kind, raw: bytes.Clone(rec.Raw)})
		default:
			items = append(items, blockItem{value: rec.Value, line: rec.Line, kind: rec.Kind})
		}
		return nil
	})
	return blockResult{items: items, stats: st, err: err}
}

var newline = []byte{'\n'}

// splitBlocks cuts the file into blocks that end at a newline (the final one at EOF) and
// hands each to the workers (work) and, in file order, to the merger (order). A line longer
// than the limit is handed over as it is, so that artifact.Read reports it; so is a read
// error. Block buffers come from rc; the partial line after a block's last newline is
// copied out before the block is handed over, so a recycled buffer is never read again. It
// stops when ctx ends.
func splitBlocks(ctx context.Context, r io.Reader, o readOptions, rc *recycler, work, order chan<- *block) {
	send := func(b *block) bool {
		b.res = make(chan blockResult, 1)
		select {
		case order <- b:
		case <-ctx.Done():
			return false
		}
		select {
		case work <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var carry []byte // the partial line after the last block handed over
	for {
		// a long line grows the buffer geometrically, not by one block at a time
		buf := append(rc.buffer(len(carry)+max(o.blockBytes, len(carry))), carry...)
		n, err := io.ReadFull(r, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			send(&block{data: buf, final: true})
			return
		case err != nil:
			// the complete lines before the error are still read, then the error
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				if !send(&block{data: buf[:i+1]}) {
					return
				}
			}
			send(&block{err: err, final: true})
			return
		}
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 {
			if len(buf) > o.maxLineBytes {
				// no newline within the limit: artifact.Read reports the line as too long
				send(&block{data: buf, final: true})
				return
			}
			carry = append(carry[:0], buf...)
			rc.release(buf)
			continue
		}
		carry = append(carry[:0], buf[i+1:]...)
		if !send(&block{data: buf[:i+1]}) {
			return
		}
	}
}

// recycler keeps the buffers of blocks already decoded (their bytes) and merged (their item
// lists) for the next blocks, so that reading a file allocates a few blocks' worth of them
// instead of the file's size again. Safe for concurrent use; at most free buffers of each
// kind are kept.
type recycler struct {
	data  chan []byte
	items chan []blockItem
}

func newRecycler(free int) *recycler {
	return &recycler{data: make(chan []byte, free), items: make(chan []blockItem, free)}
}

// buffer returns an empty byte slice with a capacity of at least n. A new one gets 1/16
// more, so that a recycled block buffer still fits the next block and its carried partial
// line (a block's capacity plus a line) instead of being dropped for a slightly larger one.
func (rc *recycler) buffer(n int) []byte {
	select {
	case b := <-rc.data:
		if cap(b) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n+n/16)
}

// release hands back a block's bytes once nothing reads them any more.
func (rc *recycler) release(b []byte) {
	select {
	case rc.data <- b[:0]:
	default:
	}
}

// itemList returns an empty item list.
func (rc *recycler) itemList() []blockItem {
	select {
	case l := <-rc.items:
		return l
	default:
		return nil
	}
}

// releaseItems hands back a merged block's item list, cleared so that it holds on to none
// of the records it carried.
func (rc *recycler) releaseItems(l []blockItem) {
	clear(l)
	select {
	case rc.items <- l[:0]:
	default:
	}
}
