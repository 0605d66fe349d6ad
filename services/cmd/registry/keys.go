package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// keyDirFlags are the flags of the keys commands: where the key directory
// is and the publish delay the registries use (for when keys sign).
type keyDirFlags struct {
	dataDir, keyDir string
	publishDelay    time.Duration
}

func (k *keyDirFlags) register(f *pflag.FlagSet) {
	f.StringVar(&k.dataDir, "data-dir", env("FAAS_DATA_DIR", server.DefaultDataDir), "data directory [FAAS_DATA_DIR]")
	f.StringVar(&k.keyDir, "key-dir", env("FAAS_KEY_DIR", ""), "JWT signing key directory; default DATA_DIR/keys [FAAS_KEY_DIR]")
	f.DurationVar(&k.publishDelay, "key-publish-delay", server.DefaultKeyPublishDelay, "the registries' --key-publish-delay: how old a key must be before it signs")
}

func (k *keyDirFlags) dir() string {
	if k.keyDir != "" {
		return k.keyDir
	}
	return filepath.Join(k.dataDir, "keys")
}

// open reads the key directory, which must hold a key.
func (k *keyDirFlags) open() (*auth.Keyring, error) {
	return auth.ReadKeyring(k.dir(), server.DefaultIssuer, auth.WithPublishDelay(k.publishDelay))
}

func keysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "manage the JWT signing keys in the key directory the registries share",
		Long: `The registries' JWT signing keys are the files <kid>.pem of the key directory
(--key-dir), which every replica shares and re-reads (--key-reload-interval).
A new key verifies as soon as a replica has read it and signs once it is older
than --key-publish-delay, so every replica knows it before any signs with it.
To rotate: run "keys rotate" on a copy of the directory, publish the new file
to every replica (update the Kubernetes Secret), wait until "keys list" shows
the new key current, then 15 minutes (the longest token lifetime), then
"keys retire" the old key and publish again.`,
	}
	cmd.AddCommand(keysListCommand(), keysRotateCommand(), keysRetireCommand())
	return cmd
}

func keysListCommand() *cobra.Command {
	var kf keyDirFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "list the keys: kid, created, signs from, current, retired",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := kf.open()
			if err != nil {
				return err
			}
			return printKeys(cmd.OutOrStdout(), k.Keys(), asJSON)
		},
	}
	kf.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func keysRotateCommand() *cobra.Command {
	var kf keyDirFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "add a new signing key (it signs once older than the publish delay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := auth.LoadKeyring(kf.dir(), server.DefaultIssuer, auth.WithPublishDelay(kf.publishDelay))
			if err != nil {
				return err
			}
			kid, err := k.Rotate()
			if err != nil {
				return err
			}
			if err := k.Save(kf.dir()); err != nil {
				return err
			}
			if asJSON {
				return printKeys(cmd.OutOrStdout(), k.Keys(), true)
			}
			for _, info := range k.Keys() {
				if info.Kid == kid {
					fmt.Fprintf(cmd.OutOrStdout(), "added key %s; it signs from %s\n", kid, info.SignsFrom.Format(time.RFC3339))
				}
			}
			return nil
		},
	}
	kf.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the keys as a JSON array")
	return cmd
}

func keysRetireCommand() *cobra.Command {
	var kf keyDirFlags
	cmd := &cobra.Command{
		Use:   "retire KID",
		Short: "stop a key from verifying and signing (the last unretired key cannot be retired)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kf.open()
			if err != nil {
				return err
			}
			wasCurrent := k.Current() == args[0]
			if err := k.Retire(args[0]); err != nil {
				return err
			}
			if err := k.Save(kf.dir()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "retired key %s; key %s signs\n", args[0], k.Current())
			if wasCurrent {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s was signing: tokens it issued in the last %v are refused once the replicas reload\n",
					args[0], auth.MaxTTL)
			}
			return nil
		},
	}
	kf.register(cmd.Flags())
	return cmd
}

func printKeys(w io.Writer, keys []auth.KeyInfo, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(keys)
	}
	for _, k := range keys {
		state := "verifies"
		switch {
		case k.Retired:
			state = "retired"
		case k.Current:
			state = "signs"
		}
		fmt.Fprintf(w, "%s  created %s  signs from %s  %s\n", k.Kid, k.Created.Format(time.RFC3339),
			k.SignsFrom.Format(time.RFC3339), state)
	}
	return nil
}
