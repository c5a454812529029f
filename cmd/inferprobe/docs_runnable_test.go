package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/internal/testkit"
	"github.com/inferprobe/inferprobe/sim"
)

// runnableInfo is the info string of a fenced block the docs test runs.
const runnableInfo = "sh runnable"

// docBlock is one runnable block of a Markdown file: its first line's number and its text.
type docBlock struct {
	line int
	text string
}

// runnableBlocks returns the blocks fenced as ```sh runnable in the Markdown file at path, in
// order. Errors: the file cannot be read, or a block is not closed.
func runnableBlocks(path string) ([]docBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []docBlock
	var cur *docBlock
	fence := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = "```"
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == runnableInfo {
				cur = &docBlock{line: n}
			}
		case fence != "" && trimmed == fence:
			if cur != nil {
				blocks = append(blocks, *cur)
			}
			fence, cur = "", nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fence != "" {
		return nil, fmt.Errorf("%s: a code block is not closed", path)
	}
	return blocks, nil
}

// TestRunnableBlocks: the extractor finds only blocks fenced as runnable, with their lines.
func TestRunnableBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "page.md")
	doc := "# t\n\n```sh\nnot run\n```\n\n```sh runnable\necho one\necho two\n```\n\n```yaml\na: 1\n```\n```sh runnable\necho three\n```\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runnableBlocks(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{{7, "echo one\necho two\n"}, {15, "echo three\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
	if err := os.WriteFile(p, []byte("```sh runnable\necho\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runnableBlocks(p); err == nil {
		t.Error("an unclosed block was accepted")
	}
}

// TestRunnableDocs runs the runnable blocks of docs/getting-started.md and docs/guides/*.md,
// as a reader would: each file's blocks in order, in one bash shell, in a new directory, with
// inferprobe on PATH (this test binary, run as the command) and the simulated engine
// listening. The engine runs in-process on free ports; in each block 127.0.0.1:8000 (the
// engine), :4317 and :4318 (the span receiver, which the engine exports to) and :9464 (a
// /metrics listener) become those ports, and /tmp/inferprobe-traces the engine's profiler
// directory. A block that exits non-zero fails the test with its file and line.
func TestRunnableDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documentation's examples against the simulated engine")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	docs := "../../docs"
	files := []string{filepath.Join(docs, "getting-started.md")}
	guides, err := filepath.Glob(filepath.Join(docs, "guides", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, guides...)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := "#!/usr/bin/env bash\nIFS=$'\\x1f'\nINFERPROBE_TEST_ARGS=\"$*\" exec " + shellQuote(self) + " -test.run='^$'\n"
	if err := os.WriteFile(filepath.Join(bin, "inferprobe"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	grpc, httpAddr, metrics := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	profDir := t.TempDir()
	srv := testkit.StartSim(t, func(c *sim.Config) {
		c.OTLPTracesEndpoint, c.OTLPProtocol, c.OTLPBatchDelay = grpc, sim.ProtocolGRPC, 200*time.Millisecond
		c.ProfilerDir = profDir
	})
	engine := strings.TrimPrefix(srv.URL(), "http://")
	subst := strings.NewReplacer(
		"127.0.0.1:8000", engine, "localhost:8000", engine,
		"127.0.0.1:4317", grpc, "127.0.0.1:4318", httpAddr, "127.0.0.1:9464", metrics,
		"/tmp/inferprobe-traces", profDir)

	total := 0
	for _, file := range files {
		blocks, err := runnableBlocks(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			continue
		}
		total += len(blocks)
		rel := strings.TrimPrefix(filepath.ToSlash(file), "../../")
		t.Run(rel, func(t *testing.T) {
			var script strings.Builder
			script.WriteString("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n")
			for _, b := range blocks {
				fmt.Fprintf(&script, "echo '### %s:%d' >&2\n%s", rel, b.line, subst.Replace(b.text))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bash, "-c", script.String())
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				at := "the first block"
				if i := strings.LastIndex(string(out), "### "); i >= 0 {
					at, _, _ = strings.Cut(string(out[i+4:]), "\n")
				}
				t.Fatalf("the runnable block at %s stopped working: %v\n%s", at, err, tail(string(out), 4000))
			}
			t.Logf("%s: %d blocks ran", rel, len(blocks))
			if os.Getenv("INFERPROBE_DOCS_OUTPUT") != "" {
				t.Logf("output:\n%s", out)
			}
		})
	}
	if total < 5 {
		t.Errorf("%d runnable blocks in getting-started.md and guides/, want at least 5 (fenced as ```%s)", total, runnableInfo)
	}
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
