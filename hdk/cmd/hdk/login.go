package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
)

func loginCommand() *cobra.Command {
	var user string
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "login REGISTRY -u USER --password-stdin",
		Short: "Store registry credentials in the docker config (used by push, pull, sign, verify)",
		Long: `login saves USER and the password (or token) read from standard input for
REGISTRY in the standard docker config ($DOCKER_CONFIG or ~/.docker), through its
credential helper when one is configured. The password is never taken from the
command line, where other users could see it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !passwordStdin {
				return fmt.Errorf("give the password on standard input with --password-stdin")
			}
			reg, err := name.NewRegistry(args[0])
			if err != nil {
				return err
			}
			pw, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), 64<<10)).ReadString('\n')
			if err != nil && err != io.EOF {
				return err
			}
			pw = strings.TrimRight(pw, "\r\n")
			if user == "" || pw == "" {
				return fmt.Errorf("user and password must not be empty")
			}
			cf, err := config.Load(os.Getenv("DOCKER_CONFIG"))
			if err != nil {
				return err
			}
			server := reg.RegistryStr()
			if server == name.DefaultRegistry {
				server = authn.DefaultAuthKey
			}
			if err := cf.GetCredentialsStore(server).Store(types.AuthConfig{ServerAddress: server, Username: user, Password: pw}); err != nil {
				return err
			}
			if err := cf.Save(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s as %s (%s)\n", server, user, cf.Filename)
			return nil
		},
	}
	cmd.Flags().StringVarP(&user, "username", "u", "", "user name")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	cmd.MarkFlagRequired("username")
	return cmd
}
