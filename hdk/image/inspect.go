package image

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrNotImage is wrapped by the errors for images that are not accelerator
// images: another manifest, artifact or config media type, or a layer that
// is not a bitstream.
var ErrNotImage = errors.New("not an accelerator image")

// checkMediaTypes checks that img is an OCI image manifest with the
// artifactType and config media type of an accelerator image, and that its
// layers are bitstreams.
func checkMediaTypes(img v1.Image) error {
	mf, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	switch {
	case mf.MediaType != types.OCIManifestSchema1:
		return fmt.Errorf("manifest media type %q, want %q: %w", mf.MediaType, types.OCIManifestSchema1, ErrNotImage)
	case mf.ArtifactType != ArtifactType:
		return fmt.Errorf("artifactType %q, want %q: %w", mf.ArtifactType, ArtifactType, ErrNotImage)
	case mf.Config.MediaType != ConfigMediaType:
		return fmt.Errorf("config media type %q, want %q: %w", mf.Config.MediaType, ConfigMediaType, ErrNotImage)
	}
	for i, l := range mf.Layers {
		if l.MediaType != BitstreamMediaType && l.MediaType != SealedBitstreamMediaType {
			return fmt.Errorf("layer %d has media type %q, not a bitstream: %w", i, l.MediaType, ErrNotImage)
		}
	}
	return nil
}

// ConfigOf returns the config of img, after checking its media types.
func ConfigOf(img v1.Image) (Config, error) {
	if err := checkMediaTypes(img); err != nil {
		return Config{}, fmt.Errorf("image: %w", err)
	}
	b, err := img.RawConfigFile()
	if err != nil {
		return Config{}, fmt.Errorf("image: reading config: %w", err)
	}
	return ParseConfig(b)
}

// Summary describes an image for people; String prints it.
type Summary struct {
	Digest  v1.Hash       `json:"digest"` // of the manifest
	Name    string        `json:"name"`
	Version string        `json:"version"`
	Vendor  string        `json:"vendor"`
	Board   string        `json:"board"`
	Chips   []ChipSummary `json:"chips"`
	// Size is the size of the manifest, the config and the layers.
	Size int64 `json:"size"`
}

// ChipSummary describes the bitstream of one chip.
type ChipSummary struct {
	Index  ChipIndex `json:"index"`
	Part   string    `json:"part"`
	Role   Role      `json:"role"`
	Layer  v1.Hash   `json:"layer"`
	Size   int64     `json:"size"`   // of the layer
	Sealed bool      `json:"sealed"` // the layer is a SealedBitstreamMediaType
}

// Inspect summarises img, checking that every chip's layer is in the
// manifest.
func Inspect(img v1.Image) (Summary, error) {
	cfg, err := ConfigOf(img)
	if err != nil {
		return Summary{}, err
	}
	mf, err := img.Manifest()
	if err != nil {
		return Summary{}, fmt.Errorf("image: reading manifest: %w", err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return Summary{}, fmt.Errorf("image: reading manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Summary{}, fmt.Errorf("image: digest: %w", err)
	}
	s := Summary{
		Digest: digest, Name: cfg.Name, Version: cfg.Version, Vendor: cfg.Vendor, Board: cfg.Board,
		Size: int64(len(raw)) + mf.Config.Size,
	}
	layers := make(map[v1.Hash]v1.Descriptor, len(mf.Layers))
	for _, l := range mf.Layers {
		layers[l.Digest] = l
		s.Size += l.Size
	}
	for i, c := range cfg.Chips {
		l, ok := layers[c.Layer]
		if !ok {
			return Summary{}, fmt.Errorf("image: config: chips[%d].layer: %s is not a layer of the manifest", i, c.Layer)
		}
		s.Chips = append(s.Chips, ChipSummary{
			Index: c.Index, Part: c.Part, Role: c.Role, Layer: c.Layer, Size: l.Size,
			Sealed: l.MediaType == SealedBitstreamMediaType,
		})
	}
	return s, nil
}

// String prints s as a header and a table of chips:
//
//	loopback 1.0.0 by Example Inc. for faas-vu9p-dual
//	digest sha256:…, 64.8 KiB in all
//	CHIP  PART                 ROLE          SEALED  SIZE      LAYER
//	0     xcvu9p-flgb2104-2-i  loopback 1.0  no      64.3 KiB  sha256:…
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s by %s for %s\n", s.Name, s.Version, s.Vendor, s.Board)
	fmt.Fprintf(&b, "digest %s, %s in all\n", s.Digest, size(s.Size))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CHIP\tPART\tROLE\tSEALED\tSIZE\tLAYER")
	for _, c := range s.Chips {
		role := c.Role.Name + " " + c.Role.Version
		if c.Role.ISAVersion != "" {
			role += " (ISA " + c.Role.ISAVersion + ")"
		}
		sealed := "no"
		if c.Sealed {
			sealed = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Index, c.Part, role, sealed, size(c.Size), c.Layer)
	}
	w.Flush()
	return b.String()
}

// size formats n bytes in binary units.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
