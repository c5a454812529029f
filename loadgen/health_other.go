//go:build !unix

package loadgen

import "time"

// processCPU reports no CPU time where getrusage does not exist.
func processCPU() (user, sys time.Duration, ok bool) { return 0, 0, false }
