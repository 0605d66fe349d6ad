package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/services/registry/server"
)

// monthsCommand closes months for billing from the command line, as an
// admin's POST /api/v1/months/{month}/close does (docs/ARCHITECTURE.md,
// "Money").
func monthsCommand() *cobra.Command {
	var cfg server.Config
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "months",
		Short: "close months for billing",
		Long: `A month is billed when an operator closes it, once it is over and after
the month before it: its invoice lines, with adjustments for earlier
usage reported since, are then stored for good. Nothing closes a month
by itself.

  registry months close 2026-10       close October 2026 (UTC), at the platform fee
                                      of --platform-fee-bps; audited as
                                      statement.close by cli:<user>

Exit codes: 0 done; 2 usage error, a month not over, closed already or
out of order, or any other failure.`,
	}
	closeMonth := &cobra.Command{Use: "close MONTH", Short: "close a month for billing", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			secretsFromEnv(&cfg)
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			return closeMonthNow(cmd.Context(), srv, cmd.OutOrStdout(), args[0], asJSON)
		}}
	intFlag(closeMonth.Flags(), &cfg.PlatformFeeBasisPoints, "platform-fee-bps",
		"the platform's fee on ISVs' revenue in basis points, as serve's (default 2000, 20%; negative: none)")
	addOperatorCommands(cmd, &cfg, &asJSON, closeMonth)
	return cmd
}

func closeMonthNow(ctx context.Context, srv *server.Server, out io.Writer, month string, asJSON bool) error {
	m, err := srv.Market().CloseMonth(ctx, operator(), month)
	if err != nil {
		return err
	}
	return report(out, asJSON, m, "month %s closed: %d lines stored, platform fee %d basis points\n", m.Month, m.Lines, m.FeeBasisPoints)
}
