package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/spf13/cobra"
)

// registryURL turns REGISTRY ("host:port", "https://host:port" or, on the
// loopback interface only, "http://host:port") into a base URL.
func registryURL(reg string) (string, error) {
	if !strings.Contains(reg, "://") {
		reg = "https://" + reg
	}
	u, err := url.Parse(reg)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return "", usageErrorf("registry %q: want host:port or https://host:port", reg)
	}
	switch u.Scheme {
	case "https":
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", usageErrorf("registry %q: plain http is allowed only on the loopback interface; use https", reg)
		}
	default:
		return "", usageErrorf("registry %q: want host:port or https://host:port", reg)
	}
	return u.Scheme + "://" + u.Host, nil
}

// registryError classifies a failed call of the registry for the exit
// codes.
func registryError(base string, err error) error {
	var e *registryclient.Error
	switch {
	case !errors.As(err, &e):
		return err
	case e.Status == 0:
		return fmt.Errorf("registry %s: %w: %w", base, client.ErrUnavailable, err)
	case errors.Is(e, registryclient.ErrUnauthenticated) || errors.Is(e, registryclient.ErrDenied):
		return fmt.Errorf("registry: %s: %w", e.Message, client.ErrPermission)
	case errors.Is(e, registryclient.ErrUnavailable):
		return fmt.Errorf("registry: %s: %w", e.Message, client.ErrUnavailable)
	}
	return failedf("registry: %s", e.Message)
}

func loginCommand() *cobra.Command {
	var user string
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "login REGISTRY -u USER --password-stdin",
		Short: "Get an API token from the registry and store it for the agent commands",
		Long: `login authenticates USER with the password read from standard input,
creates an API token named faas-cli@HOSTNAME (POST /api/v1/tokens) and
stores the registry, user and token in $FAAS_CONFIG or faas/config.json in
the user's configuration directory (mode 0600). The agent commands send the
token to faasd, which pulls with it. REGISTRY is host:port (https), or
http://127.0.0.1:port on the loopback interface only. The password is never
taken from the command line, and the token is never printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !passwordStdin {
				return usageErrorf("give the password on standard input with --password-stdin")
			}
			base, err := registryURL(args[0])
			if err != nil {
				return err
			}
			pw, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), 64<<10)).ReadString('\n')
			if err != nil && err != io.EOF {
				return err
			}
			pw = strings.TrimRight(pw, "\r\n")
			if user == "" || pw == "" {
				return usageErrorf("user and password must not be empty")
			}
			host, _ := os.Hostname()
			if host == "" {
				host = "unknown"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			reg, err := registryclient.New(base, registryclient.WithBasicAuth(user, pw), registryclient.WithUserAgent("faas-cli"))
			if err != nil {
				return usageErrorf("%v", err)
			}
			tok, err := reg.CreateToken(ctx, registryapi.NewToken{Name: "faas-cli@" + host})
			if err != nil {
				return registryError(base, err)
			}
			if tok.Secret == "" {
				return failedf("registry %s: no token in the answer of POST /api/v1/tokens", base)
			}
			path, err := writeConfig(config{Registry: base, User: user, Token: tok.Secret, TokenID: tok.ID})
			if err != nil {
				return failed(err)
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"registry": base, "user": user, "config": path})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s as %s (%s)\n", base, user, path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&user, "username", "u", "", "account name")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	cmd.MarkFlagRequired("username")
	return cmd
}

func logoutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Revoke the stored API token (best effort) and forget it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := readConfig()
			if err != nil {
				return err
			}
			if c == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "not logged in")
				return nil
			}
			if c.TokenID != "" {
				if err := revokeToken(cmd.Context(), *c); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "faas: warning: the token was not revoked on %s: %v\n", c.Registry, err)
				}
			}
			p, err := configPath()
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged out of %s\n", c.Registry)
			return nil
		},
	}
}

// revokeToken deletes the stored token on its registry.
func revokeToken(ctx context.Context, c config) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reg, err := registryclient.New(c.Registry, registryclient.WithToken(c.Token), registryclient.WithUserAgent("faas-cli"))
	if err != nil {
		return err
	}
	if err := reg.RevokeToken(ctx, c.TokenID); err != nil && !errors.Is(err, registryclient.ErrNotFound) {
		return registryError(c.Registry, err)
	}
	return nil
}
