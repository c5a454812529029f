//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package artifact

import (
	"errors"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock (flock) on fd without waiting. It returns
// errLockHeld when another open file already holds a lock on the same file — another
// Writer, in this process or another — and any other flock error as it is. The lock lasts
// until the file is closed.
func lockFile(fd uintptr) error {
	for {
		err := unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errLockHeld
		}
		return err
	}
}
