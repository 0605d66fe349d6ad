package image

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// Build reads the bitstreams of m, checks their .bit headers as [Parse]
// does, and returns the image. The image depends only on m and the
// bitstreams, so building twice gives the same digest; it carries no
// timestamp but m.Build.Date.
func Build(ctx context.Context, m Manifest) (v1.Image, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	cfg := Config{
		Name:        m.Name,
		Version:     m.Version,
		Vendor:      m.Vendor,
		Description: m.Description,
		License:     m.License,
		Shell: Shell{
			Name:          shell.Name,
			Versions:      m.Shell,
			InterfaceUUID: formatUUID(shell.InterfaceUUID),
		},
		Board:             m.Board,
		BothChipsRequired: m.BothChips,
		Resources:         m.Resources,
		Build:             m.Build,
	}
	if cfg.Shell.Versions == "" {
		cfg.Shell.Versions = DefaultShellVersions
	}
	var layers []v1.Layer
	var descs []v1.Descriptor
	for i, c := range m.Chips {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(m.path(c.Bitstream))
		if err != nil {
			return nil, m.errorf(fmt.Sprintf("chips[%d].bitstream", i), "%w", err)
		}
		h, err := bitfile.ReadHeader(bytes.NewReader(b))
		if err != nil {
			return nil, m.errorf(fmt.Sprintf("chips[%d].bitstream", i), "%w", err)
		}
		part, err := m.checkHeader(i, h)
		if err != nil {
			return nil, err
		}
		l := static.NewLayer(b, BitstreamMediaType)
		desc, err := partial.Descriptor(l)
		if err != nil {
			return nil, err
		}
		desc.Annotations = map[string]string{AnnotationTitle: filepath.Base(filepath.FromSlash(c.Bitstream))}
		layers = append(layers, l)
		descs = append(descs, *desc)
		cfg.Chips = append(cfg.Chips, Chip{
			Index:  c.Index,
			Part:   part.Name,
			Role:   c.Role,
			Clocks: c.Clocks,
			Layer:  desc.Digest,
		})
	}
	rawConfig, err := marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("image: encoding config: %w", err)
	}
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, err
	}
	mf := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: configSize, Digest: configDigest},
		Layers:        descs,
		Annotations:   annotations(m),
	}
	rawManifest, err := marshal(mf)
	if err != nil {
		return nil, fmt.Errorf("image: encoding manifest: %w", err)
	}
	return partial.CompressedToImage(&built{manifest: rawManifest, config: rawConfig, layers: layers})
}

// annotations returns the manifest annotations of an image built from m.
func annotations(m Manifest) map[string]string {
	a := map[string]string{AnnotationTitle: m.Name, AnnotationVersion: m.Version, AnnotationVendor: m.Vendor}
	for k, v := range map[string]string{AnnotationDescription: m.Description, AnnotationLicenses: m.License} {
		if v != "" {
			a[k] = v
		}
	}
	if m.Build != nil && m.Build.Date != "" {
		a[AnnotationCreated] = m.Build.Date
	}
	if m.Build != nil && m.Build.Source != "" {
		a[AnnotationSource] = m.Build.Source
	}
	return a
}

// marshal returns the JSON encoding of v without escaping <, > and &, which
// appear in version ranges.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// formatUUID formats u in the canonical 8-4-4-4-12 form.
func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// built is the core of an image made by Build: its manifest and config as
// serialized, and its layers.
type built struct {
	manifest, config []byte
	layers           []v1.Layer
}

var _ partial.CompressedImageCore = (*built)(nil)

func (b *built) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (b *built) RawManifest() ([]byte, error)        { return b.manifest, nil }
func (b *built) RawConfigFile() ([]byte, error)      { return b.config, nil }

func (b *built) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range b.layers {
		if d, err := l.Digest(); err == nil && d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("image: no layer %s", h)
}
