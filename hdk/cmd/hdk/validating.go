package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/validate"
)

func validateCommand() *cobra.Command {
	var quick bool
	cmd := &cobra.Command{
		Use:   "validate DIR|REF",
		Short: "Run the registry's checks on an image and list every finding with its code",
		Long: `validate runs the checks the registry runs when an image is pushed (see
hdk/validate/CODES.md) and prints every finding. DIR is an image source folder
holding image.yaml (built in memory first) or an OCI image layout; REF is a
registry reference. Exit code 1 if any finding is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var img v1.Image
			if _, err := os.Stat(filepath.Join(args[0], "image.yaml")); err == nil {
				m, err := image.Load(filepath.Join(args[0], "image.yaml"))
				if err != nil {
					return fmt.Errorf("%w: %w", errCheck, err)
				}
				if img, err = image.Build(ctx, m); err != nil {
					return fmt.Errorf("%w: %w", errCheck, err)
				}
			} else {
				t, err := parseTarget(args[0])
				if err != nil {
					return err
				}
				if img, err = t.image(ctx); err != nil {
					return err
				}
			}
			r := validate.Image(ctx, img, validate.Options{FullStream: !quick})
			if jsonOutput(cmd) {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(r); err != nil {
					return err
				}
			} else {
				for _, f := range r.Findings {
					fmt.Fprintln(cmd.OutOrStdout(), f)
				}
				if r.OK() {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%d warning(s))\n", args[0], len(r.Findings))
				}
			}
			if err := r.Err(); err != nil {
				return fmt.Errorf("%w: %w", errCheck, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "check .bit headers only, not each configuration stream")
	return cmd
}
