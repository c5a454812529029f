//go:build linux

package client

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"unsafe"

	"golang.org/x/sys/unix"
)

// rxConn is a TCP connection read with recvmsg(2) and SO_TIMESTAMPNS, so that every read
// also yields the kernel's receive timestamp of the newest segment it consumed (for TCP,
// Linux reports the timestamp of the last skb read; coalesced segments carry the newer
// one). The timestamp is when the data reached this host's network stack — before any
// scheduling delay of the goroutine that reads it — so a burst of streams becoming readable
// at once no longer queues their timestamps behind one another.
type rxConn struct {
	net.Conn
	raw syscall.RawConn
	// One reader at a time (net/http reads a connection from one goroutine): the read's
	// buffer, control buffer, message header and results live here, and recv (bound once)
	// is the function raw.Read calls, so that a read allocates nothing.
	oob  []byte
	msg  unix.Msghdr
	iov  unix.Iovec
	recv func(fd uintptr) bool
	n    int
	rerr error
	last atomic.Int64 // Unix ns of the newest segment of the latest read; 0 unknown
}

// rxTimestamps wraps a *net.TCPConn whose socket accepts SO_TIMESTAMPNS; any other conn, or
// a socket that refuses the option, is returned unchanged (timestamps then come from
// time.Now()).
func rxTimestamps(c net.Conn) net.Conn {
	primeRxTimestamps()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c
	}
	rc := &rxConn{Conn: tc, raw: raw, oob: make([]byte, unix.CmsgSpace(16))}
	rc.recv = rc.recvmsg
	return rc
}

// primeOnce keeps one socket with SO_TIMESTAMPNS open for the life of the process. Linux
// timestamps received packets only while some socket asks for it, and turns that on through
// deferred work when the first one does: without a socket that already asked, the first
// segments of a new connection can arrive unstamped (they are then timed by time.Now()).
var primeOnce sync.Once

// primeRxTimestamps makes the kernel timestamp received packets from now on (New calls it,
// before any request).
func primeRxTimestamps() {
	primeOnce.Do(func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return
		}
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) != nil {
			_ = unix.Close(fd)
		}
		// Deliberately never closed: one descriptor for the process's lifetime.
	})
}

// Read reads like (*net.TCPConn).Read: io.EOF at the end, *net.OpError on failure.
func (c *rxConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.iov.Base = &p[0]
	c.iov.SetLen(len(p))
	c.msg.Iov = &c.iov
	c.msg.SetIovlen(1)
	c.msg.Control = &c.oob[0]
	err := c.raw.Read(c.recv)
	n, rerr, oobn := c.n, c.rerr, int(c.msg.Controllen)
	c.iov.Base, c.msg.Iov, c.msg.Control, c.rerr = nil, nil, nil, nil // p is the caller's
	if err == nil && rerr != nil {
		err = os.NewSyscallError("recvmsg", rerr)
	}
	if err != nil {
		if oe, ok := err.(*net.OpError); ok {
			err = oe.Err // raw-read's own wrapping: re-wrap as a read
		}
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n <= 0 {
		return 0, io.EOF
	}
	// A read without a timestamp makes the time unknown (time.Now() then): keeping the
	// previous read's would date these bytes too early.
	c.last.Store(rxStamp(c.oob[:min(max(oobn, 0), len(c.oob))]))
	return n, nil
}

// recvmsg is raw.Read's callback: one recvmsg(2) into c.iov with c.oob for control
// messages (what unix.Recvmsg does, without its allocations), retried on EINTR; it reports
// done unless the socket has nothing to read yet (EAGAIN: wait for readiness).
func (c *rxConn) recvmsg(fd uintptr) bool {
	for {
		c.msg.SetControllen(len(c.oob))
		c.msg.Flags = 0
		r, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.msg)), 0)
		c.n, c.rerr = int(r), nil
		if errno != 0 {
			c.n, c.rerr = 0, errno
			c.msg.Controllen = 0
		}
		if c.rerr != unix.EINTR {
			return c.rerr != unix.EAGAIN
		}
	}
}

// rxStamp returns the SCM_TIMESTAMPNS timestamp (Unix ns) among the control messages in oob,
// or 0.
func rxStamp(oob []byte) int64 {
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafePointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l-hdr >= 16 {
			d := oob[hdr:l]
			sec := int64(binary.NativeEndian.Uint64(d[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(d[8:16]))
			if sec <= 0 || sec > 1e10 || nsec < 0 || nsec >= 1e9 { // 1e10 s: year 2286
				return 0
			}
			return sec*1e9 + nsec
		}
		step := unix.CmsgSpace(l - hdr)
		if step <= 0 || step > len(oob) {
			return 0
		}
		oob = oob[step:]
	}
	return 0
}

// lastRx returns the kernel receive time (Unix ns) of the newest data read on the
// connection behind c (unwrapping TLS), or 0.
func lastRx(c net.Conn) int64 {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	if rc, ok := c.(*rxConn); ok {
		return rc.last.Load()
	}
	return 0
}
