package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

func newRootCmd() *cobra.Command { return newRootCmdProfiled(nil) }

// newRootCmdProfiled is newRootCmd with the hidden --cpuprofile/--memprofile flags bound to
// prof (nil: a throwaway set).
func newRootCmdProfiled(prof *pprofFlags) *cobra.Command {
	if prof == nil {
		prof = &pprofFlags{}
	}
	root := &cobra.Command{
		Use:           "inferprobe",
		Short:         "Measure LLM inference servers as their users experience them",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	prof.register(root)
	root.AddCommand(newVersionCmd())
	for _, add := range verbs {
		root.AddCommand(add())
	}
	return root
}

// verbs is appended to by each verb's file (init), keeping root.go free of per-verb wiring.
var verbs []func() *cobra.Command

// buildCommit returns the VCS revision recorded by the Go toolchain, or "unknown".
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	commit, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		commit += "-dirty"
	}
	return commit
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "inferprobe %s (commit %s, %s %s/%s)\n",
				version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
