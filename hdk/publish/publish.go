// Package publish pushes what hdk builds to a registry: the accelerator
// image of an OCI image layout, the signature images beside it, and for a
// sealed image its wrapped data keys. `hdk push` and the portal's browser
// upload both publish through Layout, so an image reaches the registry the
// same way from either.
package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/sign"
)

// ErrKeysMissing: the image has sealed chips but no keys file was given, so
// the registry could never release their data keys.
var ErrKeysMissing = errors.New("publish: the image is sealed but no keys file was given")

// Result is what Layout pushed.
type Result struct {
	Digest     v1.Hash // the image's manifest digest
	Signatures int     // signature images pushed (0 or 1)
	Keys       string  // digest of the keys artifact, "" when nothing is sealed
}

// Sealed reports whether img has a sealed chip.
func Sealed(img v1.Image) (bool, error) {
	cfg, err := image.ConfigOf(img)
	if err != nil {
		return false, err
	}
	for _, c := range cfg.Chips {
		if c.Sealed {
			return true, nil
		}
	}
	return false, nil
}

// Layout pushes the accelerator image of the layout at dir to ref, then the
// layout's signature image of it (cosign's tag) and, when keys is not nil,
// keys as the image's keys artifact. A sealed image needs keys
// (ErrKeysMissing). progress, when not nil, receives the image's write
// progress and is closed when that write ends (remote.WithProgress); opts
// reach every write (auth, transport).
func Layout(ctx context.Context, dir string, ref name.Reference, keys []byte, progress chan<- v1.Update, opts ...remote.Option) (Result, error) {
	img, err := image.ReadLayout(dir)
	if err != nil {
		closeProgress(progress)
		return Result{}, err
	}
	sealed, err := Sealed(img)
	if err != nil {
		closeProgress(progress)
		return Result{}, err
	}
	if sealed && keys == nil {
		closeProgress(progress)
		return Result{}, ErrKeysMissing
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	write := opts
	if progress != nil {
		write = append(append([]remote.Option{}, opts...), remote.WithProgress(progress))
	}
	if err := remote.Write(ref, img, write...); err != nil {
		return Result{}, fmt.Errorf("publish: pushing %s: %w", ref, err)
	}
	res := Result{}
	if res.Digest, err = img.Digest(); err != nil {
		return Result{}, err
	}
	if res.Signatures, err = signatures(dir, ref, res.Digest, opts); err != nil {
		return res, err
	}
	if keys != nil {
		desc, err := partial.Descriptor(img)
		if err != nil {
			return res, err
		}
		d, err := image.PushKeys(ctx, ref.Context(), *desc, keys, opts...)
		if err != nil {
			return res, fmt.Errorf("publish: pushing the keys: %w", err)
		}
		res.Keys = d.String()
	}
	return res, nil
}

// Signed reports whether the layout at dir holds a signature image of its
// accelerator image (under cosign's tag), as hdk sign writes it.
func Signed(dir string) (bool, error) {
	img, err := image.ReadLayout(dir)
	if err != nil {
		return false, err
	}
	h, err := img.Digest()
	if err != nil {
		return false, err
	}
	sig, err := signatureImage(dir, h)
	return sig != nil, err
}

// signatureImage returns the layout's signature image of digest h, or nil.
func signatureImage(dir string, h v1.Hash) (v1.Image, error) {
	// The tag's name depends only on the digest, not on a repository.
	ref, err := name.NewDigest("layout.invalid/x@" + h.String())
	if err != nil {
		return nil, err
	}
	tag, err := sign.SignatureTag(ref)
	if err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Annotations[image.AnnotationRefName] == tag.TagStr() {
			return idx.Image(d.Digest)
		}
	}
	return nil, nil
}

// closeProgress ends progress when no write will.
func closeProgress(progress chan<- v1.Update) {
	if progress != nil {
		close(progress)
	}
}

// signatures copies the layout's signature image of digest h, if any, to
// the repository of ref under cosign's tag.
func signatures(dir string, ref name.Reference, h v1.Hash, opts []remote.Option) (int, error) {
	sigImg, err := signatureImage(dir, h)
	if err != nil || sigImg == nil {
		return 0, err
	}
	tag, err := sign.SignatureTag(ref.Context().Digest(h.String()))
	if err != nil {
		return 0, err
	}
	if err := remote.Write(tag, sigImg, opts...); err != nil {
		return 0, fmt.Errorf("publish: pushing the signature: %w", err)
	}
	return 1, nil
}
