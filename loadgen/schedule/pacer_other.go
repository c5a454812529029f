//go:build !linux

package schedule

import "time"

const fineSleepSupported = false

func fineSleep(time.Duration) {}
