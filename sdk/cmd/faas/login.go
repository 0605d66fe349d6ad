package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	client "github.com/fpga-faas/faas/sdk/faas"
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

// registryError reads the registry API's error document,
// {"error":{"code","message"}}, and classifies it for the exit codes.
func registryError(resp *http.Response) error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	msg := resp.Status
	if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	msg = "registry: " + msg
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %w", msg, client.ErrPermission)
	case resp.StatusCode >= 500:
		return fmt.Errorf("%s: %w", msg, client.ErrUnavailable)
	}
	return failedf("%s", msg)
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
			body, _ := json.Marshal(map[string]string{"name": "faas-cli@" + host})
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/tokens", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.SetBasicAuth(user, pw)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "faas-cli")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("registry %s: %w: %w", base, client.ErrUnavailable, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
				return registryError(resp)
			}
			var tok struct {
				ID     string `json:"id"`
				Secret string `json:"secret"`
			}
			if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil || tok.Secret == "" {
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
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.Registry+"/api/v1/tokens/"+url.PathEscape(c.TokenID), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return registryError(resp)
	}
	return nil
}
