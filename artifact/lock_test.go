//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package artifact

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewWriterRefusesAFileAnotherWriterHolds: a second Writer on the same path is refused
// with ErrLocked and leaves the first run's lines as they are; once the first closes, the
// path can be written again.
func TestNewWriterRefusesAFileAnotherWriterHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	first, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	r := sampleRequest()
	if err := first.Write(&r); err != nil {
		t.Fatal(err)
	}
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil || len(before) == 0 {
		t.Fatalf("first writer's line not on disk: %q, %v", before, err)
	}

	second, err := NewWriter(path)
	if err == nil {
		_ = second.Close()
		t.Fatal("a second Writer opened a file another Writer holds")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("error %v does not wrap ErrLocked", err)
	}
	if want := "artifact: " + path + ": another run is writing it (the file is locked)"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	after, err := os.ReadFile(path)
	if err != nil || string(after) != string(before) {
		t.Fatalf("the refused Writer changed the file: %q, want %q (%v)", after, before, err)
	}

	if err := first.Write(&r); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") != 2 {
		t.Fatalf("first writer's file: %q, want its 2 lines", b)
	}
	third, err := NewWriter(path)
	if err != nil {
		t.Fatalf("after Close the path stays locked: %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("a new Writer kept the old content: %q", b)
	}
}
