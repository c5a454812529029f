package main

import (
	"fmt"

	"github.com/inferprobe/inferprobe/internal/docgen"
	"github.com/spf13/cobra"
)

func init() { verbs = append(verbs, newDocsCmd) }

// newDocsCmd is `inferprobe docs` (hidden, for maintainers): the generated reference pages
// (package docgen) written under --output, from the root command this verb belongs to.
func newDocsCmd() *cobra.Command {
	var output, source string
	cmd := &cobra.Command{
		Use:    "docs --output DIR",
		Short:  "Write the generated reference pages (CLI, exported series, artifact records) into DIR",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return usageErrorf("--output needs a directory (docs/reference in the repository)")
			}
			if err := docgen.Generate(cmd.Root(), output, source); err != nil {
				return withCode(exitUnexpected, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Reference pages written to %s\n", output)
			return nil
		},
	}
	cmd.Flags().StringVar(&output, "output", "", "the reference directory (docs/reference)")
	cmd.Flags().StringVar(&source, "source", ".", "the repository root (the records page is read from its artifact package's source)")
	return cmd
}
