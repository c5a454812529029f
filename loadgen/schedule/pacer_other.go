//go:build !linux

package schedule

import (
	"context"
	"time"
)

const fineSleepSupported = false

func fineSleep(time.Duration) {}

// timerfdWait has no timerfd to wait on here: ok is always false (WaitUntil falls back to
// its timer-then-spin wait).
func timerfdWait(context.Context, time.Time) (err error, ok bool) { return nil, false }
