// Package docgen writes the reference pages that are generated from the code, so that they
// cannot drift from it: one Markdown page per command of the CLI (from the cobra command
// tree, through cobra's doc generator) and the list of exported Prometheus series (from the
// exporter's registry). A golden test regenerates them and compares them byte for byte
// with the checked-in files under docs/reference.
package docgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// CLIDir is the directory, under the reference directory, of the CLI pages.
const CLIDir = "cli"

// SeriesFile is the file, under the reference directory, of the exported series.
const SeriesFile = "metrics.md"

// Generate writes the generated reference pages under dir: dir/cli/<command path>.md for
// every available command of root (hidden commands, help and the docs verb itself left
// out), dir/metrics.md and dir/records.md (from the artifact package's source under the
// repository root src). It removes any other .md file in dir/cli, so that a removed
// command's page goes too. root is changed only as cobra's own Execute would change it: the
// default completion command is added, and every command's generated-on footer is turned
// off (the pages must not change from one day to the next). Errors: dir cannot be written.
func Generate(root *cobra.Command, dir, src string) error {
	files, err := Files(root, src)
	if err != nil {
		return err
	}
	cli := filepath.Join(dir, CLIDir)
	if err := os.MkdirAll(cli, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(cli, "*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, keep := files[filepath.ToSlash(filepath.Join(CLIDir, filepath.Base(p)))]; !keep {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for _, name := range sortedKeys(files) {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Files returns the generated pages by their slash-separated path under the reference
// directory ("cli/inferprobe_profile.md", "metrics.md", "records.md"); src is the
// repository root. See Generate for what root undergoes.
func Files(root *cobra.Command, src string) (map[string][]byte, error) {
	out := map[string][]byte{}
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		var buf bytes.Buffer
		buf.WriteString(cliHeader)
		if err := doc.GenMarkdownCustom(c, &buf, func(s string) string { return s }); err != nil {
			return fmt.Errorf("%s: %w", c.CommandPath(), err)
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		out[CLIDir+"/"+name] = buf.Bytes()
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	series, err := SeriesPage()
	if err != nil {
		return nil, err
	}
	out[SeriesFile] = series
	records, err := RecordsPage(filepath.Join(src, "artifact"))
	if err != nil {
		return nil, err
	}
	out[RecordsFile] = records
	return out, nil
}

// cliHeader opens every CLI page: where it comes from and how to regenerate it.
const cliHeader = "<!-- Generated from the command's flags by `inferprobe docs --output docs/reference`: do not edit. -->\n\n"

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
