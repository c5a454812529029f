//go:build unix

package loadgen

import (
	"syscall"
	"time"
)

// processCPU returns the process's cumulative user and system CPU time (getrusage).
func processCPU() (user, sys time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
