package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
)

// startSleeper starts `sleep 30` as a stand-in server and returns its PID.
func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// readSamples parses a collect-server output file.
func readSamples(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestCollectExitCodes(t *testing.T) {
	sl := startSleeper(t)
	pid := strconv.Itoa(sl.Process.Pid)
	dir := t.TempDir()
	out := filepath.Join(dir, "s.jsonl")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	deadPID := strconv.Itoa(dead.Process.Pid)
	base := []string{"collect-server", "--run-id", "r1", "--output", out}
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no pid", append(base, "--no-gpu"), exitUsage, "--pid is required"},
		{"no run id", []string{"collect-server", "--pid", pid, "--output", out, "--no-gpu"}, exitUsage, "--run-id is required"},
		{"no output", []string{"collect-server", "--pid", pid, "--run-id", "r", "--no-gpu"}, exitUsage, "--output is required"},
		{"pid not running", append(base, "--pid", deadPID, "--no-gpu"), exitUsage, "not a running process"},
		{"pid zero", append(base, "--pid", "0", "--no-gpu"), exitUsage, "--pid"},
		{"interval zero", append(base, "--pid", pid, "--no-gpu", "--interval", "0"), exitUsage, "--interval"},
		{"interval NaN", append(base, "--pid", pid, "--no-gpu", "--interval", "NaN"), exitUsage, "--interval"},
		{"negative duration", append(base, "--pid", pid, "--no-gpu", "--duration", "-1"), exitUsage, "--duration"},
		{"uuid and index", append(base, "--pid", pid, "--device-uuid", "GPU-1", "--device-index", "0"), exitUsage, "mutually exclusive"},
		{"no-gpu and uuid", append(base, "--pid", pid, "--no-gpu", "--device-uuid", "GPU-1"), exitUsage, "--no-gpu"},
		{"group without rank", append(base, "--pid", pid, "--no-gpu", "--group-id", "tp", "--world-size", "2"), exitUsage, "--rank"},
		{"rank beyond world", append(base, "--pid", pid, "--no-gpu", "--group-id", "tp", "--rank", "2", "--world-size", "2"), exitUsage, "rank 2"},
		{"world size alone", append(base, "--pid", pid, "--no-gpu", "--world-size", "2"), exitUsage, "--group-id"},
		{"rank alone", append(base, "--pid", pid, "--no-gpu", "--rank", "3"), exitUsage, "--rank needs --group-id"},
		{"output is a directory", []string{"collect-server", "--run-id", "r1", "--output", t.TempDir(), "--pid", pid, "--no-gpu"}, exitUsage, "is a directory"},
		{"stray argument", append(base, "--pid", pid, "--no-gpu", "extra"), exitUsage, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(out)
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.err) {
				t.Fatalf("exit %d stderr %q; want %d containing %q", code, stderr, tc.code, tc.err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output written before a usage error: %v", err)
			}
		})
	}
}

func TestCollectNoNVML(t *testing.T) {
	sl := startSleeper(t)
	out := filepath.Join(t.TempDir(), "s.jsonl")
	old := openGPU
	defer func() { openGPU = old }()
	openGPU = func() (gpu.Library, error) {
		return &gpu.Fake{InitErr: errors.New("NVML not available: libnvidia-ml.so.1 not found")}, nil
	}
	code, _, stderr := runCLI(t, "collect-server", "--run-id", "r", "--pid", strconv.Itoa(sl.Process.Pid), "--output", out)
	if code != exitUsage || !strings.Contains(stderr, "--no-gpu") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// The real library: this build either lacks NVML or the host lacks a driver.
	openGPU = old
	if lib, err := gpu.Open(); err == nil && lib.Init() == nil {
		_ = lib.Shutdown()
		return // a GPU host: nothing more to check here
	}
	code, _, stderr = runCLI(t, "collect-server", "--run-id", "r", "--pid", strconv.Itoa(sl.Process.Pid), "--output", out)
	if code != exitUsage || !strings.Contains(stderr, "NVML not available") {
		t.Fatalf("real NVML: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output written without NVML")
	}
}

func fakeGPU(uuid string) *gpu.Fake {
	res := uint64(1 << 20)
	return &gpu.Fake{Devices: []*gpu.FakeDevice{{UUIDValue: uuid,
		Mem: gpu.Memory{Version: 2, TotalBytes: 8 << 30, UsedBytes: 3 << 30, ReservedBytes: &res}}}}
}

