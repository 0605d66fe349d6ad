package main

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/hdk/sign"
)

func keygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Generate an ISV signing key pair: DIR/isv.key and DIR/isv.pub",
		Long: `keygen writes a new ECDSA P-256 key pair. The private key is encrypted in cosign's
format when COSIGN_PASSWORD is set (cosign can use it as is), else PKCS#8 PEM;
it is written with mode 0600 and never over an existing file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := sign.GenerateKey()
			if err != nil {
				return err
			}
			var priv []byte
			if pw, ok := os.LookupEnv(sign.PasswordEnv); ok {
				priv, err = sign.MarshalEncryptedPrivateKey(key, []byte(pw))
			} else {
				priv, err = sign.MarshalPrivateKey(key)
			}
			if err != nil {
				return err
			}
			pub, err := sign.MarshalPublicKey(key.Public())
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			keyPath, pubPath := filepath.Join(out, "isv.key"), filepath.Join(out, "isv.pub")
			if err := writeNew(keyPath, priv, 0o600); err != nil {
				return err
			}
			if err := writeNew(pubPath, pub, 0o644); err != nil {
				return err
			}
			fp, err := sign.Fingerprint(key.Public())
			if err != nil {
				return err
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"key": keyPath, "pub": pubPath, "fingerprint": fp})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s (%s)\n", keyPath, pubPath, fp)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for isv.key and isv.pub")
	cmd.MarkFlagRequired("out")
	return cmd
}

// writeNew writes a file that must not exist yet, so a key is never
// overwritten by accident.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func loadPrivateKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := sign.LoadPrivateKey(b, sign.EnvPassword)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}
