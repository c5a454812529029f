package analyze

import (
	"context"
	"os"
)

// openContext opens path for reading unless ctx ends first, when it returns ctx's error:
// opening a named pipe blocks until a writer opens its other end, and an interrupt must
// still end the analysis (the open, left behind, closes what it opens late).
func openContext(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
