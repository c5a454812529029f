//go:build linux

package client

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns a connected client (wrapped by rxTimestamps) and server side.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	rc := rxTimestamps(c)
	if _, ok := rc.(*rxConn); !ok {
		t.Fatalf("rxTimestamps gave %T", rc)
	}
	t.Cleanup(func() { rc.Close(); s.Close() })
	return rc, s
}

// The timestamp of a read is when the data arrived, not when it was read.
func TestRxConnStampsArrivalNotRead(t *testing.T) {
	c, s := tcpPair(t)
	// The kernel turns packet timestamps on through deferred work when the first socket asks
	// (primeRxTimestamps): wait until an exchange comes back stamped.
	deadline := time.Now().Add(2 * time.Second)
	for lastRx(c) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no receive timestamp within 2 s of asking for them")
		}
		_, _ = s.Write([]byte("w"))
		if _, err := c.Read(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().UnixNano()
	if _, err := s.Write([]byte("data: one\n\n")); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixNano()
	time.Sleep(60 * time.Millisecond) // the reader is late
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	readAt := time.Now().UnixNano()
	if err != nil || string(buf[:n]) != "data: one\n\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	rx := lastRx(c)
	if rx < before || rx > after {
		t.Fatalf("receive time %d outside the write [%d, %d]", rx, before, after)
	}
	if readAt-rx < int64(50*time.Millisecond) {
		t.Fatalf("receive time only %v before the read", time.Duration(readAt-rx))
	}
	// A second write: the newest segment's time.
	time.Sleep(5 * time.Millisecond)
	before2 := time.Now().UnixNano()
	_, _ = s.Write([]byte("x"))
	after2 := time.Now().UnixNano()
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if rx2 := lastRx(c); rx2 < before2 || rx2 > after2 {
		t.Fatalf("second receive time %d outside [%d, %d]", rx2, before2, after2)
	}
}

func TestRxConnEOFAndClose(t *testing.T) {
	c, s := tcpPair(t)
	s.Close()
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want 0, io.EOF", n, err)
	}
	c2, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c2.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c2.Close()
	select {
	case err := <-done:
		var oe *net.OpError
		if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("read on a closed conn: %v (%T)", err, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Read")
	}
	c3, _ := tcpPair(t)
	_ = c3.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := c3.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if n, err := c3.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
}

func TestRxStampParse(t *testing.T) {
	oob := make([]byte, unix.CmsgSpace(16))
	h := (*unix.Cmsghdr)(unsafePointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
	h.SetLen(unix.CmsgLen(16))
	d := oob[unix.CmsgLen(0):]
	binary.NativeEndian.PutUint64(d[0:8], 1_795_000_000)
	binary.NativeEndian.PutUint64(d[8:16], 123)
	if got := rxStamp(oob); got != 1_795_000_000*1e9+123 {
		t.Fatalf("rxStamp = %d", got)
	}
	binary.NativeEndian.PutUint64(d[8:16], 2e9) // nsec out of range
	if got := rxStamp(oob); got != 0 {
		t.Fatalf("bad nsec: %d", got)
	}
	h.Type = unix.SCM_RIGHTS
	if got := rxStamp(oob); got != 0 {
		t.Fatalf("other control message: %d", got)
	}
	if rxStamp(nil) != 0 || rxStamp(oob[:3]) != 0 {
		t.Fatal("short input")
	}
}

func FuzzRxStamp(f *testing.F) {
	oob := make([]byte, unix.CmsgSpace(16))
	h := (*unix.Cmsghdr)(unsafePointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
	h.SetLen(unix.CmsgLen(16))
	f.Add(oob)
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Control messages are 8-byte aligned in the kernel's buffer; copy to ensure it.
		buf := make([]uint64, (len(b)+7)/8)
		raw := unsafeBytes(buf, len(b))
		copy(raw, b)
		if v := rxStamp(raw); v < 0 {
			t.Fatalf("negative stamp %d", v)
		}
	})
}
