package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push writes img to the registry as ref, e.g.
// "registry.example.com/acme/loopback:1.0.0".
func Push(ctx context.Context, ref string, img v1.Image, opts ...remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := remote.Write(r, img, append(opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("image: pushing %s: %w", ref, err)
	}
	return nil
}

// Pull returns the image ref of a registry, after checking that it is an
// accelerator image. Layers are fetched when read.
func Pull(ctx context.Context, ref string, opts ...remote.Option) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	img, err := remote.Image(r, append(opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("image: pulling %s: %w", ref, err)
	}
	if err := checkMediaTypes(img); err != nil {
		return nil, fmt.Errorf("image: pulling %s: %w", ref, err)
	}
	return img, nil
}
