//go:build linux

package proc

import "golang.org/x/sys/unix"

// exitWatch tells, without reading /proc, whether a process has exited.
type exitWatch interface {
	Exited() (bool, error)
	Close()
}

// pidfd is a Linux process file descriptor (pidfd_open(2), Linux 5.3+): it
// refers to one process, never to a later process reusing the PID, and
// polls readable once that process has terminated (zombie or reaped).
type pidfd int

func watchExit(pid int) exitWatch {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	return pidfd(fd)
}

func (fd pidfd) Exited() (bool, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		return n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0, nil
	}
}

func (fd pidfd) Close() { _ = unix.Close(int(fd)) }
