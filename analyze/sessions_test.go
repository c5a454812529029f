package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

func TestConcatenatedSessionsWarn(t *testing.T) {
	a := syntheticArtifact(10)
	r, err := Analyze(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, "sessions") {
			t.Fatalf("one session warned: %s", w)
		}
	}
	a.Sessions = append(a.Sessions, artifact.Session{SessionID: "s2", Status: artifact.StatusCompleted})
	r, err = Analyze(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range r.Warnings {
		found = found || strings.Contains(w, "2 sessions (s1, s2)")
	}
	if !found {
		t.Fatalf("warnings %v", r.Warnings)
	}
}

// saveArtifact writes a's sessions, phase windows and requests (in that order) as a JSONL
// artifact and returns its path.
func saveArtifact(t *testing.T, a *artifact.Artifact) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.jsonl")
	w, err := artifact.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Sessions {
		if err := w.Write(&a.Sessions[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range a.PhaseWindows {
		if err := w.Write(&a.PhaseWindows[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range a.Requests {
		if err := w.Write(&a.Requests[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// spliced is syntheticArtifact(10) (session s1) with 3 measured requests, 1 warmup request
// and 1 measured phase window of session s9 spliced in: s9 has no infer.session record.
func spliced() *artifact.Artifact {
	a := syntheticArtifact(10)
	for i := range 4 {
		r := a.Requests[i]
		r.SessionID, r.RequestID = "s9", fmt.Sprintf("c1_measured_9_%d", i)
		r.XRequestID = artifact.Ptr("inferprobe-other-" + r.RequestID)
		if i == 3 {
			r.Phase = artifact.PhaseWarmup
		}
		a.Requests = append(a.Requests, r)
	}
	w := a.PhaseWindows[0]
	w.SessionID = "s9"
	w.WindowEndedAtNS = artifact.Ptr(*w.StartedAtNS + 1_000_000) // a 1 ms window: rates 1000× too high
	a.PhaseWindows = append(a.PhaseWindows, w)
	return a
}

// TestRecordsOfAnotherSessionIgnored: infer.request and infer.phase_window records whose
// session no infer.session record declares are counted nowhere, and the report says how many
// were ignored, per session, in JSON and text — read from a file or from memory alike.
func TestRecordsOfAnotherSessionIgnored(t *testing.T) {
	clean, err := Analyze(syntheticArtifact(10), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := spliced()
	fromFile := func() (*Report, error) {
		in, err := ReadInput(context.Background(), saveArtifact(t, a))
		if err != nil {
			return nil, err
		}
		return AnalyzeInput(context.Background(), in, Options{})
	}
	for name, analyse := range map[string]func() (*Report, error){
		"memory": func() (*Report, error) { return Analyze(a, Options{}) },
		"file":   fromFile,
	} {
		t.Run(name, func(t *testing.T) {
			before := len(a.PhaseWindows)
			r, err := analyse()
			if err != nil {
				t.Fatal(err)
			}
			if len(a.PhaseWindows) != before {
				t.Fatal("the caller's artifact was changed")
			}
			want := []IgnoredRecords{{Reason: ReasonOtherSession, SessionID: "s9", Records: 5}}
			if !reflect.DeepEqual(r.IgnoredRecords, want) {
				t.Fatalf("ignored %+v, want %+v", r.IgnoredRecords, want)
			}
			if r.Summary.TotalRequests != 10 || r.Cases["c1"].SuccessfulRequests != clean.Cases["c1"].SuccessfulRequests {
				t.Fatalf("total %d, case %d requests: want 10, %d", r.Summary.TotalRequests, r.Cases["c1"].SuccessfulRequests, clean.Cases["c1"].SuccessfulRequests)
			}
			got, _ := json.Marshal(r.Cases["c1"].Throughput)
			wantTP, _ := json.Marshal(clean.Cases["c1"].Throughput)
			if string(got) != string(wantTP) {
				t.Fatalf("throughput %s, want the clean artifact's %s", got, wantTP)
			}
			var js bytes.Buffer
			if err := WriteJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			if wantJSON := "\"ignored_records\": [\n    {\n      \"reason\": \"other_session\",\n      \"records\": 5,\n      \"session_id\": \"s9\"\n    }\n  ]"; !strings.Contains(js.String(), wantJSON) {
				t.Fatalf("JSON lacks %s:\n%s", wantJSON, js.String())
			}
			var text bytes.Buffer
			if err := RenderText(&text, r); err != nil {
				t.Fatal(err)
			}
			if line := "5 records from another session (id \"s9\") ignored: no infer.session record of the artifact declares it\n"; !strings.Contains(text.String(), line) {
				t.Fatalf("text lacks %q:\n%s", line, text.String())
			}
		})
	}
}

// TestConcatenatedSessionsAllCounted: an artifact holding two declared sessions (two
// artifacts concatenated) counts the requests of both and ignores nothing.
func TestConcatenatedSessionsAllCounted(t *testing.T) {
	a := syntheticArtifact(10)
	a.Sessions = append(a.Sessions, artifact.Session{SessionID: "s2", Status: artifact.StatusCompleted})
	for i := range 3 {
		r := a.Requests[i]
		r.SessionID, r.RequestID = "s2", fmt.Sprintf("c1_measured_2_%d", i)
		a.Requests = append(a.Requests, r)
	}
	r, err := Analyze(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.TotalRequests != 13 || len(r.IgnoredRecords) != 0 || r.IgnoredRecords == nil {
		t.Fatalf("total %d, ignored %#v: want 13 and []", r.Summary.TotalRequests, r.IgnoredRecords)
	}
}

// TestOnlyOtherSessionRequests: an artifact whose every request is another session's has no
// request to analyse, and the error says what was ignored.
func TestOnlyOtherSessionRequests(t *testing.T) {
	a := syntheticArtifact(2)
	for i := range a.Requests {
		a.Requests[i].SessionID = "s9"
	}
	_, err := Analyze(a, Options{})
	want := `invalid artifact: artifact has no infer.request record of its own sessions (ignored: 2 of session "s9")`
	if !errors.Is(err, artifact.ErrInvalidArtifact) || err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
