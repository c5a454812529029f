package client

import (
	"net"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// tracer records connection phases. Its callbacks run on transport goroutines, so fields are
// atomic; times are nanoseconds since start (0 = not yet).
type tracer struct {
	start     time.Time
	connected atomic.Bool
	reused    atomic.Bool
	wrote     atomic.Bool
	gotConn   atomic.Int64
	wroteAt   atomic.Int64
	firstByte atomic.Int64
	conn      atomic.Value // connRef: the attempt's connection
}

// connRef holds a connection in an atomic.Value (whose stored type must never change).
type connRef struct{ c net.Conn }

// arrived returns the kernel receive time of the newest data read on the call's connection
// when that is known (Linux, SO_TIMESTAMPNS), not before the call started and not after
// now; otherwise now. The time is placed on the call's monotonic clock as start plus the
// wall-clock difference, so that equal kernel timestamps give equal times.
func (t *tracer) arrived(now time.Time) (time.Time, bool) {
	ref, _ := t.conn.Load().(connRef)
	if ref.c == nil {
		return now, false
	}
	rx, start := lastRx(ref.c), t.start.UnixNano()
	if rx == 0 || rx < start || rx > now.UnixNano() {
		return now, false
	}
	return t.start.Add(time.Duration(rx - start)), true
}

func (t *tracer) since() int64 { return max(int64(time.Since(t.start)), 1) }

func (t *tracer) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) {
			// A new attempt (the transport may retry on another connection): phases restart.
			t.connected.Store(false)
			t.wrote.Store(false)
		},
		GotConn: func(info httptrace.GotConnInfo) {
			t.conn.Store(connRef{info.Conn})
			t.reused.Store(info.Reused)
			t.gotConn.Store(t.since())
			t.connected.Store(true)
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				t.wroteAt.Store(t.since())
				t.wrote.Store(true)
			}
		},
		GotFirstResponseByte: func() {
			// The first byte's read has completed: its arrival time, like every event's.
			at, _ := t.arrived(time.Now())
			t.firstByte.Store(max(int64(at.Sub(t.start)), 1))
		},
	}
}

func (t *tracer) at(v *atomic.Int64) time.Time {
	if n := v.Load(); n > 0 {
		return t.start.Add(time.Duration(n))
	}
	return time.Time{}
}

// fill copies the trace into r.
func (t *tracer) fill(r *Result) {
	r.Connected, r.WroteRequest, r.ConnReused = t.connected.Load(), t.wrote.Load(), t.reused.Load()
	r.GotConn, r.WroteAt, r.FirstByte = t.at(&t.gotConn), t.at(&t.wroteAt), t.at(&t.firstByte)
}
