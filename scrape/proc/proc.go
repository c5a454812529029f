// Package proc reads a server process's operating-system counters for
// `inferprobe collect-server`: resident set size, start time, liveness and
// children, through github.com/shirou/gopsutil/v4 (on Linux, /proc/PID/statm
// and /proc/PID/stat).
package proc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shirou/gopsutil/v4/process"
)

// ErrNotRunning is returned (wrapped) when the PID names no running process.
var ErrNotRunning = errors.New("process not running")

// Process is one process, pinned by PID and start time so that a reused PID
// is not mistaken for the original process.
type Process struct {
	p       *process.Process
	startNS int64
	exit    exitWatch // nil where the OS offers no exit notification
}

// Open finds the running process pid. Errors wrap ErrNotRunning when there is
// no such process (or it is a zombie), and report an unreadable start time.
func Open(ctx context.Context, pid int) (*Process, error) {
	if pid < 1 || pid > 1<<31-1 {
		return nil, fmt.Errorf("%w: pid %d out of range", ErrNotRunning, pid)
	}
	p, err := process.NewProcessWithContext(ctx, int32(pid))
	if err != nil {
		if errors.Is(err, process.ErrorProcessNotRunning) {
			return nil, fmt.Errorf("%w: pid %d", ErrNotRunning, pid)
		}
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	ms, err := p.CreateTimeWithContext(ctx)
	if err != nil || ms <= 0 {
		return nil, fmt.Errorf("pid %d: reading start time: %v", pid, err)
	}
	pr := &Process{p: p, startNS: ms * 1_000_000}
	if zombie(ctx, p) {
		return nil, fmt.Errorf("%w: pid %d is a zombie", ErrNotRunning, pid)
	}
	if w := watchExit(pid); w != nil {
		// The watch must be on the same process: re-check the start time
		// after opening it, in case the PID was reused in between.
		q := &process.Process{Pid: int32(pid)}
		if ms2, err := q.CreateTimeWithContext(ctx); err != nil || ms2 != ms {
			w.Close()
		} else {
			pr.exit = w
		}
	}
	return pr, nil
}

// PID returns the process id.
func (p *Process) PID() int { return int(p.p.Pid) }

// StartNS returns the process start time in Unix epoch nanoseconds. The OS
// reports it in clock ticks since boot, which gopsutil converts to whole
// milliseconds, so the value is a multiple of 1e6.
func (p *Process) StartNS() int64 { return p.startNS }

// RSSBytes returns the process's resident set size in bytes.
func (p *Process) RSSBytes(ctx context.Context) (uint64, error) {
	m, err := p.p.MemoryInfoWithContext(ctx)
	if err != nil {
		return 0, fmt.Errorf("pid %d: reading RSS: %w", p.p.Pid, err)
	}
	return m.RSS, nil
}

// Close releases the exit watch (a pidfd on Linux); the Process keeps
// answering through /proc reads.
func (p *Process) Close() error {
	if p.exit != nil {
		p.exit.Close()
		p.exit = nil
	}
	return nil
}

// Running reports whether the same process (same PID and start time) still
// runs; a zombie (exited, not yet reaped) counts as exited. On Linux ≥ 5.3 it
// polls a pidfd (one syscall, no file read); elsewhere it reads
// /proc/PID/stat and /proc/PID/status once each.
func (p *Process) Running(ctx context.Context) (bool, error) {
	if p.exit != nil {
		if exited, err := p.exit.Exited(); err == nil {
			return !exited, nil
		}
	}
	q := &process.Process{Pid: p.p.Pid}
	ms, err := q.CreateTimeWithContext(ctx)
	if err != nil {
		if ok, perr := process.PidExistsWithContext(ctx, p.p.Pid); perr == nil && !ok {
			return false, nil
		}
		return false, fmt.Errorf("pid %d: reading start time: %w", p.p.Pid, err)
	}
	if ms*1_000_000 != p.startNS {
		return false, nil // PID reused by another process
	}
	return !zombie(ctx, q), nil
}

// Descendants returns the PIDs of the process's children, grandchildren and
// so on (breadth first), at most limit of them.
func (p *Process) Descendants(ctx context.Context, limit int) []int {
	var out []int
	queue := []*process.Process{p.p}
	for len(queue) > 0 && len(out) < limit {
		cur := queue[0]
		queue = queue[1:]
		kids, err := cur.ChildrenWithContext(ctx)
		if err != nil {
			continue
		}
		for _, k := range kids {
			if len(out) >= limit || slices.Contains(out, int(k.Pid)) {
				continue
			}
			out = append(out, int(k.Pid))
			queue = append(queue, k)
		}
	}
	return out
}

func init() {
	// The boot time only changes with a reboot, which also ends the watched
	// process; caching it saves reading /proc/stat on every start-time read.
	process.EnableBootTimeCache(true)
}

func zombie(ctx context.Context, p *process.Process) bool {
	st, err := p.StatusWithContext(ctx)
	return err == nil && slices.Contains(st, process.Zombie)
}
