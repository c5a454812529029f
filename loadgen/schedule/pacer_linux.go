package schedule

import (
	"syscall"
	"time"
)

const fineSleepSupported = true

// fineSleep sleeps about d in nanosleep(2), blocking this goroutine's thread (the runtime
// hands its P to other goroutines meanwhile). Interrupted sleeps just return early: the
// caller loops on the clock.
func fineSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
