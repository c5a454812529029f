package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/run"
	"github.com/inferprobe/inferprobe/sim"
)

// TestProfileRefusesAnOutputAnotherRunWrites: a second profile with the --output a running
// one writes exits 2 with a clear error and leaves the first run's lines alone.
func TestProfileRefusesAnOutputAnotherRunWrites(t *testing.T) {
	srv := startSim(t, nil)
	out := filepath.Join(t.TempDir(), "a.jsonl")
	first, err := artifact.NewWriter(out) // the first run, still writing
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	s := artifact.Session{SessionID: "first", Status: artifact.StatusRunning}
	if err := first.Write(&s); err != nil {
		t.Fatal(err)
	}
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(out)
	code, _, stderr := runCLI(t, "profile", "--base-url", srv.URL()+"/v1", "--model", sim.DefaultConfig().Model,
		"--requests", "1", "--input-tokens", "16", "--output-tokens", "4", "--output", out, "-q")
	if code != exitUsage {
		t.Fatalf("exit %d, want 2\n%s", code, stderr)
	}
	if want := "Error: cannot open --output: artifact: " + out + ": another run is writing it (the file is locked)\n"; stderr != want {
		t.Fatalf("stderr %q, want %q", stderr, want)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(after, before) {
		t.Fatalf("the refused run changed the artifact: %q, want %q", after, before)
	}
}

// TestProfileOutcome: how a finished run maps to an exit code and what it prints; a run
// whose artifact could not be read back is an error (exit 1), however its requests went.
func TestProfileOutcome(t *testing.T) {
	ok := []*loadgen.CaseStats{{ByStatus: map[client.Outcome]int{client.OK: 1}}}
	readBack := fmt.Errorf("%w: a.jsonl: invalid artifact: line 1: invalid JSON", run.ErrReadBack)
	cases := []struct {
		name   string
		res    run.Result
		code   int
		err    string
		stderr string
	}{
		{"read-back failure", run.Result{Path: "a.jsonl", Status: artifact.StatusCompleted, Stats: ok, ReportErr: readBack},
			exitUnexpected, "the artifact could not be read back: a.jsonl: invalid artifact: line 1: invalid JSON", ""},
		{"analysis timed out", run.Result{Path: "a.jsonl", Status: artifact.StatusCompleted, Stats: ok, ReportErr: context.DeadlineExceeded},
			exitOK, "", "Warning: the report could not be computed: context deadline exceeded\n"},
		{"read-back failure of an interrupted run", run.Result{Path: "a.jsonl", Interrupted: true, ReportErr: readBack},
			exitInterrupted, "", "Interrupted\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := profileOutcome(&stdout, &stderr, &tc.res)
			code, msg := exitOK, ""
			var ee *exitError
			if errors.As(err, &ee) {
				code = ee.code
				if ee.err != nil {
					msg = ee.err.Error()
				}
			} else if err != nil {
				t.Fatalf("error %v is no exitError", err)
			}
			if code != tc.code || msg != tc.err || stderr.String() != tc.stderr {
				t.Fatalf("exit %d %q, stderr %q; want exit %d %q, stderr %q", code, msg, stderr.String(), tc.code, tc.err, tc.stderr)
			}
			if got := stdout.String(); got != "Artifact: a.jsonl\n" {
				t.Fatalf("stdout %q", got)
			}
		})
	}
}
