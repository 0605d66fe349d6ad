package image_test

import (
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/hdk/image"
)

// buildReference builds a reference image from its sources, as `make
// images` does, with small bitstreams.
func buildReference(t *testing.T, src images.Source) v1.Image {
	t.Helper()
	dir := t.TempDir()
	m, err := images.Manifest(src.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "image.yaml"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range src.Bitstreams {
		bit, err := b.Make(b.Part, images.SmallFrameBytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, b.File), bit, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	man, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(t.Context(), man)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// referenceImage is the first reference image.
func referenceImage(t *testing.T) v1.Image { return buildReference(t, images.Sources[0]) }

func TestReferenceImagesBuild(t *testing.T) {
	for _, src := range images.Sources {
		t.Run(src.Name, func(t *testing.T) {
			s, err := image.Inspect(buildReference(t, src))
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != src.Name || len(s.Chips) != len(src.Bitstreams) {
				t.Errorf("built %s with %d chips, want %s with %d", s.Name, len(s.Chips), src.Name, len(src.Bitstreams))
			}
			for i, c := range s.Chips {
				if c.Part != src.Bitstreams[i].Part.Name {
					t.Errorf("chip %d part %s, want %s", i, c.Part, src.Bitstreams[i].Part.Name)
				}
			}
		})
	}
}
