package kineto

import (
	"bytes"
)

// Activity kinds (activity.kind) and their artifact names.
const (
	kindKernel uint8 = iota
	kindMemcpy
	kindMemset
)

var kindNames = [...]string{"kernel", "gpu_memcpy", "gpu_memset"}

// Bits of activity.flags and launch.flags.
const (
	flagCorr  uint8 = 1 << iota // the event carried args.correlation
	flagNCCL                    // a communication kernel (name containing "nccl")
	flagGraph                   // a CUDA-graph launch (cudaGraphLaunch, cuGraphLaunch)
)

// activity is one GPU activity (kernel, memcpy, memset), 48 bytes. Times are ns relative
// to baseTimeNanoseconds; thread indexes the event's (pid, tid) (device and stream on the
// GPU rows), the position its flow end is bound to.
type activity struct {
	start, end     int64
	corr           int64
	thread         int32
	name           uint32
	device, stream int32
	launch         int32 // index in collector.launches, -1 when none was found
	kind, flags    uint8
	scope          uint8 // scopeNone, scopeFlow, scopeCorrelation
}

// launch is one CPU runtime or driver call (cuda_runtime, cuda_driver), 40 bytes: its
// start, correlation, position key (posKey of its pid, tid, ts) and (pid, tid) index.
type launch struct {
	ts     int64
	corr   int64
	key    uint64
	thread int32
	name   uint32
	step   int32 // index in the steps; stepUnset, stepAmbiguous or stepOutside
	flags  uint8
}

const (
	stepUnset int32 = -1 - iota
	stepOutside
	stepAmbiguous
)

// flow is one end of an ac2g flow: its id and the hash of the (pid, tid, ts) of the event it
// is bound to (the launch for a start, the GPU activity for an end).
type flow struct {
	id  int64
	key uint64
}

// annotation is one iteration range: a user_annotation (CPU, on one thread) or a
// gpu_user_annotation (GPU).
type annotation struct {
	start, end int64
	pid, tid   int64
	step       stepName
}

// collector keeps the compact form of the events a trace's attribution needs, in blocks
// so that growing never copies what is stored.
type collector struct {
	acts        blocks[activity]
	launches    blocks[launch]
	flowStarts  blocks[flow]
	flowEnds    blocks[flow]
	cpuRanges   []annotation
	gpuRanges   []annotation
	names       map[string]uint32
	nameList    []string
	threads     map[[2]int64]int32
	threadList  [][2]int64
	skippedNoTS int64
}

func newCollector() *collector {
	return &collector{names: map[string]uint32{}, threads: map[[2]int64]int32{}}
}

// thread returns the index of a (pid, tid) pair, adding it when new.
func (c *collector) thread(pid, tid int64) int32 {
	k := [2]int64{pid, tid}
	if i, ok := c.threads[k]; ok {
		return i
	}
	i := int32(len(c.threadList))
	c.threads[k] = i
	c.threadList = append(c.threadList, k)
	return i
}

// posOf is the position key of an event on thread th at ts.
func (c *collector) posOf(th int32, ts int64) uint64 {
	t := c.threadList[th]
	return posKey(t[0], t[1], ts)
}

var (
	catKernel   = []byte("kernel")
	catMemcpy   = []byte("gpu_memcpy")
	catMemset   = []byte("gpu_memset")
	catRuntime  = []byte("cuda_runtime")
	catDriver   = []byte("cuda_driver")
	catUser     = []byte("user_annotation")
	catGPUUser  = []byte("gpu_user_annotation")
	catAC2G     = []byte("ac2g")
	nccl        = []byte("nccl")
	graphLaunch = []byte("GraphLaunch")
)

// add keeps what ev contributes.
func (c *collector) add(ev *event) error {
	if ev.has&hasTS == 0 {
		if ev.ph == 'X' || ev.ph == 's' || ev.ph == 'f' {
			c.skippedNoTS++
		}
		return nil
	}
	switch ev.ph {
	case 'X':
		c.addComplete(ev)
	case 's', 'f':
		if bytes.Equal(ev.cat, catAC2G) && ev.has&hasID != 0 {
			f := flow{id: ev.id, key: posKey(ev.pid, ev.tid, ev.ts)}
			if ev.ph == 's' {
				c.flowStarts.add(f)
			} else {
				c.flowEnds.add(f)
			}
		}
	}
	return nil
}

