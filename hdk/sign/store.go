package sign

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// store holds signature images by tag. get returns (nil, nil) when the tag
// does not exist.
type store interface {
	get(ctx context.Context, tag name.Tag) (v1.Image, error)
	put(ctx context.Context, tag name.Tag, img v1.Image) error
	String() string
}

// SignatureTag returns the tag cosign stores the signatures of ref under:
// sha256-<hex>.sig in ref's repository.
func SignatureTag(ref name.Digest) (name.Tag, error) {
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return name.Tag{}, fmt.Errorf("sign: digest of %s: %w", ref, err)
	}
	return ref.Context().Tag(h.Algorithm + "-" + h.Hex + ".sig"), nil
}

type remoteStore struct{ opts []remote.Option }

func (s remoteStore) get(ctx context.Context, tag name.Tag) (v1.Image, error) {
	img, err := remote.Image(tag, s.with(ctx)...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sign: fetching %s: %w", tag, err)
	}
	return img, nil
}

func (s remoteStore) put(ctx context.Context, tag name.Tag, img v1.Image) error {
	if err := remote.Write(tag, img, s.with(ctx)...); err != nil {
		return fmt.Errorf("sign: pushing %s: %w", tag, err)
	}
	return nil
}

func (s remoteStore) with(ctx context.Context) []remote.Option {
	return append(s.opts[:len(s.opts):len(s.opts)], remote.WithContext(ctx))
}

func (remoteStore) String() string { return "registry" }

// refNameAnnotation names an image inside an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

type layoutStore struct{ path layout.Path }

// get finds the image whose ref.name is the tag's identifier (not its full
// name: a layout holds one repository).
func (s layoutStore) get(ctx context.Context, tag name.Tag) (v1.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	idx, err := s.path.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("sign: reading OCI layout %s: %w", s.path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("sign: reading OCI layout %s: %w", s.path, err)
	}
	for _, d := range m.Manifests {
		if d.Annotations[refNameAnnotation] != tag.TagStr() {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("sign: reading %s from OCI layout %s: %w", tag.TagStr(), s.path, err)
		}
		return img, nil
	}
	return nil, nil
}

func (s layoutStore) put(ctx context.Context, tag name.Tag, img v1.Image) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.path.ReplaceImage(img, match.Annotation(refNameAnnotation, tag.TagStr()),
		layout.WithAnnotations(map[string]string{refNameAnnotation: tag.TagStr()}))
	if err != nil {
		return fmt.Errorf("sign: writing %s to OCI layout %s: %w", tag.TagStr(), s.path, err)
	}
	return nil
}

func (s layoutStore) String() string { return "OCI layout " + string(s.path) }
