package loadgen

import "testing"

// TestRunSeed: a run's own seed depends only on its run id.
func TestRunSeed(t *testing.T) {
	a, b := RunSeed("0b5c6f7e-1d2a-4c3b-9e8f-7a6b5c4d3e2f"), RunSeed("0b5c6f7e-1d2a-4c3b-9e8f-7a6b5c4d3e30")
	if a != RunSeed("0b5c6f7e-1d2a-4c3b-9e8f-7a6b5c4d3e2f") {
		t.Fatal("RunSeed is not deterministic")
	}
	if a == b {
		t.Fatalf("two run ids share seed %d", a)
	}
	// The first 8 bytes of SHA-256("inferprobe.seed/v1\x00run-1"), big-endian.
	if got, want := RunSeed("run-1"), int64(4621887222694374826); got != want {
		t.Fatalf("RunSeed(run-1) = %d, want %d", got, want)
	}
	c := &Config{RunID: "run-1", Seed: 9}
	c.UseRunSeed()
	if c.Seed != 4621887222694374826 || !c.RunSeeded {
		t.Fatalf("after UseRunSeed: seed %d, run-seeded %v", c.Seed, c.RunSeeded)
	}
}
