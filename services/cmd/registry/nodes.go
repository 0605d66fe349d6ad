package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
	"github.com/fpga-faas/faas/services/registry/server"
)

// nodesCommand is the operator's side of node trust (package nodetrust):
// which nodes may receive data keys.
func nodesCommand() *cobra.Command {
	var cfg server.Config
	var f nodesFlags
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "list, approve, revoke and repin nodes; make one-time enrollment tokens",
		Long: `A node agent registers itself with its public key, but the registry releases
no data key to it until an operator approves it, or it registered with a
one-time enrollment token. Revoking a node ends that for good.

  registry nodes list                 every node with its state (pending, approved, revoked)
  registry nodes approve NODE         NODE is a node id or host name
  registry nodes revoke NODE
  registry nodes repin NODE           forget the node's pinned TLS certificate; the next
                                      one it reports is pinned (after its key changed)
  registry nodes enroll [--ttl 1h]    print a one-time enrollment token for faasd
                                      (--enrollment-token-file or $FAAS_ENROLLMENT_TOKEN)

Exit codes: 0 done; 2 usage error, unknown node or any other failure.`,
	}
	withStore := func(run func(ctx context.Context, srv *server.Server, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			secretsFromEnv(&cfg)
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			return run(cmd.Context(), srv, cmd.OutOrStdout(), args)
		}
	}
	list := &cobra.Command{Use: "list", Short: "list nodes", Args: cobra.NoArgs, RunE: withStore(f.list)}
	approve := &cobra.Command{Use: "approve NODE", Short: "trust a node with data keys", Args: cobra.ExactArgs(1), RunE: withStore(f.trust(true))}
	revoke := &cobra.Command{Use: "revoke NODE", Short: "stop trusting a node, for good", Args: cobra.ExactArgs(1), RunE: withStore(f.trust(false))}
	repin := &cobra.Command{Use: "repin NODE", Short: "forget a node's pinned TLS certificate", Args: cobra.ExactArgs(1), RunE: withStore(f.repin)}
	enroll := &cobra.Command{Use: "enroll", Short: "print a one-time enrollment token", Args: cobra.NoArgs, RunE: withStore(f.enroll)}
	enroll.Flags().DurationVar(&f.ttl, "ttl", nodetrust.DefaultEnrollmentTTL, "how long the token stays usable")
	addOperatorCommands(cmd, &cfg, &f.asJSON, list, approve, revoke, repin, enroll)
	return cmd
}

// nodesFlags are the flags of the nodes subcommands.
type nodesFlags struct {
	asJSON bool
	ttl    time.Duration // enroll's
}

// list prints every node with its state.
func (f *nodesFlags) list(ctx context.Context, srv *server.Server, out io.Writer, _ []string) error {
	nodes, err := nodetrust.List(ctx, srv.Pool())
	if err != nil {
		return err
	}
	if f.asJSON {
		if nodes == nil {
			nodes = []nodetrust.Node{}
		}
		return json.NewEncoder(out).Encode(nodes)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tACCOUNT\tSTATE\tLAST HEARTBEAT\tENDPOINT\tATTACHMENTS")
	for _, n := range nodes {
		hb := "never"
		if n.LastHeartbeatAt != nil {
			hb = n.LastHeartbeatAt.UTC().Format(time.RFC3339)
		}
		ep := n.Endpoint
		if ep == "" {
			ep = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", n.ID, n.Hostname, n.Account, n.State(), hb, ep, n.Attachments)
	}
	return tw.Flush()
}

// trust approves or revokes node args[0].
func (f *nodesFlags) trust(approve bool) func(ctx context.Context, srv *server.Server, out io.Writer, args []string) error {
	return func(ctx context.Context, srv *server.Server, out io.Writer, args []string) error {
		action, set, verb := "node.revoke", nodetrust.Revoke, "revoked"
		if approve {
			action, set, verb = "node.approve", nodetrust.Approve, "approved"
		}
		actor := operator()
		err := pgx.BeginFunc(ctx, srv.Pool(), func(tx pgx.Tx) error {
			id, err := nodetrust.Resolve(ctx, tx, args[0])
			if err != nil {
				return err
			}
			if err := set(ctx, tx, id, actor); err != nil {
				return err
			}
			args[0] = id
			return nodetrust.Audit(ctx, tx, actor, action, "node", id, nil)
		})
		if err != nil {
			return err
		}
		return report(out, f.asJSON, map[string]string{"id": args[0], "state": verb}, "node %s %s\n", args[0], verb)
	}
}

// repin forgets node args[0]'s pinned TLS certificate.
func (f *nodesFlags) repin(ctx context.Context, srv *server.Server, out io.Writer, args []string) error {
	actor := operator()
	err := pgx.BeginFunc(ctx, srv.Pool(), func(tx pgx.Tx) error {
		id, err := nodetrust.Resolve(ctx, tx, args[0])
		if err != nil {
			return err
		}
		if _, err := nodetrust.Repin(ctx, tx, id); err != nil {
			return err
		}
		args[0] = id
		return nodetrust.Audit(ctx, tx, actor, "node.repin", "node", id, nil)
	})
	if err != nil {
		return err
	}
	return report(out, f.asJSON, map[string]string{"id": args[0], "tls_certificate": ""}, "node %s repinned: its next certificate is pinned\n", args[0])
}

// enroll prints a one-time enrollment token.
func (f *nodesFlags) enroll(ctx context.Context, srv *server.Server, out io.Writer, _ []string) error {
	actor := operator()
	var e registryapi.Enrollment
	err := pgx.BeginFunc(ctx, srv.Pool(), func(tx pgx.Tx) error {
		var err error
		if e, err = nodetrust.CreateEnrollment(ctx, tx, actor, f.ttl); err != nil {
			return err
		}
		return nodetrust.Audit(ctx, tx, actor, "node.enrollment.create", "enrollment", e.ID, map[string]any{"expires_at": e.ExpiresAt})
	})
	if err != nil {
		return err
	}
	return report(out, f.asJSON, e, "%s\n", e.Token)
}

// operator names who runs the command, for the audit log.
func operator() string {
	if u, err := user.Current(); err == nil {
		return "cli:" + u.Username
	}
	return "cli"
}

func report(out io.Writer, asJSON bool, v any, format string, args ...any) error {
	if asJSON {
		return json.NewEncoder(out).Encode(v)
	}
	_, err := fmt.Fprintf(out, format, args...)
	return err
}
