package dashboards

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ruleFS holds the canonical Prometheus rule files (dashboards/rules/*.yml). The promtool unit
// tests under rules/tests/ are not embedded.
//
//go:embed rules/*.yml
var ruleFS embed.FS

// Rules returns the shipped Prometheus rule files: file name (e.g. "inferprobe-slo.rules.yml")
// → file content (YAML, Prometheus rule-file format). The result is a fresh map and fresh
// slices on every call; callers may modify it.
//
// inferprobe-slo.rules.yml records the SLO error ratio per (target, model, probe, slo) over
// 5m, 30m, 1h, 2h, 6h, 1d and 3d (missed / (met + missed); unknown excluded), the error budget
// (1 − inferprobe_slo_objective_ratio), the per-probe request failure ratio and TTFT / e2e
// quantiles; inferprobe-alerts.rules.yml holds the burn-rate and probe-health alerts and needs
// the former.
func Rules() map[string][]byte {
	entries, err := fs.ReadDir(ruleFS, "rules")
	if err != nil {
		// The embedded directory is fixed at build time; failing here is a build defect.
		panic(fmt.Sprintf("dashboards: embedded rules: %v", err))
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := fs.ReadFile(ruleFS, "rules/"+e.Name())
		if err != nil {
			panic(fmt.Sprintf("dashboards: embedded rules: %v", err))
		}
		out[e.Name()] = b
	}
	return out
}

// WriteAll writes every dashboard to dir/grafana/<name>.json and every rule file to
// dir/rules/<name>.yml, creating dir and both subdirectories (mode 0o755; files 0o644) and
// replacing files of the same name. Other files under dir are left alone. It returns an error
// naming the path when dir is empty, when dir exists and is not a directory, or when a
// directory or file cannot be created or written; files written before the failure remain.
func WriteAll(dir string) error {
	if dir == "" {
		return errors.New("dashboards: output directory is empty")
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("dashboards: output path %s exists and is not a directory", dir)
	}
	boards, err := Dashboards()
	if err != nil {
		return err
	}
	if err := writeFiles(filepath.Join(dir, "grafana"), boards); err != nil {
		return err
	}
	return writeFiles(filepath.Join(dir, "rules"), Rules())
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dashboards: create %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return fmt.Errorf("dashboards: write %s: %w", p, err)
		}
	}
	return nil
}
