package run

import (
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
)

// TestWarningsRepeatedPrompts: unique prompts without a cache reset warn that a fixed seed
// repeats them across runs, never when the run has a seed of its own.
func TestWarningsRepeatedPrompts(t *testing.T) {
	cfg := &loadgen.Config{RunID: "r1", Seed: 7, PromptMode: prompt.Unique, InputTokens: []int{64}}
	has := func() bool {
		for _, w := range Warnings(cfg) {
			if strings.HasPrefix(w, "prompts are the same for every run with --seed 7;") {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatalf("no repeated-prompts warning with a fixed seed: %q", Warnings(cfg))
	}
	cfg.UseRunSeed()
	for _, w := range Warnings(cfg) {
		if strings.Contains(w, "prompts are the same for every run") {
			t.Fatalf("a run with its own seed warned: %q", w)
		}
	}
}

// Credentials in the endpoint URL are dropped, and the run says so.
func TestWarningsEndpointCredentials(t *testing.T) {
	cfg := &loadgen.Config{Endpoint: "http://u:secret@127.0.0.1:8000/v1/chat/completions", InputTokens: []int{64}}
	var found string
	for _, w := range Warnings(cfg) {
		if strings.Contains(w, "user:password is not sent") {
			found = w
		}
	}
	if found == "" || strings.Contains(found, "secret") {
		t.Fatalf("warnings %q", Warnings(cfg))
	}
	cfg.Endpoint = "http://127.0.0.1:8000/v1/chat/completions"
	for _, w := range Warnings(cfg) {
		if strings.Contains(w, "user:password") {
			t.Fatalf("warned without credentials: %q", w)
		}
	}
}
