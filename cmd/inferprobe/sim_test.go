package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/sim"
)

func TestSimBadFlagsExitUsage(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--block-size", "0"},
		{"sim", "--fault-reject-429", "1.5"},
		{"sim", "--fault-stall", "0.5"}, // needs --fault-stall-duration
		{"sim", "--reset-answer", "xml"},
		{"sim", "--fault-profile-truncated-trace=zip"},
		{"sim", "--no-such-flag"},
		{"sim", "--listen", "256.0.0.1:1"},
	} {
		if code := execute(args); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestOnlySpanExport(t *testing.T) {
	span := fmt.Errorf("%w: %w", sim.ErrSpanExport, context.DeadlineExceeded)
	other := errors.New("ground truth: disk full")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{span, true}, {errors.Join(span), true}, {errors.Join(span, other), false}, {other, false}, {errors.Join(other), false},
	} {
		if got := onlySpanExport(c.err); got != c.want {
			t.Errorf("onlySpanExport(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestSimProfilerFlags: the profiler's flags reach the config.
func TestSimProfilerFlags(t *testing.T) {
	cfg, listen := sim.DefaultConfig(), ""
	cmd := &cobra.Command{Use: "sim"}
	addSimFlags(cmd, &cfg, &listen)
	if err := cmd.ParseFlags([]string{"--profiler-dir", "/tmp", "--fault-profile-truncated-trace", "--fault-profile-stop-no-file", "--fault-profile-start", "500"}); err != nil {
		t.Fatal(err)
	}
	f := cfg.Faults
	if cfg.ProfilerDir != "/tmp" || f.ProfileTruncatedTrace != sim.TruncateJSON || !f.ProfileStopNoFile || f.ProfileStart != sim.ProfileStart500 {
		t.Fatalf("config %+v", cfg)
	}
	if err := cmd.ParseFlags([]string{"--fault-profile-truncated-trace=gzip"}); err != nil || cfg.Faults.ProfileTruncatedTrace != sim.TruncateGzip {
		t.Fatalf("--fault-profile-truncated-trace=gzip: %v %q", err, cfg.Faults.ProfileTruncatedTrace)
	}
}
