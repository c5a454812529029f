package artifact

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestWriterConcurrentWritersEveryLineOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	const producers, each = 8, 250
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := sampleRequest()
				r.RequestID = fmt.Sprintf("p%d_%d", p, i)
				r.ChunkInterarrivalMS = make([]float64, (p*each+i)%100) // lines of varied length
				if err := w.Write(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, producers)
	st, err := Read(mustOpen(t, path), func(r Line) error {
		var p, i int
		if _, err := fmt.Sscanf(r.Value.(*Request).RequestID, "p%d_%d", &p, &i); err != nil {
			return err
		}
		if i != next[p] {
			return fmt.Errorf("producer %d: record %d after %d", p, i, next[p]-1)
		}
		// Line buffers are recycled once written: a line changed after it was queued would
		// show here as another record's interarrival count.
		if n, want := len(r.Value.(*Request).ChunkInterarrivalMS), (p*each+i)%100; n != want {
			return fmt.Errorf("producer %d record %d: %d interarrivals, want %d", p, i, n, want)
		}
		next[p]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != producers*each {
		t.Fatalf("read %d records, want %d", st.Records, producers*each)
	}
}

func TestWriterAfterCloseAndDoubleClose(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "a.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(sampleRequest()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(sampleRequest()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// Writers racing with Close either land in the file or get ErrClosed; no
// panic, no lost accepted record.
func TestWriterCloseRacesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := w.Write(sampleRequest())
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				accepted.Add(1)
			}
		}()
	}
	for accepted.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st, err := Read(mustOpen(t, path), func(Line) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if int64(st.Records) != accepted.Load() {
		t.Fatalf("file has %d records, %d were accepted", st.Records, accepted.Load())
	}
}

func TestWriterFlushesWithoutBeingAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	line := mustLine(t, sampleRequest())
	if err := w.Write(sampleRequest()); err != nil {
		t.Fatal(err)
	}
	// The interval is 100 ms; allow a loaded machine far more before failing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) == string(line)+"\n" {
			return
		}
		if len(b) != 0 || time.Now().After(deadline) {
			t.Fatalf("file holds %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWriterFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 3 {
		if err := w.Write(sampleRequest()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 3 {
		t.Fatalf("after Flush the file has %d lines, want 3", n)
	}
}

func TestNewWriterTruncatesAndFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(path, []byte("old content that is not JSON\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("old content kept: %q", b)
	}
	if _, err := NewWriter(dir); err == nil { // a directory cannot be opened for writing
		t.Fatal("NewWriter on a directory succeeded")
	}
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewWriter(filepath.Join(blocker, "sub", "a.jsonl")); err == nil {
		t.Fatal("NewWriter under a regular file succeeded")
	}
}

// headerless claims a kind but encodes without event_type and schema_version.
type headerless struct {
	No string `json:"no"`
}

func (headerless) RecordKind() Kind { return KindRequest }

func TestWriterRejectsBadRecordsWithoutStopping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(headerless{No: "header"}); err == nil {
		t.Fatal("headerless record accepted")
	}
	if err := w.Write(sampleRequest()); err != nil {
		t.Fatalf("writer unusable after a rejected record: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := Read(mustOpen(t, path), func(Line) error { return nil })
	if err != nil || st.Records != 1 {
		t.Fatalf("records %d, %v", st.Records, err)
	}
}

// killChildEnv names the artifact path for the child process of
// TestSIGKILLLeavesEveryCompleteLineParseable.
const killChildEnv = "INFERPROBE_ARTIFACT_KILL_CHILD"

const killProducers = 4

// TestKillChildHelper is the child process: it writes records from several
// goroutines until it is killed, and after every Flush prints how many
// records each producer had had accepted before that Flush began.
func TestKillChildHelper(t *testing.T) {
	path := os.Getenv(killChildEnv)
	if path == "" {
		t.Skip("child process of TestSIGKILLLeavesEveryCompleteLineParseable")
	}
	time.AfterFunc(30*time.Second, func() { os.Exit(3) }) // never outlive a dead parent for long
	w, err := NewWriter(path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var written [killProducers]atomic.Int64
	for p := range killProducers {
		go func() {
			for i := 0; ; i++ {
				r := sampleRequest()
				r.RequestID = fmt.Sprintf("p%d_%d", p, i)
				r.ChunkInterarrivalMS = make([]float64, i%700) // up to ~1.4 KB lines
				if err := w.Write(r); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				written[p].Store(int64(i + 1))
			}
		}()
	}
	out := bufio.NewWriter(os.Stdout)
	for {
		var snap [killProducers]int64
		for p := range snap {
			snap[p] = written[p].Load()
		}
		if err := w.Flush(); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Fprint(out, "flushed")
		for _, n := range snap {
			fmt.Fprintf(out, " %d", n)
		}
		fmt.Fprintln(out)
		out.Flush()
		time.Sleep(3 * time.Millisecond)
	}
}

func TestSIGKILLLeavesEveryCompleteLineParseable(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	for trial := range 3 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("killed-%d.jsonl", trial))
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var last []int64
		snapshots := make(chan struct{}, 1000)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) != killProducers+1 || fields[0] != "flushed" {
					continue // go test's own output, or an error line
				}
				snap := make([]int64, killProducers)
				for i := range snap {
					snap[i], _ = strconv.ParseInt(fields[i+1], 10, 64)
				}
				mu.Lock()
				last = snap
				mu.Unlock()
				select {
				case snapshots <- struct{}{}:
				default:
				}
			}
		}()
		// Let it run a few flush rounds, then kill it at a random moment.
		timeout := time.After(20 * time.Second)
		for range 3 {
			select {
			case <-snapshots:
			case <-timeout:
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("child never reported a flush")
			}
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die by SIGKILL: %v", err)
		}
		mu.Lock()
		flushed := last
		mu.Unlock()

		next := make([]int64, killProducers)
		st, err := Read(mustOpen(t, path), func(r Line) error {
			req, ok := r.Value.(*Request)
			if !ok {
				return fmt.Errorf("line %d is %s", r.Line, r.Kind)
			}
			var p int
			var i int64
			if _, err := fmt.Sscanf(req.RequestID, "p%d_%d", &p, &i); err != nil {
				return err
			}
			if i != next[p] {
				return fmt.Errorf("line %d: producer %d record %d after %d: the file is not a prefix of what was written", r.Line, p, i, next[p]-1)
			}
			next[p]++
			return nil
		})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for p := range next {
			if next[p] < flushed[p] {
				t.Fatalf("trial %d: producer %d has %d records on disk, %d were flushed before the kill", trial, p, next[p], flushed[p])
			}
		}
		t.Logf("trial %d: %d records intact, truncated=%v, last flush %v", trial, st.Records, st.Truncated, flushed)
	}
}

func BenchmarkWriterRequestParallel(b *testing.B) {
	w, err := NewWriter(filepath.Join(b.TempDir(), "bench.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	r := sampleRequest()
	r.ChunkInterarrivalMS = make([]float64, 64)
	for i := range r.ChunkInterarrivalMS {
		r.ChunkInterarrivalMS[i] = 12.3456 + float64(i)
	}
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := w.Write(r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkMarshalLineRequest(b *testing.B) {
	r := sampleRequest()
	r.ChunkInterarrivalMS = make([]float64, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MarshalLine(r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestWriterReportsWriteErrors(t *testing.T) {
	const full = "/dev/full" // every write fails with ENOSPC
	if _, err := os.Stat(full); err != nil {
		t.Skip("no /dev/full")
	}
	w, err := NewWriter(full)
	if err != nil {
		t.Skip(err)
	}
	if err := w.Write(sampleRequest()); err != nil {
		t.Fatalf("first Write: %v", err) // queued; the failure comes later
	}
	if err := w.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Flush: %v, want ENOSPC", err)
	}
	if err := w.Write(sampleRequest()); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write after a failed write: %v", err)
	}
	if err := w.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v", err)
	}
}
