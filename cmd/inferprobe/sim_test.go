package main

import "testing"

func TestSimBadFlagsExitUsage(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--block-size", "0"},
		{"sim", "--fault-reject-429", "1.5"},
		{"sim", "--fault-stall", "0.5"}, // needs --fault-stall-duration
		{"sim", "--reset-answer", "xml"},
		{"sim", "--no-such-flag"},
		{"sim", "--listen", "256.0.0.1:1"},
	} {
		if code := run(args); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
