package shard

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// exampleSpec is the run deploy/kubernetes/sharded/job.yaml is generated from.
var exampleSpec = JobSpec{
	Name: "inferprobe-sharded", RunID: "sharded-example", Shards: 8, Image: "ghcr.io/inferprobe/inferprobe:latest",
	ProfileArgs: []string{"--base-url", "http://vllm:8000/v1", "--model", "Qwen/Qwen2.5-0.5B-Instruct",
		"--arrival", "poisson", "--rate", "400", "--duration", "120", "--seed", "1"},
}

const examplePath = "../deploy/kubernetes/sharded/job.yaml"

// decodeStrict decodes every document of a manifest into its k8s.io/api type; an unknown
// field (or a document of an unexpected kind) fails.
func decodeStrict(t *testing.T, manifest []byte) (pvcs []corev1.PersistentVolumeClaim, svcs []corev1.Service, jobs []batchv1.Job) {
	t.Helper()
	for i, doc := range bytes.Split(manifest, []byte("\n---\n")) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var err error
		switch head.Kind {
		case "PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			err = yaml.UnmarshalStrict(doc, &o)
			pvcs = append(pvcs, o)
		case "Service":
			var o corev1.Service
			err = yaml.UnmarshalStrict(doc, &o)
			svcs = append(svcs, o)
		case "Job":
			var o batchv1.Job
			err = yaml.UnmarshalStrict(doc, &o)
			jobs = append(jobs, o)
		default:
			t.Fatalf("document %d: unexpected kind %q", i, head.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s): %v", i, head.Kind, err)
		}
	}
	return pvcs, svcs, jobs
}

func TestJobManifestDecodesStrictly(t *testing.T) {
	for _, ns := range []string{"", "load"} {
		spec := exampleSpec
		spec.Namespace, spec.StorageClass = ns, "nfs"
		m, err := JobManifest(spec)
		if err != nil {
			t.Fatal(err)
		}
		pvcs, svcs, jobs := decodeStrict(t, m)
		if len(pvcs) != 1 || len(svcs) != 1 || len(jobs) != 2 {
			t.Fatalf("%d claims, %d services, %d jobs", len(pvcs), len(svcs), len(jobs))
		}
		if pvcs[0].Spec.AccessModes[0] != corev1.ReadWriteMany || *pvcs[0].Spec.StorageClassName != "nfs" || pvcs[0].Spec.Resources.Requests.Storage().String() != "10Gi" {
			t.Fatalf("claim %+v", pvcs[0].Spec)
		}
		svc := svcs[0]
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != CoordinatorPort || svc.Namespace != ns {
			t.Fatalf("service %+v", svc)
		}
		coord, shards := jobs[0], jobs[1]
		for k, v := range svc.Spec.Selector {
			if coord.Spec.Template.Labels[k] != v {
				t.Fatalf("the service's selector %s=%s does not select the coordinator pod", k, v)
			}
			if shards.Spec.Template.Labels[k] == v && k == "app.kubernetes.io/component" {
				t.Fatal("the service selects the shard pods")
			}
		}
		if strings.Join(coord.Spec.Template.Spec.Containers[0].Args, " ") != "coordinate --shards 8 --listen :7070" {
			t.Fatalf("coordinator args %q", coord.Spec.Template.Spec.Containers[0].Args)
		}
		s := shards.Spec
		if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 8 || *s.Parallelism != 8 || *s.BackoffLimit != 0 {
			t.Fatalf("shards job %+v", s)
		}
		c := s.Template.Spec.Containers[0]
		args := strings.Join(c.Args, " ")
		wantCoord := "http://inferprobe-sharded-coordinator:7070"
		if ns != "" {
			wantCoord = "http://inferprobe-sharded-coordinator.load.svc:7070"
		}
		for _, want := range []string{"profile --base-url http://vllm:8000/v1", "--shards 8", "--run-id sharded-example", "--coordinator " + wantCoord,
			"--output /artifacts/sharded-example/shard-$(SHARD_INDEX).jsonl"} {
			if !strings.Contains(args, want) {
				t.Fatalf("shard args %q lack %q", args, want)
			}
		}
		if c.Env[0].Name != "SHARD_INDEX" || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			t.Fatalf("env %+v", c.Env)
		}
		if s.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != pvcs[0].Name || c.VolumeMounts[0].MountPath != "/artifacts" {
			t.Fatal("the shards do not mount the artifacts claim at /artifacts")
		}
	}
	// An unknown field is refused by the strict decode the test relies on.
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionsMode: Indexed\n"), &j); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}

// TestCheckedInManifests: every YAML file under deploy/kubernetes/sharded decodes strictly,
// and job.yaml is exampleSpec's manifest (regenerate with INFERPROBE_UPDATE_MANIFESTS=1).
func TestCheckedInManifests(t *testing.T) {
	want, err := JobManifest(exampleSpec)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("INFERPROBE_UPDATE_MANIFESTS") != "" {
		os.MkdirAll(filepath.Dir(examplePath), 0o755)
		if err := os.WriteFile(examplePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the generated manifest (INFERPROBE_UPDATE_MANIFESTS=1 go test ./shard regenerates it)", examplePath)
	}
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(examplePath), "*.yaml"))
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		decodeStrict(t, b)
	}
}

func TestJobSpecRefused(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*JobSpec)
		want string
	}{
		{func(s *JobSpec) { s.Name = "Bad_Name" }, "DNS-1123"},
		{func(s *JobSpec) { s.Shards = 0 }, "--shards must be within"},
		{func(s *JobSpec) { s.Image = "" }, "--image is required"},
		{func(s *JobSpec) { s.ProfileArgs = append(s.ProfileArgs, "--output=/x") }, "--output is set by the manifest"},
		{func(s *JobSpec) { s.ProfileArgs = append(s.ProfileArgs, "--shard", "1") }, "--shard is set by the manifest"},
	} {
		s := exampleSpec
		s.ProfileArgs = append([]string{}, s.ProfileArgs...)
		tc.mod(&s)
		if _, err := JobManifest(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}
