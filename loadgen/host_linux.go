//go:build linux

package loadgen

import "github.com/prometheus/procfs"

// hostCPUBusy is the host's cumulative busy CPU time over all its CPUs, in seconds, from
// /proc/stat's cpu line: user + nice + system + irq + softirq + steal (guest time is
// inside user; steal is time a hypervisor gave to others, which a host's own processes
// could not use either), and the number of CPUs it counts (its cpuN lines). ok is false
// when /proc/stat cannot be read or lists no CPU.
func hostCPUBusy() (seconds float64, cpus int, ok bool) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, false
	}
	st, err := fs.Stat()
	if err != nil || len(st.CPU) == 0 {
		return 0, 0, false
	}
	c := st.CPUTotal
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, len(st.CPU), true
}
