package main

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/services/registry/gc"
	"github.com/fpga-faas/faas/services/registry/server"
)

func gcCommand() *cobra.Command {
	var cfg server.Config
	var opt gc.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc [--dry-run] [--json]",
		Short: "remove blobs no manifest references and stale uploads, once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.GracePeriod < 0 {
				return fmt.Errorf("--grace-period %v: must not be negative", opt.GracePeriod)
			}
			secretsFromEnv(&cfg)
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			opt.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			rep, err := srv.CollectGarbage(cmd.Context(), opt)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			verb := "removed"
			if rep.DryRun {
				verb = "would remove"
			}
			for _, b := range rep.Blobs {
				fmt.Fprintf(out, "%s blob %s (%d bytes)\n", verb, b.Digest, b.Size)
			}
			for _, u := range rep.Uploads {
				fmt.Fprintf(out, "%s upload %s (%d bytes staged)\n", verb, u.ID, u.Size)
			}
			fmt.Fprintf(out, "%s %d of %d blobs (%d bytes) and %d uploads; %d blobs live\n",
				verb, len(rep.Blobs), rep.Scanned, rep.FreedBytes, len(rep.Uploads), rep.Live)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opt.DryRun, "dry-run", false, "print what would be removed; remove nothing")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.DurationVar(&opt.GracePeriod, "grace-period", 0, "spare blobs pushed more recently than this (default 2h); must exceed the longest push")
	f.DurationVar(&opt.UploadTTL, "upload-ttl", 0, "abort uploads idle for longer than this (default 24h; negative: never)")
	storeFlags(f, &cfg)
	return cmd
}
