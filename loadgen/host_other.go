//go:build !linux

package loadgen

// hostCPUBusy reports no host CPU time where /proc/stat does not exist.
func hostCPUBusy() (seconds float64, cpus int, ok bool) { return 0, 0, false }
