package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
)

// sealedKey is one line of the keys file hdk seal writes: what the registry
// needs to release a layer's data key, and nothing that decrypts it without
// the registry's private key.
type sealedKey struct {
	Chip       string `json:"chip"`
	Layer      string `json:"layer"`
	Plaintext  string `json:"plaintext"`
	KeyID      string `json:"key_id"`
	WrappedKey string `json:"wrapped_key"` // base64 of seal.WrappedKey's binary form
}

func sealCommand() *cobra.Command {
	var recipient, keysOut, tag string
	cmd := &cobra.Command{
		Use:   "seal --recipient PUB [--keys FILE] DIR",
		Short: "Encrypt the bitstream layers of a layout's image for the registry",
		Long: `seal encrypts every plain bitstream layer of the image in layout DIR with a fresh
data key (chunked AES-256-GCM, see hdk/seal/FORMAT.md) and replaces the image in
the layout. Each data key is wrapped to the recipient's X25519 public key (the
registry's) and written to the keys file (default DIR.keys.json), never into
the image. Sign the image after sealing it: sealing changes its digest. The
layout keeps the plaintext blobs as the ISV's own copy; push sends only the
sealed image.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			pemBytes, err := os.ReadFile(recipient)
			if err != nil {
				return err
			}
			pub, err := seal.ParsePublicKeyPEM(pemBytes)
			if err != nil {
				return fmt.Errorf("%s: %w", recipient, err)
			}
			img, err := image.ReadLayout(dir)
			if err != nil {
				return err
			}
			sealed, keys, err := image.Seal(cmd.Context(), img, pub)
			if err != nil {
				return err
			}
			if tag == "" {
				cfg, err := image.ConfigOf(img)
				if err != nil {
					return err
				}
				tag = cfg.Version
			}
			if keysOut == "" {
				keysOut = filepath.Clean(dir) + ".keys.json"
			}
			var lines []sealedKey
			for _, k := range keys {
				wk, err := k.Key.MarshalBinary()
				if err != nil {
					return err
				}
				lines = append(lines, sealedKey{Chip: k.Chip.String(), Layer: k.Layer.String(), Plaintext: k.Plaintext.String(),
					KeyID: k.KeyID.String(), WrappedKey: base64.StdEncoding.EncodeToString(wk)})
			}
			b, err := json.MarshalIndent(lines, "", "  ")
			if err != nil {
				return err
			}
			// Keys first: an image sealed under keys nobody kept is lost.
			if err := writeNew(keysOut, append(b, '\n'), 0o600); err != nil {
				return err
			}
			if err := image.WriteLayout(dir, sealed, tag); err != nil {
				return err
			}
			return printSummary(cmd, sealed, fmt.Sprintf("sealed %s:%s; wrapped keys in %s", dir, tag, keysOut))
		},
	}
	cmd.Flags().StringVar(&recipient, "recipient", "", "X25519 public key PEM of the registry")
	cmd.Flags().StringVar(&keysOut, "keys", "", "file to write the wrapped data keys to (default DIR.keys.json)")
	cmd.Flags().StringVar(&tag, "tag", "", "name of the image in the layout (default: its version)")
	cmd.MarkFlagRequired("recipient")
	return cmd
}

// recipientKeygenCommand makes an X25519 key pair to seal for, standing in
// for the registry's key in development and tests.
func recipientKeygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "recipient-keygen --out DIR",
		Short: "Generate an X25519 key pair to seal images for (DIR/recipient.key, DIR/recipient.pub)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := ecdh.X25519().GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			privPEM, err := seal.MarshalPrivateKeyPEM(priv)
			if err != nil {
				return err
			}
			pubPEM, err := seal.MarshalPublicKeyPEM(priv.PublicKey())
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := writeNew(filepath.Join(out, "recipient.key"), privPEM, 0o600); err != nil {
				return err
			}
			if err := writeNew(filepath.Join(out, "recipient.pub"), pubPEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s\n", filepath.Join(out, "recipient.key"), filepath.Join(out, "recipient.pub"))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for recipient.key and recipient.pub")
	cmd.MarkFlagRequired("out")
	return cmd
}
