package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/inferprobe/inferprobe/dashboards"
)

func init() { verbs = append(verbs, newDashboardsCmd) }

func newDashboardsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "dashboards",
		Short: "Write the Grafana dashboards and Prometheus rule files for your own Grafana and Prometheus",
		Long: `dashboards writes OUTPUT/grafana/*.json (Grafana dashboards: Overview, Server join, GPU and
memory; import them, or provision the directory) and OUTPUT/rules/*.yml (recording rules
and SLO burn-rate alerts; list them under rule_files in prometheus.yml). Existing files of
the same names are replaced.

Exit codes: 0 written; 2 no --output; 1 the directory cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return usageErrorf("--output is required")
			}
			if err := dashboards.WriteAll(output); err != nil {
				return withCode(exitUnexpected, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s/grafana/*.json and %s/rules/*.yml\n", output, output)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "directory to write into (created when missing)")
	return cmd
}
