package sim

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreeLoopbackAddr returns a loopback "127.0.0.1:port" whose port was free when it was
// picked: the address of a span receiver that the engine must be told before it starts and
// that binds after it. The port is drawn below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768–60999 by default), which no bind to port 0
// and no outgoing connection is given, so that no other listener — the engine's own on
// 127.0.0.1:0 — can take it in the meantime. Without that file it falls back to a port the
// kernel chose. Errors: nothing can listen on loopback.
func FreeLoopbackAddr() (string, error) {
	if low := ephemeralLow(); low > 2048 {
		for i := 0; i < 100; i++ {
			port := 1024 + rand.IntN(low-1024)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				addr := l.Addr().String()
				l.Close()
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
