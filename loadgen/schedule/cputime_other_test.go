//go:build !unix

package schedule

import "time"

// cpuTime is unknown off unix: the benchmark reports 0 CPU.
func cpuTime() time.Duration { return 0 }
