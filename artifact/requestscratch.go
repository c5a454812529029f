package artifact

// requestScratch is the memory one Reader with ReuseRequests set decodes every infer.request
// v1 line into: one Request, and the bytes of its strings, the targets of its pointers and
// its chunk gaps, all overwritten by the next line. A reader that copies what it keeps (as
// the analysis' packer does) then decodes a million requests without a million requests'
// garbage. Its slabs hold more values than a Request has fields of each kind, so only a line
// with repeated keys makes the decoder allocate.
type requestScratch struct {
	dec    reqDecoder
	req    Request
	text   []byte
	ints   []int64
	floats []float64
	bools  []bool
	strs   []string
	gaps   []float64
}

func newRequestScratch() *requestScratch {
	return &requestScratch{
		text:   make([]byte, 0, 1024),
		ints:   make([]int64, 0, 32),
		floats: make([]float64, 0, 16),
		bools:  make([]bool, 0, 4),
		strs:   make([]string, 0, 16),
		gaps:   make([]float64, 0, 64),
	}
}

// decode decodes an infer.request v1 line into the scratch Request and returns it, or nil
// when the fast decoder does not take the line (the caller then decodes it with
// encoding/json, into memory of its own).
func (sc *requestScratch) decode(text []byte) *Request {
	sc.req = Request{}
	if decodeRequestFastIn(text, &sc.req, sc) {
		return &sc.req
	}
	sc.req = Request{}
	return nil
}
