package main

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/inferprobe/inferprobe/shard"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newK8sJobCmd) }

func newK8sJobCmd() *cobra.Command {
	var s shard.JobSpec
	cmd := &cobra.Command{
		Use:   "k8s-job --shards N --image IMAGE [flags] -- PROFILE-FLAGS…",
		Short: "Print the Kubernetes manifest of a sharded run: an Indexed Job of N shards, the coordinator, a headless Service and the artifacts claim",
		Long: `k8s-job prints, on stdout, the Kubernetes objects of one sharded run of profile: a
ReadWriteMany PersistentVolumeClaim for the artifacts, the coordinator (a one-pod Job running
inferprobe coordinate) behind a headless Service, and the shards: an Indexed Job with
completions and parallelism N whose pod K runs profile PROFILE-FLAGS… --shards N --run-id RUN
--coordinator URL --output /artifacts/RUN/shard-K.jsonl. The flags after -- are profile's
(checked here as profile checks them); --shards, --shard, --run-id, --coordinator and
--output are the manifest's own.

  inferprobe k8s-job --shards 8 --image ghcr.io/inferprobe/inferprobe:latest -- \
    --base-url http://vllm:8000/v1 --model M --arrival poisson --rate 400 --duration 120 | kubectl apply -f -

Once the shards Job completed: inferprobe analyze /artifacts/RUN/ (one exact report).

Exit codes: 0 printed; 2 bad flags.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() > 0 {
				return usageErrorf("k8s-job takes profile's flags after --, not %q", strings.Join(args[:cmd.ArgsLenAtDash()], " "))
			}
			s.ProfileArgs = args
			if s.RunID == "" {
				s.RunID = uuid.NewString()
			}
			if !runIDPattern.MatchString(s.RunID) {
				return usageErrorf("--run-id %q: a run id of a sharded job names its artifact directory: letters, digits, '.', '_' and '-' only (at most 128)", s.RunID)
			}
			m, err := shard.JobManifest(s)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if err := checkProfileArgs(args, s.Shards, s.RunID); err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(m)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&s.Shards, "shards", 0, "load-generator shards (pods of the Indexed Job)")
	f.StringVar(&s.Image, "image", "", "inferprobe container image (deploy/Dockerfile)")
	f.StringVar(&s.Name, "name", "inferprobe-sharded", "prefix of the objects' names (a DNS-1123 label)")
	f.StringVar(&s.Namespace, "namespace", "", "namespace of the objects (default: kubectl's current one)")
	f.StringVar(&s.RunID, "run-id", "", "run id every shard sends (default: a new UUID)")
	f.StringVar(&s.Storage, "storage", "10Gi", "size of the artifacts claim")
	f.StringVar(&s.StorageClass, "storage-class", "", "storage class of the claim (one that offers ReadWriteMany; default: the cluster's)")
	return cmd
}

// checkProfileArgs checks args as profile checks its flags (nothing is run), as shard 0 of
// shards with runID would run them: an unknown flag, a bad value, a missing endpoint or
// model, a flag the manifest sets, or a workload the shards cannot split is exit 2 here
// rather than in every pod.
func checkProfileArgs(args []string, shards int, runID string) error {
	var pf profileFlags
	p := &cobra.Command{Use: "profile", Args: noArgsOptionalValueHint}
	pf.register(p)
	pf.shard.register(p)
	if err := p.ParseFlags(args); err != nil {
		return usageErrorf("profile flags: %v", err)
	}
	if rest := p.Flags().Args(); len(rest) > 0 {
		return usageErrorf("profile flags: unexpected argument %q", rest[0])
	}
	for _, name := range []string{"shards", "shard", "run-id", "coordinator", "output"} {
		if p.Flags().Changed(name) {
			return usageErrorf("profile flag --%s is set by the manifest", name)
		}
	}
	if err := p.ParseFlags([]string{"--shards", strconv.Itoa(shards), "--shard", "0", "--run-id", runID}); err != nil {
		return usageErrorf("profile flags: %v", err)
	}
	if err := pf.shard.apply(p, &pf.w); err != nil {
		return usageErrorf("profile flags: %v", err)
	}
	if _, _, _, err := pf.config(p); err != nil {
		return usageErrorf("profile flags: %v", err)
	}
	return nil
}

// runIDPattern is what a sharded job's run id may be: it names /artifacts/<run id>/.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
