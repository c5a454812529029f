package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// artifactsFixture makes a probe directory with four artifacts (named by start time, as
// execute names them), modified 10, 5, 2 and 0 days before now, plus a file of another kind,
// a directory and a symlink named like artifacts.
func artifactsFixture(t *testing.T, now time.Time) string {
	t.Helper()
	dir := t.TempDir()
	for i, age := range []int{10, 5, 2, 0} {
		name := now.AddDate(0, 0, -age).UTC().Format("20060102T150405.000Z") + "-0000000" + string(rune('a'+i)) + ".jsonl"
		p := writeFile(t, dir, name, "{}\n")
		mt := now.Add(-time.Duration(age) * 24 * time.Hour)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	old := now.Add(-100 * 24 * time.Hour)
	notes := writeFile(t, dir, "notes.txt", "keep me")
	if err := os.Chtimes(notes, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "00000000T000000.000Z-dir.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, "00000000T000000.000Z-link.jsonl")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRetain(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	others := []string{"00000000T000000.000Z-dir.jsonl", "00000000T000000.000Z-link.jsonl", "notes.txt"}
	name := func(age int, i int) string {
		return now.AddDate(0, 0, -age).UTC().Format("20060102T150405.000Z") + "-0000000" + string(rune('a'+i)) + ".jsonl"
	}
	cases := []struct {
		name   string
		keep   int
		maxAge time.Duration
		want   []string // artifacts left
	}{
		{"no limits", 0, 0, []string{name(10, 0), name(5, 1), name(2, 2), name(0, 3)}},
		{"keep 2", 2, 0, []string{name(2, 2), name(0, 3)}},
		{"keep more than there are", 10, 0, []string{name(10, 0), name(5, 1), name(2, 2), name(0, 3)}},
		{"max age 3 days", 0, 3 * 24 * time.Hour, []string{name(2, 2), name(0, 3)}},
		{"max age 7 days", 0, 7 * 24 * time.Hour, []string{name(5, 1), name(2, 2), name(0, 3)}},
		{"both: keep 3, max age 3 days", 3, 3 * 24 * time.Hour, []string{name(2, 2), name(0, 3)}},
		{"both: keep 1, max age 7 days", 1, 7 * 24 * time.Hour, []string{name(0, 3)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := artifactsFixture(t, now)
			if err := retain(dir, tc.keep, tc.maxAge, now); err != nil {
				t.Fatal(err)
			}
			want := append(append([]string(nil), tc.want...), others...)
			sort.Strings(want)
			if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("left\n %q\nwant\n %q", got, want)
			}
		})
	}
	// An artifact's tables directory goes with it; another's stays.
	dir := artifactsFixture(t, now)
	for _, n := range []string{name(10, 0), name(0, 3)} {
		if err := os.Mkdir(filepath.Join(dir, TablesDir(n)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, TablesDir(n)), "index.html", "x")
	}
	if err := retain(dir, 3, 0, now); err != nil {
		t.Fatal(err)
	}
	want := append([]string{name(5, 1), name(2, 2), name(0, 3), TablesDir(name(0, 3))}, others...)
	sort.Strings(want)
	if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("left\n %q\nwant\n %q", got, want)
	}
	if err := retain(filepath.Join(t.TempDir(), "missing"), 1, time.Hour, now); err != nil {
		t.Fatalf("a missing directory: %v", err)
	}
	f := writeFile(t, t.TempDir(), "file", "")
	if err := retain(f, 1, time.Hour, now); err == nil {
		t.Fatal("a file as the directory: no error")
	}
}
