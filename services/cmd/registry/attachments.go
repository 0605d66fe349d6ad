package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/server"
)

// attachmentsCommand is the operator's view of the accelerator pool
// (package api's pool functions, sdk/poolapi's types): every tenant's
// attachments, one's history, and detaching one.
func attachmentsCommand() *cobra.Command {
	var cfg server.Config
	var f attachmentsFlags
	cmd := &cobra.Command{
		Use:   "attachments",
		Short: "list, show and detach the pool's attachments",
		Long: `The pool's attachments, every tenant's, as an operator sees them.

  registry attachments list [--state S] [--node NODE] [--tenant T] [--limit N]
                                      newest first, ended ones of any age included;
                                      --state is pending, loading, ready, failed,
                                      detached, expired, lost, or live (the first three);
                                      NODE a node id or host name, T an account id or name
  registry attachments show ID        one attachment and its history (its audit log)
  registry attachments detach ID      end it now, as DELETE /api/v1/attachments/{id} by an
                                      admin does: its node releases the slot; audited as
                                      attachment.detach by cli:<user>. Detaching an ended
                                      attachment changes nothing and says so.

Exit codes: 0 done (also detach of an ended attachment); 2 usage error,
unknown attachment or any other failure.`,
	}
	withMarket := func(run func(ctx context.Context, pool *api.API, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			secretsFromEnv(&cfg)
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			return run(cmd.Context(), srv.Market(), cmd.OutOrStdout(), args)
		}
	}
	list := &cobra.Command{Use: "list", Short: "list attachments", Args: cobra.NoArgs, RunE: withMarket(f.list)}
	list.Flags().StringVar(&f.filter.State, "state", "", "only attachments in this state (or live)")
	list.Flags().StringVar(&f.filter.Node, "node", "", "only attachments on this node (id or host name)")
	list.Flags().StringVar(&f.filter.Tenant, "tenant", "", "only this tenant's attachments (account id or name)")
	list.Flags().IntVar(&f.filter.Limit, "limit", 0, fmt.Sprintf("at most this many (default and most %d)", api.MaxLimit))
	show := &cobra.Command{Use: "show ID", Short: "show an attachment and its history", Args: cobra.ExactArgs(1), RunE: withMarket(f.show)}
	detach := &cobra.Command{Use: "detach ID", Short: "end an attachment now", Args: cobra.ExactArgs(1), RunE: withMarket(f.detach)}
	addOperatorCommands(cmd, &cfg, &f.asJSON, list, show, detach)
	return cmd
}

// attachmentsFlags are the flags of the attachments subcommands.
type attachmentsFlags struct {
	asJSON bool
	filter api.AttachmentFilter // list's
}

// list prints the attachments the filter selects, newest first.
func (f *attachmentsFlags) list(ctx context.Context, pool *api.API, out io.Writer, _ []string) error {
	as, err := pool.Attachments(ctx, f.filter)
	if err != nil {
		return err
	}
	if f.asJSON {
		if as == nil {
			as = []poolapi.Attachment{}
		}
		return report(out, true, as, "")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTENANT\tLISTING\tVERSION\tNODE\tSLOT\tSHARE\tCREATED\tENDED")
	for _, a := range as {
		ended := "-"
		if a.EndedAt != nil {
			ended = a.EndedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%v\t%s\t%s\n", a.ID, a.State, a.Tenant, a.Listing, a.Version, a.Node, a.Slot,
			a.Share, a.CreatedAt.UTC().Format(time.RFC3339), ended)
	}
	return tw.Flush()
}

// show prints attachment args[0] and its history.
func (f *attachmentsFlags) show(ctx context.Context, pool *api.API, out io.Writer, args []string) error {
	h, err := pool.AttachmentHistory(ctx, args[0])
	if err != nil {
		return err
	}
	if f.asJSON {
		return report(out, true, h, "")
	}
	a := h.Attachment
	fmt.Fprintf(out, "attachment  %s\nstate       %s", a.ID, a.State)
	if a.Error != "" {
		fmt.Fprintf(out, ": %s", a.Error)
	}
	fmt.Fprintf(out, "\ntenant      %s\nlisting     %s %s (%s@%s)\nnode        %s (%s) slot %d, share %v, warm %v\n",
		a.Tenant, a.Listing, a.Version, a.Repository, a.Digest, a.Node, a.NodeID, a.Slot, a.Share, a.Warm)
	fmt.Fprintf(out, "lease       %ds, expires %s\ncreated     %s\n", a.LeaseSeconds, a.LeaseExpiresAt.UTC().Format(time.RFC3339),
		a.CreatedAt.UTC().Format(time.RFC3339))
	if a.EndedAt != nil {
		fmt.Fprintf(out, "ended       %s\n", a.EndedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out, "history:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range h.History {
		outcome := ""
		if e.Outcome != "" && e.Outcome != "ok" {
			outcome = " (" + e.Outcome + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339Nano), e.Action, outcome, e.ActorName, e.Details)
	}
	return tw.Flush()
}

// detach ends attachment args[0].
func (f *attachmentsFlags) detach(ctx context.Context, pool *api.API, out io.Writer, args []string) error {
	a, ended, err := pool.DetachAttachment(ctx, operator(), args[0])
	if err != nil {
		return err
	}
	if !ended {
		return report(out, f.asJSON, a, "attachment %s had already ended: %s\n", a.ID, a.State)
	}
	return report(out, f.asJSON, a, "attachment %s detached; node %s releases slot %d\n", a.ID, a.Node, a.Slot)
}
