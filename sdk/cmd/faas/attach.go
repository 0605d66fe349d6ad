package main

// faas attach, detach and attachments: accelerators from the registry's pool.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/spf13/cobra"
)

// registryFlag adds --registry, the registry of the pool (default the one
// `faas login` stored, or $FAAS_REGISTRY).
func registryFlag(cmd *cobra.Command) *string {
	return cmd.Flags().String("registry", "", "registry URL (default $FAAS_REGISTRY or the one faas login stored)")
}

// attachTo attaches listing for cmd, printing its progress unless --json.
func attachTo(cmd *cobra.Command, registry, listing string, opts ...client.AttachOption) (*client.Attachment, error) {
	if !jsonOutput(cmd) {
		opts = append(opts, client.WithAttachProgress(func(s poolapi.State) {
			fmt.Fprintf(cmd.ErrOrStderr(), "attachment %s\n", s)
		}))
	}
	a, err := client.Attach(cmd.Context(), registry, listing, append(opts, client.WithAttachUserAgent("faas-cli"))...)
	if err != nil {
		return nil, failed(fmt.Errorf("attaching %s: %w", listing, err))
	}
	return a, nil
}

func attachCommand() *cobra.Command {
	var share, hold bool
	var lease time.Duration
	var attempts int
	cmd := &cobra.Command{
		Use:   "attach LISTING[:VERSION] [--share] [--lease 30s] [--hold] [--attempts 3]",
		Short: "Attach an accelerator from the pool: a slot on some node running the listing's image",
		Long: `attach asks the registry for an accelerator running LISTING (a listing's
repository, e.g. acme/mnist, or its id) at VERSION (default the newest),
waits until its node has loaded it, and checks that a session opens on it:
over TLS 1.3 to the node, verified against the certificate the registry
pinned for it, or through this host's faasd when the node is this host.

The attachment lives while its lease is renewed. This command exits at
once, leaving the lease to run out (--lease, default 30s) unless a program
renews it; with --hold it renews the lease until interrupted (SIGINT,
SIGTERM), then detaches. --json prints the attachment, its credential
included (the credential opens sessions on the slot: keep it to yourself),
and how this host reached the slot ("session": "tls" or "shared-memory").

--share asks for a tenant window on a chip, possibly one already running
the image for others, instead of whole chips.

When the node fails to load the image, the attachment is placed again on
another node, up to --attempts placements in all. --json prints them as
"attempts" (node and why each ended), also when attach fails: then one
line {"error": ..., "attempts": [...]} before the exit code (1 when the
last node failed too, 6 when no other node had room).`,
		Args: cobra.ExactArgs(1),
		RunE: nil,
	}
	registry := registryFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts := []client.AttachOption{client.WithAttachAttempts(attempts)}
		if share {
			opts = append(opts, client.Shared())
		}
		if lease != 0 {
			opts = append(opts, client.WithLease(lease))
		}
		if !hold {
			opts = append(opts, client.WithoutRenewal())
		}
		a, err := attachTo(cmd, *registry, args[0], opts...)
		var ae *client.AttachError
		if errors.As(err, &ae) && jsonOutput(cmd) {
			if werr := writeJSONLine(cmd, struct {
				Error    string            `json:"error"`
				Attempts []poolapi.Attempt `json:"attempts"`
			}{err.Error(), ae.Attempts}); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		if err := reportAttachment(cmd, a); err != nil {
			return err
		}
		if !hold {
			a.Device().Close()
			return nil
		}
		return holdAttachment(cmd, a)
	}
	cmd.Flags().BoolVar(&share, "share", false, "a tenant window on a chip instead of whole chips")
	cmd.Flags().DurationVar(&lease, "lease", 0, "lease to ask for, whole seconds from 2s to 10m (default 30s)")
	cmd.Flags().BoolVar(&hold, "hold", false, "renew the lease until interrupted, then detach")
	cmd.Flags().IntVar(&attempts, "attempts", client.DefaultAttachAttempts, "placements to try in all when nodes fail to load the image")
	return cmd
}

