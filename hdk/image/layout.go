package image

import (
	"errors"
	"fmt"
	"io/fs"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
)

// WriteLayout writes img to the OCI image layout at dir, creating the layout
// if need be, under the ref name ref (annotation
// org.opencontainers.image.ref.name, e.g. "1.0.0"): an image already there
// under that name is replaced. An empty ref writes img without a name.
func WriteLayout(dir string, img v1.Image, ref string) error {
	p, err := layout.FromPath(dir)
	if errors.Is(err, fs.ErrNotExist) {
		p, err = layout.Write(dir, empty.Index)
	}
	if err != nil {
		return fmt.Errorf("image: opening layout %s: %w", dir, err)
	}
	if ref == "" {
		err = p.AppendImage(img)
	} else {
		err = p.ReplaceImage(img, match.Annotation(AnnotationRefName, ref),
			layout.WithAnnotations(map[string]string{AnnotationRefName: ref}))
	}
	if err != nil {
		return fmt.Errorf("image: writing layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the accelerator image of the OCI image layout at dir,
// which must hold exactly one manifest of ArtifactType. Other artifacts, such
// as the image's signatures, may sit beside it.
func ReadLayout(dir string) (v1.Image, error) {
	return readLayout(dir, " of artifact type "+ArtifactType, func(d v1.Descriptor) bool { return d.ArtifactType == ArtifactType })
}

// ReadLayoutRef returns the image of the OCI image layout at dir whose ref
// name (annotation org.opencontainers.image.ref.name) is ref.
func ReadLayoutRef(dir, ref string) (v1.Image, error) {
	return readLayout(dir, fmt.Sprintf(" named %q", ref), match.Annotation(AnnotationRefName, ref))
}

func readLayout(dir, what string, m match.Matcher) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: reading layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: reading layout %s: %w", dir, err)
	}
	var found []v1.Descriptor
	for _, d := range im.Manifests {
		if m(d) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("image: layout %s holds %d manifests%s, want 1", dir, len(found), what)
	}
	if !found[0].MediaType.IsImage() {
		return nil, fmt.Errorf("image: layout %s: manifest %s is a %s: %w", dir, found[0].Digest, found[0].MediaType, ErrNotImage)
	}
	img, err := idx.Image(found[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image: reading layout %s: %w", dir, err)
	}
	if err := checkMediaTypes(img); err != nil {
		return nil, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return img, nil
}
