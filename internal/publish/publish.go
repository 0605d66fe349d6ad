// Package publish publishes the project's one-chip AliDNN reference image
// to a registry as an ISV does with the faas CLI: built with small
// bitstreams, sealed to the platform's recipient key, pushed with its
// wrapped keys and a signature, listed publicly and published; then it
// waits for the registry's validation. Tests and test harnesses use it to
// bring a registry to the state a real marketplace starts from.
package publish

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// ISV is the publisher: an ISV account of the registry at URL, and the
// platform's recipient public key (PEM), which images are sealed to.
type ISV struct {
	URL, User, Password string
	Recipient           []byte
	// Validation bounds the wait for the registry's validation; 0: 2 min.
	Validation time.Duration
}

// Image is what AliDNN published.
type Image struct {
	Listing string // the listing's id
	Ref     string // host/user/alidnn:1.0.0
	Digest  string
}

// AliDNN publishes the AliDNN image as isv's public listing "alidnn"
// (repository USER/alidnn, version 1.0.0), with a signing key it registers
// for the account, and waits until the version is available.
func AliDNN(ctx context.Context, isv ISV) (Image, error) {
	api, err := registryclient.New(isv.URL, registryclient.WithBasicAuth(isv.User, isv.Password))
	if err != nil {
		return Image{}, err
	}
	key, err := sign.GenerateKey()
	if err != nil {
		return Image{}, err
	}
	pub, err := sign.MarshalPublicKey(key.Public())
	if err != nil {
		return Image{}, err
	}
	if err := api.Do(ctx, "POST", "/keys", map[string]string{"public_key": string(pub)}, nil); err != nil {
		return Image{}, fmt.Errorf("publish: registering the signing key: %w", err)
	}
	u, err := url.Parse(isv.URL)
	if err != nil {
		return Image{}, err
	}
	ref, err := name.NewTag(u.Host+"/"+isv.User+"/alidnn:1.0.0", name.Insecure)
	if err != nil {
		return Image{}, err
	}
	creds := remote.WithAuth(&authn.Basic{Username: isv.User, Password: isv.Password})
	digest, err := push(ctx, ref, isv.Recipient, key, creds)
	if err != nil {
		return Image{}, err
	}
	var l struct{ ID string }
	if err := api.Do(ctx, "POST", "/listings", map[string]any{"name": "alidnn", "repository": isv.User + "/alidnn", "visibility": "public"}, &l); err != nil {
		return Image{}, fmt.Errorf("publish: listing: %w", err)
	}
	if err := api.Do(ctx, "POST", "/listings/"+l.ID+"/versions", map[string]string{"version": "1.0.0", "digest": digest}, nil); err != nil {
		return Image{}, fmt.Errorf("publish: version: %w", err)
	}
	if err := api.Do(ctx, "POST", "/listings/"+l.ID+"/publish", nil, nil); err != nil {
		return Image{}, fmt.Errorf("publish: %w", err)
	}
	if err := awaitValidation(ctx, api, l.ID, isv.Validation); err != nil {
		return Image{}, err
	}
	return Image{Listing: l.ID, Ref: ref.String(), Digest: digest}, nil
}

// push builds the image, seals it to recipient, pushes it with its keys
// and signs it; it returns the sealed image's digest.
func push(ctx context.Context, ref name.Tag, recipient []byte, key crypto.Signer, creds remote.Option) (string, error) {
	img, err := build(ctx)
	if err != nil {
		return "", err
	}
	to, err := seal.ParsePublicKeyPEM(recipient)
	if err != nil {
		return "", fmt.Errorf("publish: the platform's recipient key: %w", err)
	}
	sealed, keys, err := image.Seal(ctx, img, to)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, sealed, creds, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("publish: pushing %s: %w", ref, err)
	}
	var lines []map[string]string
	for _, k := range keys {
		wk, err := k.Key.MarshalBinary()
		if err != nil {
			return "", err
		}
		lines = append(lines, map[string]string{"chip": k.Chip.String(), "layer": k.Layer.String(), "plaintext": k.Plaintext.String(),
			"key_id": k.KeyID.String(), "wrapped_key": base64.StdEncoding.EncodeToString(wk)})
	}
	kj, err := json.Marshal(lines)
	if err != nil {
		return "", err
	}
	desc, err := partial.Descriptor(sealed)
	if err != nil {
		return "", err
	}
	if _, err := image.PushKeys(ctx, ref.Context(), *desc, kj, creds); err != nil {
		return "", fmt.Errorf("publish: pushing the keys: %w", err)
	}
	d, err := sealed.Digest()
	if err != nil {
		return "", err
	}
	if err := sign.Sign(ctx, ref.Context().Digest(d.String()), key, sign.WithRemoteOptions(creds)); err != nil {
		return "", fmt.Errorf("publish: signing: %w", err)
	}
	return d.String(), nil
}

// build builds the AliDNN image from its reference sources with small
// bitstreams, in a scratch directory.
func build(ctx context.Context) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "publish-alidnn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var src images.Source
	for _, s := range images.Sources {
		if s.Name == "alidnn" {
			src = s
		}
	}
	for _, b := range src.Bitstreams {
		bit, err := b.Make(b.Part, images.SmallFrameBytes)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, b.File), bit, 0o644); err != nil {
			return nil, err
		}
	}
	y, err := images.Manifest("alidnn")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "image.yaml"), y, 0o644); err != nil {
		return nil, err
	}
	m, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		return nil, err
	}
	return image.Build(ctx, m)
}

// awaitValidation waits until the listing's only version has been
// validated, failing if validation refused it.
func awaitValidation(ctx context.Context, api *registryclient.Client, listing string, limit time.Duration) error {
	if limit == 0 {
		limit = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		var vs struct{ Items []struct{ State string } }
		if err := api.Do(ctx, "GET", "/listings/"+listing+"/versions", nil, &vs); err != nil {
			return fmt.Errorf("publish: waiting for validation: %w", err)
		}
		if len(vs.Items) == 1 && vs.Items[0].State != "pending" && vs.Items[0].State != "validating" {
			if vs.Items[0].State != "available" {
				return fmt.Errorf("publish: validation of the AliDNN image ended %s", vs.Items[0].State)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish: waiting for validation: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
