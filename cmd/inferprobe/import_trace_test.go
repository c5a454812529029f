package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/trace/kineto/kinetogen"
)

// importFixture writes an artifact (header and final session) and a generated trace.
func importFixture(t *testing.T) (art, trace string, st kinetogen.Stats) {
	t.Helper()
	dir := t.TempDir()
	art = filepath.Join(dir, "run.jsonl")
	h := artifact.NewArtifactHeader("run-7", "sess-7", "dev", 1, artifact.Host{Name: "client"}, 1)
	body := mustLine(t, &h) + "\n" + `{"event_type":"infer.session","schema_version":1,"session_id":"sess-7","timestamp_ns":2,"status":"completed"}` + "\n"
	if err := os.WriteFile(art, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	trace = filepath.Join(dir, "rank0.1767225600.pt.trace.json")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = kinetogen.Write(f, kinetogen.Config{Bytes: 200 << 10, KernelsPerStep: 10, GraphEvery: 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return art, trace, st
}

func TestImportTrace(t *testing.T) {
	art, trace, st := importFixture(t)
	before, _ := os.ReadFile(art)
	code, stdout, stderr := runCLI(t, "import-trace", art, trace, "--clock-domain", "gpu-host/unix_epoch_ns")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	after, _ := os.ReadFile(art)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("the artifact's lines were changed")
	}
	a, err := artifact.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	refs := activityRefs(t, art)
	if int64(len(a.Iterations)) != st.Steps || len(refs) != int(st.Launches) || len(a.Capabilities) != 1 {
		t.Fatalf("%d iterations (want %d), %d refs (want %d launches), %d capabilities", len(a.Iterations), st.Steps, len(refs), st.Launches, len(a.Capabilities))
	}
	it := a.Iterations[0]
	if it.Context.RunID != "run-7" || it.Context.ClockDomain != "gpu-host/unix_epoch_ns" || it.Context.CollectionMode != "imported" ||
		it.StartNS < 1_767_225_600_000_000_000 || *it.Rank != 0 {
		t.Errorf("iteration %+v", it)
	}
	for _, r := range refs {
		if r.AttributionStatus != artifact.AttributionLinked {
			t.Fatalf("unresolved ref %+v", r)
		}
	}
	if c := a.Capabilities[0]; c.Component != "trace.kineto" || c.Metadata["event_loss"] != nil {
		t.Errorf("capabilities %+v", c)
	}
	if !strings.Contains(stdout, "steps") || !strings.Contains(stdout, trace) {
		t.Errorf("stdout %q", stdout)
	}
	// The same file again: skipped, nothing written.
	code, stdout, _ = runCLI(t, "import-trace", art, trace)
	again, _ := os.ReadFile(art)
	if code != exitOK || !strings.Contains(stdout, "already imported") || !bytes.Equal(again, after) {
		t.Fatalf("re-import: exit %d, %q, grew %d bytes", code, stdout, len(again)-len(after))
	}
}

func TestImportTraceBadInput(t *testing.T) {
	art, trace, _ := importFixture(t)
	before, _ := os.ReadFile(art)
	data, _ := os.ReadFile(trace)
	cut := filepath.Join(t.TempDir(), "rank1.cut.pt.trace.json")
	os.WriteFile(cut, data[:5000], 0o644)
	code, _, stderr := runCLI(t, "import-trace", art, cut)
	if code != exitBadInput || !strings.Contains(stderr, cut+": malformed trace at byte 5000 (decompressed)") {
		t.Fatalf("cut trace: exit %d, %q", code, stderr)
	}
	if after, _ := os.ReadFile(art); !bytes.Equal(after, before) {
		t.Fatal("a failed import changed the artifact")
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{art, trace, "--detail", "op"}, exitUsage, `--detail must be launch or kernel, not "op"`},
		{[]string{art, trace, "--trace-max-bytes", "0"}, exitUsage, "--trace-max-bytes must be > 0"},
		{[]string{art}, exitUsage, "requires at least 2 arg"},
		{[]string{filepath.Join(t.TempDir(), "none.jsonl"), trace}, exitBadInput, "no such file"},
		{[]string{art, filepath.Join(t.TempDir(), "none.json")}, exitBadInput, "no such file"},
	} {
		code, _, stderr := runCLI(t, append([]string{"import-trace"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q (want %d, %q)", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if after, _ := os.ReadFile(art); !bytes.Equal(after, before) {
		t.Fatal("a refused import changed the artifact")
	}
	// A trace over --trace-max-bytes is registered only.
	code, stdout, _ := runCLI(t, "import-trace", art, trace, "--trace-max-bytes", "1000")
	a, _ := artifact.ReadFile(art)
	if code != exitOK || !strings.Contains(stdout, "registered, not parsed") || len(a.Capabilities) != 1 || len(a.Iterations) != 0 || a.Capabilities[0].Available {
		t.Fatalf("over max bytes: exit %d %q %+v", code, stdout, a.Capabilities)
	}
}

// activityRefs streams the artifact's infer.activity_ref records.
func activityRefs(t *testing.T, path string) []artifact.ActivityRef {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []artifact.ActivityRef
	if _, err := artifact.Read(f, func(l artifact.Line) error {
		if r, ok := l.Value.(*artifact.ActivityRef); ok {
			out = append(out, *r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServerClockDomain(t *testing.T) {
	for _, tc := range []struct {
		v    artifactView
		want string
	}{
		{artifactView{}, defaultServerClockDomain},
		{artifactView{alignmentDomains: []string{"gpu/b1/unix_epoch_ns", "gpu/b1/unix_epoch_ns"}}, "gpu/b1/unix_epoch_ns"},
		{artifactView{alignmentDomains: []string{"a/unix_epoch_ns", "b/unix_epoch_ns"}, telemetryDomains: map[string]bool{"t/unix_epoch_ns": true}}, "t/unix_epoch_ns"},
		{artifactView{telemetryDomains: map[string]bool{"t/unix_epoch_ns": true, "u/unix_epoch_ns": true}}, defaultServerClockDomain},
	} {
		if got := serverClockDomain(&tc.v); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.v, got, tc.want)
		}
	}
}
