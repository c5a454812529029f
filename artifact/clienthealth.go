package artifact

// ClientHealth is the load generator's own health over one phase, from the phase start to
// the end of its drain: what a reader needs to tell whether the client, not the server,
// shaped the phase's numbers. It rides on the phase's infer.phase_window record
// (client_health; absent in artifacts written before it existed).
//
// CPU and GC figures are the whole inferprobe process's (the load generator, and in the
// same process the span receiver, scrapers and exporter): a client host's load generator is
// limited by the process, not by one part of it.
type ClientHealth struct {
	// CPUUserSeconds and CPUSystemSeconds are the process's user and system CPU time
	// spent during the phase (getrusage(RUSAGE_SELF) deltas, seconds); null where the
	// platform does not report them.
	CPUUserSeconds   *float64 `json:"cpu_user_seconds"`
	CPUSystemSeconds *float64 `json:"cpu_system_seconds"`
	// CPUs is the number of CPUs the Go runtime could run on (GOMAXPROCS) during the phase.
	CPUs int `json:"cpus"`
	// GCCycles and GCPauseSeconds are the garbage collections completed during the phase
	// and their total stop-the-world pause time (seconds).
	GCCycles       int64   `json:"gc_cycles"`
	GCPauseSeconds float64 `json:"gc_pause_seconds"`
	// ReceiveReads counts the reads of streamed answers completed during the phase;
	// ReceiveStampedReads those dated by the kernel's receive timestamp (the rest were
	// timed by the clock after the read returned, late by the reader's scheduling delay).
	ReceiveReads        int64 `json:"receive_reads"`
	ReceiveStampedReads int64 `json:"receive_stamped_reads"`
	// HostCPUs is the number of CPUs of the host (/proc/stat's cpuN lines) and
	// HostCPUBusySeconds the busy time of all of them during the phase (every process's,
	// this one included: the deltas of /proc/stat's user, nice, system, irq, softirq and
	// steal, seconds); 0 and null where the platform does not report them, and in artifacts
	// written before they existed. Their difference from the process's own CPU is what
	// other processes (or a hypervisor) took.
	HostCPUs           int      `json:"host_cpus"`
	HostCPUBusySeconds *float64 `json:"host_cpu_busy_seconds"`
}