func (c *collector) addComplete(ev *event) {
	dur := max(ev.dur, 0)
	switch {
	case bytes.Equal(ev.cat, catKernel), bytes.Equal(ev.cat, catMemcpy), bytes.Equal(ev.cat, catMemset):
		a := activity{start: ev.ts, end: ev.ts + dur, corr: ev.corr, thread: c.thread(ev.pid, ev.tid),
			device: int32(ev.pid), stream: int32(ev.tid), launch: -1}
		if ev.has&hasDevice != 0 {
			a.device = int32(ev.device)
		}
		if ev.has&hasStream != 0 {
			a.stream = int32(ev.stream)
		}
		switch ev.cat[len(ev.cat)-1] {
		case 'l':
			a.kind = kindKernel
			if containsFold(ev.name, nccl) {
				a.flags |= flagNCCL
			}
		case 'y':
			a.kind = kindMemcpy
		default:
			a.kind = kindMemset
		}
		if ev.has&hasCorr != 0 {
			a.flags |= flagCorr
		}
		a.name = c.intern(ev.name, ev.nameEsc)
		c.acts.add(a)
	case bytes.Equal(ev.cat, catRuntime), bytes.Equal(ev.cat, catDriver):
		l := launch{ts: ev.ts, corr: ev.corr, key: posKey(ev.pid, ev.tid, ev.ts), thread: c.thread(ev.pid, ev.tid), step: stepUnset}
		if ev.has&hasCorr != 0 {
			l.flags |= flagCorr
		}
		if bytes.Contains(ev.name, graphLaunch) {
			l.flags |= flagGraph
		}
		l.name = c.intern(ev.name, ev.nameEsc)
		c.launches.add(l)
	case bytes.Equal(ev.cat, catUser), bytes.Equal(ev.cat, catGPUUser):
		sn, ok := parseStepName(ev.name, ev.nameEsc)
		if !ok {
			return
		}
		a := annotation{start: ev.ts, end: ev.ts + dur, pid: ev.pid, tid: ev.tid, step: sn}
		if len(ev.cat) == len(catUser) {
			c.cpuRanges = append(c.cpuRanges, a)
		} else {
			c.gpuRanges = append(c.gpuRanges, a)
		}
	}
}

// intern returns the index of a name, storing each distinct name once (kernel names
// repeat: a trace has thousands of distinct names for millions of kernels).
func (c *collector) intern(raw []byte, esc bool) uint32 {
	if i, ok := c.names[string(raw)]; ok {
		return i
	}
	i := uint32(len(c.nameList))
	s := unquote(raw, esc)
	c.names[string(raw)] = i
	c.nameList = append(c.nameList, s)
	return i
}

// containsFold reports whether s contains the lower-case ASCII word sub, ignoring case.
func containsFold(s, sub []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && (s[i+j]|0x20) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// posKey hashes an event position (pid, tid, ts): the key flows are bound by.
func posKey(pid, tid, ts int64) uint64 {
	h := uint64(pid)*0x9e3779b97f4a7c15 ^ uint64(tid)*0xc2b2ae3d27d4eb4f ^ uint64(ts)*0x165667b19e3779f9
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return h
}

const blockShift = 15

// blocks is an append-only list stored in fixed blocks of 32,768 elements.
type blocks[T any] struct {
	b [][]T
	n int
}

// The first block starts small and grows by append (a small trace stays small); later
// blocks are allocated whole.
func (c *blocks[T]) add(v T) {
	if c.n&(1<<blockShift-1) == 0 {
		size := 1 << blockShift
		if c.n == 0 {
			size = 64
		}
		c.b = append(c.b, make([]T, 0, size))
	}
	last := &c.b[len(c.b)-1]
	*last = append(*last, v)
	c.n++
}

func (c *blocks[T]) at(i int32) *T { return &c.b[i>>blockShift][i&(1<<blockShift-1)] }

func (c *blocks[T]) len() int { return c.n }

// blockSort sorts a blocks list in place by less.
type blockSort[T any] struct {
	b    *blocks[T]
	less func(x, y *T) bool
}

func (s blockSort[T]) Len() int           { return s.b.n }
func (s blockSort[T]) Less(i, j int) bool { return s.less(s.b.at(int32(i)), s.b.at(int32(j))) }
func (s blockSort[T]) Swap(i, j int) {
	x, y := s.b.at(int32(i)), s.b.at(int32(j))
	*x, *y = *y, *x
}

// bitset is a set of small non-negative integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

// add adds i and reports whether it was new.
func (b bitset) add(i int32) bool {
	w, m := i>>6, uint64(1)<<(i&63)
	if b[w]&m != 0 {
		return false
	}
	b[w] |= m
	return true
}
