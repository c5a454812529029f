package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCaptured runs the command in-process and returns its exit code and stderr.
func runCaptured(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	os.Stdout, os.Stderr = devnull, f
	code := execute(args)
	os.Stdout, os.Stderr = stdout, stderr
	devnull.Close()
	f.Close()
	b, _ := os.ReadFile(f.Name())
	return code, string(bytes.TrimSpace(b))
}

func TestProfileShardSettingsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.jsonl")
	base := []string{"profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--arrival", "poisson", "--rate", "5", "--requests", "4"}
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--shards", "0"}, "", "--shards must be within 1..10000, not 0"},
		{[]string{"--shards", "4", "--shard", "4", "--run-id", "r"}, "", "--shard=4 is outside 0..3"},
		{[]string{"--shards", "4", "--shard", "-1", "--run-id", "r"}, "", "--shard=-1 is outside 0..3"},
		{[]string{"--shards", "4", "--shard", "x", "--run-id", "r"}, "", `--shard="x" is not an integer`},
		{[]string{"--shards", "4", "--run-id", "r"}, "", "--shards 4 needs --shard K or $JOB_COMPLETION_INDEX"},
		{[]string{"--shards", "4", "--run-id", "r"}, "2.5", `$JOB_COMPLETION_INDEX="2.5" is not an integer`},
		{[]string{"--shards", "4", "--run-id", "r"}, "7", "$JOB_COMPLETION_INDEX=7 is outside 0..3"},
		{[]string{"--shards", "4", "--shard", "1"}, "", "--shards 4 needs --run-id"},
	} {
		t.Setenv("JOB_COMPLETION_INDEX", tc.env)
		code, stderr := runCaptured(t, append(append([]string{}, base...), tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v (env %q): exit %d, stderr %q; want 2 and %q", tc.args, tc.env, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v wrote %s", tc.args, out)
		}
	}
	closed := []string{"profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", out, "--concurrency", "2", "--shards", "3", "--shard", "0", "--run-id", "r"}
	if code, stderr := runCaptured(t, closed...); code != exitUsage || !strings.Contains(stderr, "--concurrency 2 is below --shards 3") {
		t.Errorf("closed loop below the shard count: exit %d, %q", code, stderr)
	}
}

func TestK8sJobPrintsTheManifest(t *testing.T) {
	out := filepath.Join(t.TempDir(), "job.yaml")
	f, _ := os.Create(out)
	stdout := os.Stdout
	os.Stdout = f
	code := execute([]string{"k8s-job", "--shards", "4", "--image", "img:1", "--run-id", "r1", "--", "--base-url", "http://vllm:8000/v1", "--model", "m", "--arrival", "poisson", "--rate", "50", "--requests", "400"})
	os.Stdout = stdout
	f.Close()
	b, _ := os.ReadFile(out)
	if code != 0 || !strings.Contains(string(b), "completionMode: Indexed") || !strings.Contains(string(b), `"--shards","4","--run-id","r1","--coordinator","http://inferprobe-sharded-coordinator:7070"`) {
		t.Fatalf("exit %d, manifest:\n%s", code, b)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"k8s-job", "--shards", "4", "--image", "i", "--", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"k8s-job", "--shards", "4", "--image", "i", "--", "--model", "m", "--output", "x"}, "--output is set by the manifest"},
		{[]string{"k8s-job", "--shards", "0", "--image", "i", "--", "--model", "m"}, "--shards must be within 1..1000"},
		{[]string{"k8s-job", "--shards", "2", "--", "--model", "m"}, "--image is required"},
		{[]string{"k8s-job", "--shards", "2", "--image", "i", "--storage", "lots", "--", "--model", "m"}, "is not a Kubernetes quantity"},
		// profile's own checks, as shard 0 would run them
		{[]string{"k8s-job", "--shards", "2", "--image", "i"}, "one of --endpoint or --base-url is required"},
		{[]string{"k8s-job", "--shards", "2", "--image", "i", "--", "--base-url", "http://v/v1", "--model", "M", "--arrival", "poisson", "--rate", "-1", "--duration", "1"}, "--rate values must be finite and > 0"},
		{[]string{"k8s-job", "--shards", "2", "--image", "i", "--", "--base-url", "http://v/v1", "--model", "M", "--concurrency", "1", "--requests", "4"}, "is below --shards 2"},
		{[]string{"k8s-job", "--shards", "2", "--image", "i", "--run-id", "a b/c", "--", "--base-url", "http://v/v1", "--model", "M"}, "names its artifact directory"},
	} {
		if code, stderr := runCaptured(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestCoordinateRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinate"}, "--shards must be within 1..10000 (as profile's), not 0"},
		{[]string{"coordinate", "--shards", "20000"}, "--shards must be within 1..10000"},
		{[]string{"coordinate", "--shards", "2", "--start-delay", "0"}, "--start-delay must be within"},
		{[]string{"coordinate", "--shards", "2", "--start-deadline", "NaN"}, "--start-deadline must be within"},
		{[]string{"profile", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--output", filepath.Join(t.TempDir(), "a"), "--shards", "2", "--shard", "0", "--run-id", "r", "--coordinator", "ftp://x"}, "--coordinator must be an http or https URL"},
	} {
		if code, stderr := runCaptured(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
