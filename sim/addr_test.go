package sim

import (
	"net"
	"strconv"
	"testing"
)

// The address is loopback, free (it can be bound), and below the ephemeral range when the
// kernel says where that starts.
func TestFreeLoopbackAddr(t *testing.T) {
	addr, err := FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, _ := strconv.Atoi(port)
	if low := ephemeralLow(); low > 2048 && (n < 1024 || n >= low) {
		t.Fatalf("port %d outside 1024..%d", n, low-1)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is not free: %v", err)
	}
	l.Close()
}