func TestCollectUnknownDeviceAndUUIDChange(t *testing.T) {
	sl := startSleeper(t)
	pid := strconv.Itoa(sl.Process.Pid)
	out := filepath.Join(t.TempDir(), "s.jsonl")
	old := openGPU
	defer func() { openGPU = old }()
	f := fakeGPU("GPU-1111")
	openGPU = func() (gpu.Library, error) { return f, nil }
	code, _, stderr := runCLI(t, "collect-server", "--run-id", "r", "--pid", pid, "--output", out, "--device-uuid", "GPU-9999")
	if code != exitUsage || !strings.Contains(stderr, "GPU-9999") {
		t.Fatalf("unknown uuid: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "collect-server", "--run-id", "r", "--pid", pid, "--output", out, "--device-index", "3")
	if code != exitUsage || !strings.Contains(stderr, "index 3") {
		t.Fatalf("unknown index: exit %d, %q", code, stderr)
	}
	// The sleeper is not on the GPU: a warning, not an error. Then the UUID changes.
	time.AfterFunc(150*time.Millisecond, func() { f.Set(func() { f.Devices[0].UUIDValue = "GPU-2222" }) })
	code, _, stderr = runCLI(t, "collect-server", "--run-id", "r", "--pid", pid, "--output", out,
		"--device-uuid", "GPU-1111", "--interval", "0.01", "--duration", "20")
	if code != exitFindings || !strings.Contains(stderr, "Warning: NVML does not list PID "+pid) || !strings.Contains(stderr, "UUID changed") {
		t.Fatalf("uuid change: exit %d, %q", code, stderr)
	}
	s := readSamples(t, out)
	last := s[len(s)-1]
	if last["state"] != "invalid" || last["value_bytes"] != nil || !strings.Contains(last["detail"].(string), "GPU-2222") {
		t.Errorf("last sample %v", last)
	}
	if f.Shutdowns != 3 { // each of the three runs Init-ed and shut NVML down
		t.Errorf("NVML shut down %d times", f.Shutdowns)
	}
}

func TestCollectNoGPURun(t *testing.T) {
	sl := startSleeper(t)
	pid := sl.Process.Pid
	out := filepath.Join(t.TempDir(), "s.jsonl")
	code, _, stderr := runCLI(t, "collect-server", "--run-id", "run-7", "--pid", strconv.Itoa(pid), "--output", out,
		"--no-gpu", "--interval", "0.01", "--duration", "0.1", "--replica-id", "r0", "--group-id", "tp", "--rank", "1", "--world-size", "2")
	if code != exitOK {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	s := readSamples(t, out)
	if len(s) < 1 {
		t.Fatal("no samples")
	}
	host := artifact.HostIdentity()
	for _, x := range s {
		id := x["identity"].(map[string]any)
		if x["event_type"] != "infer.telemetry_sample" || x["schema_version"] != json.Number("1") ||
			x["metric"] != "process_rss_bytes" || x["state"] != "valid" || x["run_id"] != "run-7" ||
			x["interval_ms"] != json.Number("10") || x["clock_domain"] != host.ClockDomain() ||
			id["pid"] != json.Number(strconv.Itoa(pid)) || id["replica_id"] != "r0" || id["group_id"] != "tp" ||
			id["rank"] != json.Number("1") || id["world_size"] != json.Number("2") || id["device_uuid"] != nil {
			t.Fatalf("sample %v", x)
		}
		// Integers stay integers; a sleep process has a few hundred KiB to a few MiB resident.
		v, err := x["value_bytes"].(json.Number).Int64()
		if err != nil || v < 16<<10 || v > 256<<20 {
			t.Errorf("value_bytes %v (%v)", x["value_bytes"], err)
		}
	}
}

func TestCollectServerExitAndSignal(t *testing.T) {
	sl := startSleeper(t)
	pid := strconv.Itoa(sl.Process.Pid)
	dir := t.TempDir()
	out := filepath.Join(dir, "exit.jsonl")
	time.AfterFunc(100*time.Millisecond, func() { _ = sl.Process.Kill() })
	code, _, stderr := runCLI(t, "collect-server", "--run-id", "r", "--pid", pid, "--output", out, "--no-gpu", "--interval", "0.01", "--duration", "20")
	if code != exitOK || !strings.Contains(stderr, "Warning: server process "+pid+" exited") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	s := readSamples(t, out)
	last := s[len(s)-1]
	if last["state"] != "invalid" || last["value_bytes"] != nil {
		t.Errorf("last %v", last)
	}
	for _, x := range s[:len(s)-1] {
		if x["state"] != "valid" {
			t.Errorf("sample before exit %v", x)
		}
	}

	// SIGTERM ends a run without --duration with exit 0. The signal handler
	// is installed before the output file is created; wait for its first sample.
	sl2 := startSleeper(t)
	out2 := filepath.Join(dir, "term.jsonl")
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(t, "collect-server", "--run-id", "r", "--pid", strconv.Itoa(sl2.Process.Pid), "--output", out2, "--no-gpu", "--interval", "0.01")
		done <- code
	}()
	for i := 0; ; i++ {
		if st, err := os.Stat(out2); err == nil && st.Size() > 0 {
			break
		}
		if i > 1000 {
			t.Fatal("collector never wrote a sample")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("SIGTERM: exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("collector did not stop on SIGTERM")
	}
	if s := readSamples(t, out2); len(s) == 0 {
		t.Error("no samples before SIGTERM")
	}
}