// reportAttachment prints attachment a and how this host reached its slot.
func reportAttachment(cmd *cobra.Command, a *client.Attachment) error {
	info := a.Info()
	session := "tls"
	if a.Device().Local() {
		session = "shared-memory"
	}
	if jsonOutput(cmd) {
		info.Credential = a.Credential()
		out := struct {
			poolapi.Attachment
			// Session is how this host reached the slot: "tls" to the
			// node, or "shared-memory" through this host's faasd.
			Session string `json:"session"`
			// Attempts are the placements tried, this one last.
			Attempts []poolapi.Attempt `json:"attempts"`
		}{info, session, a.Attempts()}
		return writeJSONLine(cmd, out)
	}
	printAttachment(cmd, info)
	if session == "tls" {
		fmt.Fprintf(cmd.OutOrStdout(), "session     TLS 1.3 to %s, verified against the node's pinned certificate\n", info.Endpoint)
	} else {
		fmt.Fprintln(cmd.OutOrStdout(), "session     shared memory through this host's faasd (the node is this host)")
	}
	return nil
}

// holdAttachment renews a's lease until interrupted or lost, then detaches.
func holdAttachment(cmd *cobra.Command, a *client.Attachment) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
	case <-cmd.Context().Done():
	case <-a.Lost():
		return failed(a.Err())
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
	defer cancel()
	if err := a.Detach(ctx); err != nil {
		return failed(fmt.Errorf("detaching %s: %w", a.ID(), err))
	}
	if !jsonOutput(cmd) {
		fmt.Fprintf(cmd.OutOrStdout(), "detached %s\n", a.ID())
	}
	return nil
}

// writeJSONLine writes v as one line, so that a reader of a --hold
// command's output has it whole at once.
func writeJSONLine(cmd *cobra.Command, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
	return err
}

func printAttachment(cmd *cobra.Command, a poolapi.Attachment) {
	w := cmd.OutOrStdout()
	warm := ""
	if a.Warm {
		warm = " (warm: no load needed)"
	}
	fmt.Fprintf(w, "attachment  %s\n", a.ID)
	fmt.Fprintf(w, "state       %s%s\n", a.State, warm)
	fmt.Fprintf(w, "listing     %s %s (%s@%s)\n", a.Listing, a.Version, a.Repository, shortDigest(a.Digest))
	fmt.Fprintf(w, "node        %s at %s, slot %d\n", a.Node, a.Endpoint, a.Slot)
	fmt.Fprintf(w, "lease       %ds, expires %s\n", a.LeaseSeconds, a.LeaseExpiresAt.Local().Format(time.TimeOnly))
}

func detachCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "detach ID",
		Short: "End an attachment of the pool at once",
		Args:  cobra.ExactArgs(1),
	}
	registry := registryFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		a, err := client.Detach(cmd.Context(), *registry, args[0])
		if err != nil {
			return failed(fmt.Errorf("detaching %s: %w", args[0], err))
		}
		if jsonOutput(cmd) {
			return writeJSON(cmd, a)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", a.ID, a.State)
		return nil
	}
	return cmd
}

func attachmentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attachments",
		Short: "List your attachments of the pool: live ones, and those ended within a day",
		Args:  cobra.NoArgs,
	}
	registry := registryFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		as, err := client.Attachments(cmd.Context(), *registry)
		if err != nil {
			return failed(err)
		}
		if jsonOutput(cmd) {
			if as == nil {
				as = []poolapi.Attachment{}
			}
			return writeJSON(cmd, as)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tLISTING\tVERSION\tNODE\tSLOT\tLEASE EXPIRES")
		for _, a := range as {
			exp := a.LeaseExpiresAt.Local().Format(time.TimeOnly)
			if !a.State.Live() {
				exp = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", a.ID, a.State, a.Listing, a.Version, a.Node, a.Slot, exp)
		}
		return tw.Flush()
	}
	return cmd
}
