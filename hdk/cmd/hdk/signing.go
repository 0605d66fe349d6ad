package main

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/hdk/sign"
)

func signCommand() *cobra.Command {
	var keyPath string
	cmd := &cobra.Command{
		Use:   "sign --key KEY DIR|REF",
		Short: "Sign an image with the ISV's key (cosign's format; cosign verify --key accepts it)",
		Long: `sign adds a cosign simple-signing signature of the image's manifest digest, stored
beside it under the tag sha256-<hex>.sig (in the layout, or in the registry). KEY
is PKCS#8 PEM or cosign's encrypted cosign.key (password from COSIGN_PASSWORD).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			key, err := loadPrivateKey(keyPath)
			if err != nil {
				return err
			}
			ref, opts, err := signingRef(ctx, args[0])
			if err != nil {
				return err
			}
			if err := sign.Sign(ctx, ref, key, opts...); err != nil {
				return err
			}
			fp, _ := sign.Fingerprint(key.Public())
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"signed": ref.String(), "key": fp})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s with %s\n", ref, fp)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "private key (PEM or cosign.key)")
	cmd.MarkFlagRequired("key")
	return cmd
}

func verifyCommand() *cobra.Command {
	var pubPaths []string
	cmd := &cobra.Command{
		Use:   "verify --key PUB [--key PUB2 ...] DIR|REF",
		Short: "Verify an image's signature against one or more public keys",
		Long:  "verify exits 0 if a signature of the image's digest verifies with one of the keys, 1 if none does.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var keys []crypto.PublicKey
			for _, p := range pubPaths {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				k, err := sign.LoadPublicKey(b)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				keys = append(keys, k)
			}
			ref, opts, err := signingRef(ctx, args[0])
			if err != nil {
				return err
			}
			sigs, err := sign.Verify(ctx, ref, keys, opts...)
			if errors.Is(err, sign.ErrNoSignature) || errors.Is(err, sign.ErrBadSignature) {
				return fmt.Errorf("%w: %w", errCheck, err)
			}
			if err != nil {
				return err
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"verified": ref.String(), "signatures": len(sigs)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified %s: %d valid signature(s)\n", ref, len(sigs))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&pubPaths, "key", nil, "public key PEM (repeatable)")
	cmd.MarkFlagRequired("key")
	return cmd
}

// signingRef resolves an image argument to the digest its signatures cover
// and where they are stored.
func signingRef(ctx context.Context, arg string) (name.Digest, []sign.Option, error) {
	t, err := parseTarget(arg)
	if err != nil {
		return name.Digest{}, nil, err
	}
	img, err := t.image(ctx)
	if err != nil {
		return name.Digest{}, nil, err
	}
	return t.digest(ctx, img)
}
