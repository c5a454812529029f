package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestSelf(t *testing.T) {
	ctx := context.Background()
	p, err := Open(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() != os.Getpid() {
		t.Errorf("PID = %d", p.PID())
	}
	now := time.Now().UnixNano()
	// The test binary started within the last hour and not in the future
	// (start time has 10 ms tick resolution on Linux).
	if s := p.StartNS(); s > now+int64(time.Second) || s < now-int64(time.Hour) {
		t.Errorf("StartNS = %d, now = %d", s, now)
	}
	rss, err := p.RSSBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// A running Go test binary has a few MiB resident; RSS cannot exceed
	// what the runtime obtained from the OS plus the mapped binary (<1 GiB).
	if rss < 1<<20 || rss > ms.Sys+1<<30 {
		t.Errorf("RSS = %d bytes (runtime Sys = %d)", rss, ms.Sys)
	}
	// Touching 64 MiB raises RSS by roughly that much.
	buf := make([]byte, 64<<20)
	for i := range buf {
		if i%4096 == 0 {
			buf[i] = 1
		}
	}
	rss2, err := p.RSSBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rss2 < rss+48<<20 {
		t.Errorf("RSS after touching 64 MiB = %d, before %d", rss2, rss)
	}
	runtime.KeepAlive(buf)
	ok, err := p.Running(ctx)
	if err != nil || !ok {
		t.Errorf("Running = %v, %v", ok, err)
	}
}

func TestChildExit(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self, err := Open(ctx, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pid := range self.Descendants(ctx, 64) {
		found = found || pid == cmd.Process.Pid
	}
	if !found {
		t.Errorf("child %d not among descendants", cmd.Process.Pid)
	}
	p, err := Open(ctx, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.exit == nil {
		t.Log("no pidfd on this kernel; both handles use /proc")
	}
	// viaProc has no exit watch: it reads /proc/PID/stat and status.
	viaProc, err := Open(ctx, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = viaProc.Close()
	defer p.Close()
	for _, h := range []*Process{p, viaProc} {
		if ok, err := h.Running(ctx); !ok || err != nil {
			t.Fatalf("live child: Running = %v, %v", ok, err)
		}
	}
	_ = cmd.Process.Kill()
	// Before Wait reaps it, the child is a zombie: already exited.
	for _, h := range []*Process{p, viaProc} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			ok, err := h.Running(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("killed child still reported running")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	_ = cmd.Wait()
	for _, h := range []*Process{p, viaProc} {
		if ok, err := h.Running(ctx); ok || err != nil {
			t.Errorf("after reap: Running = %v, %v", ok, err)
		}
	}
	if _, err := Open(ctx, cmd.Process.Pid); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Open(reaped) = %v, want ErrNotRunning", err)
	}
}

func TestOpenBadPID(t *testing.T) {
	for _, pid := range []int{0, -1, 1 << 40} {
		if _, err := Open(context.Background(), pid); !errors.Is(err, ErrNotRunning) {
			t.Errorf("Open(%d) = %v, want ErrNotRunning", pid, err)
		}
	}
}
