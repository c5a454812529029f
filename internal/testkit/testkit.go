// Package testkit holds the test helpers that several packages' tests share: free loopback
// addresses, the in-process simulated engine, and polling for a condition. Only tests import
// it.
package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/sim"
)

// FreeAddr returns a loopback "127.0.0.1:port" whose port was free when it was picked
// (sim.FreeLoopbackAddr: below the kernel's ephemeral range, so that no listener binding
// port 0 meanwhile — the engine's own — can take it).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := sim.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// StartSim starts the simulated engine on a free loopback port with sim.DefaultConfig()
// changed by mod (may be nil), and closes it when the test ends.
func StartSim(t testing.TB, mod func(*sim.Config)) *sim.Server {
	t.Helper()
	cfg := sim.DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	srv, err := sim.Start(context.Background(), cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// WaitFor polls ok every 20 ms until it is true, failing the test with "timed out waiting
// for <what>" after timeout.
func WaitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
