package run

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/loadgen"
)

// TestPipelineReadBackFailure: a run whose closed artifact cannot be read back — replaced by
// another run's, or by lines that do not parse — has no report, and its ReportErr wraps
// ErrReadBack and says why; the sinks are told the run was not analysed.
func TestPipelineReadBackFailure(t *testing.T) {
	other := func(t *testing.T, path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		a, err := artifact.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		replaced := strings.ReplaceAll(string(data), a.Sessions[0].SessionID, "other-session")
		if err := os.WriteFile(path, []byte(replaced), 0o644); err != nil {
			t.Error(err)
		}
	}
	garbage := func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	cases := []struct {
		name    string
		replace func(t *testing.T, path string)
		want    func(path, session string) string
	}{
		{"another run's session", other, func(path, session string) string {
			return fmt.Sprintf("the artifact could not be read back: %s holds session other-session, not this run's session %s (did another run replace it?)", path, session)
		}},
		{"unparseable", garbage, func(path, _ string) string {
			return "the artifact could not be read back: " + path + ": "
		}},
	}
	srv := testkit.StartSim(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "a.jsonl")
			mem := &artifact.Memory{}
			p := New(Spec{Workload: workload(t, srv), Tokenizer: tokenizer(t), Output: out, Sinks: []artifact.Sink{mem}})
			p.afterClose = func(path string) { tc.replace(t, path) }
			res := p.Execute(context.Background())
			if res.Err != nil || res.Status != artifact.StatusCompleted {
				t.Fatalf("result %+v", res)
			}
			if res.Report != nil || !errors.Is(res.ReportErr, ErrReadBack) {
				t.Fatalf("report %v, error %v: want no report and ErrReadBack", res.Report, res.ReportErr)
			}
			if got, want := res.ReportErr.Error(), tc.want(out, res.SessionID); !strings.HasPrefix(got, want) {
				t.Fatalf("error %q, want %q", got, want)
			}
			if res.Judgement.Analysed {
				t.Fatal("the judgement says the run was analysed")
			}
		})
	}
}

// TestPipelineRefusesALockedArtifact: while another writer holds the artifact, a run sends
// nothing, leaves the file as it is, and fails with ErrOpen wrapping artifact.ErrLocked.
func TestPipelineRefusesALockedArtifact(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "a.jsonl")
	holder, err := artifact.NewWriter(out)
	if err != nil {
		t.Fatal(err)
	}
	s := artifact.Session{SessionID: "first", Status: artifact.StatusRunning}
	if err := holder.Write(&s); err != nil {
		t.Fatal(err)
	}
	if err := holder.Flush(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(out)
	cfg := &loadgen.Config{Endpoint: srv.URL + "/v1/chat/completions", Model: "m", RunID: "r", Timeout: time.Second,
		InputTokens: []int{32}, OutputTokens: []int{8}}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res := New(Spec{Workload: cfg, Tokenizer: tokenizer(t), Output: out}).Execute(context.Background())
	if !errors.Is(res.Err, ErrOpen) || !errors.Is(res.Err, artifact.ErrLocked) || res.Status != artifact.RunFailed {
		t.Fatalf("result %+v", res)
	}
	if want := "cannot open the artifact: artifact: " + out + ": another run is writing it (the file is locked)"; res.Err.Error() != want {
		t.Fatalf("error %q, want %q", res.Err, want)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Fatalf("the refused run changed the file: %q, want %q", after, before)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
}
