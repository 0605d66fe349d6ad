package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// frameBytes is the size of the test bitstreams' frames.
const frameBytes = 64 << 10

// build builds an image with image.Build from an image.yaml with the given
// chips section, each chip's bitstream being loopback.bit for VU9P.
func build(t testing.TB, chips string, bothChips bool) v1.Image {
	t.Helper()
	dir := t.TempDir()
	bit, err := loopback.Bitstream(shell.PartVU9P, frameBytes)
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`name: loopback
version: 1.0.0
vendor: Example Inc.
license: Apache-2.0
board: faas-vu9p-dual
chips:
%sboth_chips: %t
resources: {ddr_bytes: 1073741824, power_w: 45}
build: {tool: vivado 2024.1, date: "2026-11-22T00:00:00Z"}
`, chips, bothChips)
	for name, data := range map[string][]byte{"image.yaml": []byte(yaml), "loopback.bit": bit} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

const (
	oneChip  = "  - {index: 0, bitstream: loopback.bit, role: {name: loopback, version: \"1.0\"}, clocks: {kernel: 250}}\n"
	twoChips = oneChip + "  - {index: 1, bitstream: loopback.bit, role: {name: loopback, version: \"1.0\"}}\n"
)

// fixture is an image taken apart, to be corrupted and put together again.
type fixture struct {
	mf  v1.Manifest
	cfg map[string]any
	// rawCfg, if set, is the config instead of cfg.
	rawCfg []byte
	// keepConfigDesc keeps mf.Config as it is instead of describing the
	// config.
	keepConfigDesc bool
	blobs          map[v1.Hash][]byte
	layerErr       error // returned by LayerByDigest
}

func newFixture(t testing.TB, img v1.Image) *fixture {
	t.Helper()
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{mf: *mf.DeepCopy(), blobs: make(map[v1.Hash][]byte)}
	if err := json.Unmarshal(raw, &f.cfg); err != nil {
		t.Fatal(err)
	}
	for _, d := range mf.Layers {
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		f.blobs[d.Digest] = b
	}
	return f
}

// chip returns the config's chips[i].
func (f *fixture) chip(i int) map[string]any { return f.cfg["chips"].([]any)[i].(map[string]any) }

// setLayer makes data, of media type mt, layer j of the manifest and the
// layer of chip i.
func (f *fixture) setLayer(t testing.TB, j, i int, data []byte, mt types.MediaType) {
	t.Helper()
	h, n, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	f.blobs[h] = data
	f.mf.Layers[j].Digest, f.mf.Layers[j].Size, f.mf.Layers[j].MediaType = h, n, mt
	f.chip(i)["layer"] = h.String()
}

func (f *fixture) image(t testing.TB) v1.Image {
	t.Helper()
	raw := f.rawCfg
	if raw == nil {
		var err error
		if raw, err = json.Marshal(f.cfg); err != nil {
			t.Fatal(err)
		}
	}
	mf := *f.mf.DeepCopy()
	if !f.keepConfigDesc {
		h, n, _ := v1.SHA256(bytes.NewReader(raw))
		mf.Config.Digest, mf.Config.Size = h, n
	}
	rawMF, err := json.Marshal(mf)
	if err != nil {
		t.Fatal(err)
	}
	img, err := partial.CompressedToImage(&core{manifest: rawMF, config: raw, f: f})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// core serves a fixture's manifest, config and blobs as they are, with no
// check of its own: a blob may not match its digest.
type core struct {
	manifest, config []byte
	f                *fixture
}

func (c *core) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c *core) RawManifest() ([]byte, error)        { return c.manifest, nil }
func (c *core) RawConfigFile() ([]byte, error)      { return c.config, nil }

func (c *core) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := c.f.blobs[h]
	if c.f.layerErr != nil || !ok {
		return nil, fmt.Errorf("no layer %s: %v", h, c.f.layerErr)
	}
	return blob{h, b}, nil
}

// blob is a layer that claims digest h, whatever its bytes.
type blob struct {
	h    v1.Hash
	data []byte
}

func (b blob) Digest() (v1.Hash, error)            { return b.h, nil }
func (b blob) Compressed() (io.ReadCloser, error)  { return io.NopCloser(bytes.NewReader(b.data)), nil }
func (b blob) Size() (int64, error)                { return int64(len(b.data)), nil }
func (b blob) MediaType() (types.MediaType, error) { return image.BitstreamMediaType, nil }

// bit returns a partial bitstream for part with the given design field and
// header part hpart. bitfile.Build refuses what the header should not say,
// so the header is written again after it.
func bit(t testing.TB, design string, hpart, part shell.Part) []byte {
	t.Helper()
	b, err := bitfile.Build(loopback.Header(part), part, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	h, err := bitfile.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := h.MarshalBinary()
	h.Design, h.Part = design, hpart.Name
	head, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return append(head, b[len(old):]...)
}
