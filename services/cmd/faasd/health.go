package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// healthCommand asks a running faasd whether it serves: the probe of a
// container orchestrator, which cannot reach a unix socket itself (the
// Kubernetes DaemonSet in deploy/k8s runs it as an exec probe).
func healthCommand() *cobra.Command {
	var socket string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health [--socket PATH]",
		Short: "Exit 0 when the faasd on --socket answers GET /healthz",
		Long: `health sends GET /healthz to the faasd serving the agent API on --socket and
exits 0 when it answers 200 within --timeout. It needs no credentials.

Exit codes: 0 healthy; 1 no answer, or not 200; 2 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return health(cmd.Context(), socket, timeout) },
	}
	fl := cmd.Flags()
	fl.StringVar(&socket, "socket", env("FAASD_SOCKET", agentapi.DefaultSocket), "unix socket of the API [$FAASD_SOCKET]")
	fl.DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	return cmd
}

func health(ctx context.Context, socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://faasd/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errCheck, socket, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: GET /healthz: %s", errCheck, socket, resp.Status)
	}
	return nil
}
