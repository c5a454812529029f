package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/internal/docgen"
)

// referenceDir is the checked-in reference directory, from this package's directory.
const referenceDir = "../../docs/reference"

// TestGeneratedReferenceIsCurrent regenerates the CLI pages, the exported series list and
// the records page from this binary's command tree, the exporter's registry and the
// artifact package's types into a temporary directory
// and compares them byte for byte with docs/reference; a stale or extra page fails with
// the command that updates them.
func TestGeneratedReferenceIsCurrent(t *testing.T) {
	const update = "run `go run ./cmd/inferprobe docs --output docs/reference` from the repository root and commit the result"
	dir := t.TempDir()
	if code := runQuiet("docs", "--output", dir, "--source", "../.."); code != 0 {
		t.Fatalf("inferprobe docs exited %d", code)
	}
	want, err := docgen.Files(newRootCmd(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range want {
		gen, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gen, body) {
			t.Errorf("the docs verb and docgen.Files disagree on %s", name)
		}
		have, err := os.ReadFile(filepath.Join(referenceDir, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("docs/reference/%s is missing: %s", name, update)
			continue
		}
		if !bytes.Equal(have, body) {
			t.Errorf("docs/reference/%s differs from what the code generates (first difference at line %d): %s",
				name, firstDiffLine(have, body), update)
		}
	}
	pages, err := filepath.Glob(filepath.Join(referenceDir, docgen.CLIDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if _, ok := want[docgen.CLIDir+"/"+filepath.Base(p)]; !ok {
			t.Errorf("docs/reference/%s/%s documents no command: %s", docgen.CLIDir, filepath.Base(p), update)
		}
	}
	if len(want) < 10 || !strings.Contains(string(want["cli/inferprobe_profile.md"]), "--base-url") {
		t.Errorf("generated %d pages; profile's page lacks --base-url", len(want))
	}
}

// firstDiffLine is the 1-based line at which a and b first differ.
func firstDiffLine(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
