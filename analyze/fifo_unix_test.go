//go:build unix

package analyze

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// A named pipe with no writer blocks its open; the read ends with the context instead of
// hanging (an interrupt must end analyze).
func TestReadInputFIFOEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ReadInput(ctx, path); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadInput of a writer-less pipe after cancel: %v", err)
	}
}
