package analyze

import (
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
