package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/shell"
)

// twoChips is an image.yaml for the loopback role on both chips, from two
// files.
const twoChips = `name: loopback
version: 1.0.0
vendor: Example Inc.
description: DMA loopback and checksum
license: Apache-2.0
board: faas-vu9p-dual
shell: ">=1.0,<2"
chips:
  - index: 0
    bitstream: chip0/loopback.bit
    role: {name: loopback, version: "1.0"}
    clocks: {kernel: 250}
  - index: 1
    bitstream: loopback1.bit
    role: {name: loopback, version: "1.0"}
both_chips: true
resources: {ddr_bytes: 1073741824, power_w: 45}
build: {tool: vivado 2024.1, date: "2026-11-22T00:00:00Z"}
`

// loopbackBit returns a loopback bitstream for the VU9P.
func loopbackBit(t testing.TB) []byte {
	t.Helper()
	b, err := loopback.Bitstream(shell.PartVU9P, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeDir writes files, by path relative to a new temporary directory, and
// returns the path of its image.yaml.
func writeDir(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "image.yaml")
}

// loopbackFiles returns the files of the twoChips image: the second chip's
// bitstream differs in its frames, so the layers differ.
func loopbackFiles(t testing.TB) map[string][]byte {
	t.Helper()
	b1, err := loopback.Bitstream(shell.PartVU9P, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"image.yaml":         []byte(twoChips),
		"chip0/loopback.bit": loopbackBit(t),
		"loopback1.bit":      b1,
	}
}

func build(t testing.TB, path string) v1.Image {
	t.Helper()
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestBuildManifest(t *testing.T) {
	files := loopbackFiles(t)
	img := build(t, writeDir(t, files))
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var mf struct {
		SchemaVersion int
		MediaType     string
		ArtifactType  string
		Config        v1.Descriptor
		Layers        []v1.Descriptor
		Annotations   map[string]string
	}
	if err := json.Unmarshal(raw, &mf); err != nil {
		t.Fatal(err)
	}
	if mf.SchemaVersion != 2 || mf.MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		mf.ArtifactType != "application/vnd.faas.image.v1" ||
		mf.Config.MediaType != "application/vnd.faas.image.config.v1+json" {
		t.Errorf("manifest = %s", raw)
	}
	wantAnn := map[string]string{
		AnnotationTitle: "loopback", AnnotationVersion: "1.0.0", AnnotationVendor: "Example Inc.",
		AnnotationDescription: "DMA loopback and checksum", AnnotationLicenses: "Apache-2.0",
		AnnotationCreated: "2026-11-22T00:00:00Z",
	}
	if !maps.Equal(mf.Annotations, wantAnn) {
		t.Errorf("annotations = %v, want %v", mf.Annotations, wantAnn)
	}
	titles := []string{"loopback.bit", "loopback1.bit"}
	bits := [][]byte{files["chip0/loopback.bit"], files["loopback1.bit"]}
	if len(mf.Layers) != 2 {
		t.Fatalf("%d layers, want 2", len(mf.Layers))
	}
	for i, l := range mf.Layers {
		want, _, _ := v1.SHA256(bytes.NewReader(bits[i]))
		if l.MediaType != "application/vnd.faas.bitstream.v1" || l.Digest != want || l.Size != int64(len(bits[i])) ||
			!maps.Equal(l.Annotations, map[string]string{AnnotationTitle: titles[i]}) {
			t.Errorf("layer %d = %+v", i, l)
		}
	}

	cfg, err := ConfigOf(img)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "loopback" || cfg.Board != "faas-vu9p-dual" || !cfg.BothChipsRequired ||
		cfg.Shell != (Shell{Name: "faas-shell", Versions: ">=1.0,<2", InterfaceUUID: "6f1e3c52-8a47-4e0b-9d21-f4a8510c7e33"}) ||
		*cfg.Resources != (Resources{DDRBytes: 1 << 30, PowerW: 45}) || cfg.Build.Tool != "vivado 2024.1" {
		t.Errorf("config = %+v", cfg)
	}
	for i, c := range cfg.Chips {
		if c.Index != ChipIndex(i) || c.Part != shell.PartVU9P.Name || c.Role != (Role{Name: loopback.Name, Version: "1.0"}) ||
			c.Layer != mf.Layers[i].Digest || c.Sealed {
			t.Errorf("chips[%d] = %+v", i, c)
		}
	}
	if cfg.Chips[0].Clocks["kernel"] != 250 {
		t.Errorf("chips[0].clocks = %v", cfg.Chips[0].Clocks)
	}
	rawCfg, _ := img.RawConfigFile()
	if !bytes.Contains(rawCfg, []byte(`"versions":">=1.0,<2"`)) {
		t.Errorf("config = %s, want the versions unescaped", rawCfg)
	}
	if d, _ := img.ConfigName(); d != mf.Config.Digest || int64(len(rawCfg)) != mf.Config.Size {
		t.Errorf("config descriptor %+v does not match the config", mf.Config)
	}
}

func TestBuildDeterministic(t *testing.T) {
	files := loopbackFiles(t)
	d1, err := build(t, writeDir(t, files)).Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := build(t, writeDir(t, files)).Digest() // another directory, same contents
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds: %s and %s", d1, d2)
	}
}

// checkSame checks that got has the manifest, config and layers of want,
// byte for byte.
func checkSame(t *testing.T, got, want v1.Image) {
	t.Helper()
	for _, f := range []func(v1.Image) ([]byte, error){v1.Image.RawManifest, v1.Image.RawConfigFile} {
		g, err := f(got)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := f(want)
		if !bytes.Equal(g, w) {
			t.Errorf("got %s, want %s", g, w)
		}
	}
	wls, _ := want.Layers()
	gls, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(gls) != len(wls) {
		t.Fatalf("%d layers, want %d", len(gls), len(wls))
	}
	for i := range wls {
		if mt, _ := gls[i].MediaType(); mt != BitstreamMediaType {
			t.Errorf("layer %d media type %s", i, mt)
		}
		if g, w := readLayer(t, gls[i]), readLayer(t, wls[i]); !bytes.Equal(g, w) {
			t.Errorf("layer %d: %d bytes differ from the %d built", i, len(g), len(w))
		}
	}
}

func readLayer(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLayoutRoundTrip(t *testing.T) {
	img := build(t, writeDir(t, loopbackFiles(t)))
	dir := filepath.Join(t.TempDir(), "oci")
	if err := WriteLayout(dir, img, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	// Writing again under the same name replaces the entry.
	if err := WriteLayout(dir, img, "1.0.0"); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, img)
	if d, _ := img.Digest(); !strings.Contains(readFile(t, filepath.Join(dir, "index.json")), d.String()) {
		t.Errorf("index.json does not name %s", d)
	}

	// A second image under another name: ReadLayout must choose by name.
	other := build(t, writeDir(t, map[string][]byte{
		"image.yaml":         []byte(strings.Replace(strings.Replace(twoChips, "version: 1.0.0", "version: 1.0.1", 1), "loopback1.bit", "chip0/loopback.bit", 1)),
		"chip0/loopback.bit": loopbackBit(t),
	}))
	if err := WriteLayout(dir, other, "1.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLayout(dir); err == nil || !strings.Contains(err.Error(), "holds 2 manifests") {
		t.Errorf("ReadLayout of two images: %v", err)
	}
	got, err = ReadLayoutRef(dir, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, img)
	got, err = ReadLayoutRef(dir, "1.0.1")
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, other)
	if _, err := ReadLayoutRef(dir, "2.0.0"); err == nil {
		t.Error("ReadLayoutRef of a missing name succeeded")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRegistryRoundTrip(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ctx := context.Background()
	img := build(t, writeDir(t, loopbackFiles(t)))
	ref := strings.TrimPrefix(srv.URL, "http://") + "/acme/loopback:1.0.0"
	if err := Push(ctx, ref, img); err != nil {
		t.Fatal(err)
	}
	got, err := Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, img)
	if g, _ := got.Digest(); g != mustDigest(t, img) {
		t.Errorf("pulled digest %s, pushed %s", g, mustDigest(t, img))
	}
	if _, err := ConfigOf(got); err != nil {
		t.Error(err)
	}
	if _, err := Pull(ctx, strings.TrimPrefix(srv.URL, "http://")+"/acme/missing:1"); err == nil {
		t.Error("Pull of a missing image succeeded")
	}
}

func mustDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInspect(t *testing.T) {
	files := loopbackFiles(t)
	img := build(t, writeDir(t, files))
	s, err := Inspect(img)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	cfg, _ := img.RawConfigFile()
	wantSize := int64(len(raw) + len(cfg) + len(files["chip0/loopback.bit"]) + len(files["loopback1.bit"]))
	if s.Name != "loopback" || s.Version != "1.0.0" || s.Vendor != "Example Inc." || s.Board != "faas-vu9p-dual" ||
		s.Digest != mustDigest(t, img) || s.Size != wantSize || len(s.Chips) != 2 {
		t.Fatalf("summary = %+v", s)
	}
	for i, c := range s.Chips {
		bit := files[[]string{"chip0/loopback.bit", "loopback1.bit"}[i]]
		d, _, _ := v1.SHA256(bytes.NewReader(bit))
		if c.Index != ChipIndex(i) || c.Part != shell.PartVU9P.Name || c.Role.Name != "loopback" ||
			c.Layer != d || c.Size != int64(len(bit)) || c.Sealed {
			t.Errorf("chip %d = %+v", i, c)
		}
	}
	out := s.String()
	for _, want := range []string{
		"loopback 1.0.0 by Example Inc. for faas-vu9p-dual",
		"digest " + s.Digest.String(),
		"CHIP  PART",
		"0     xcvu9p-flgb2104-2-i  loopback 1.0  no      64.3 KiB",
		"1     xcvu9p-flgb2104-2-i  loopback 1.0  no      32.3 KiB",
		s.Chips[1].Layer.String(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// notFaaS is an image whose manifest is a plain OCI image.
type notFaaS struct{ v1.Image }

func (n notFaaS) Manifest() (*v1.Manifest, error) {
	m, err := n.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.ArtifactType = ""
	m.Config.MediaType = types.OCIConfigJSON
	return m, nil
}

func TestConfigOfRefusesOtherImages(t *testing.T) {
	img := build(t, writeDir(t, loopbackFiles(t)))
	if _, err := ConfigOf(notFaaS{img}); !errors.Is(err, ErrNotImage) || !strings.Contains(err.Error(), "artifactType") {
		t.Errorf("ConfigOf of a plain image: %v", err)
	}
	if _, err := Inspect(notFaaS{img}); err == nil {
		t.Error("Inspect of a plain image succeeded")
	}
}
