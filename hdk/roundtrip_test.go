package hdk_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/shell"
)

// tamperer is a registry proxy that flips one byte of the responses whose
// path matches, as a compromised registry or network would.
type tamperer struct {
	mu     sync.Mutex
	match  func(path string) bool
	offset func(body []byte) int // which byte to flip
}

func (tp *tamperer) set(match func(string) bool, offset func([]byte) int) {
	tp.mu.Lock()
	tp.match, tp.offset = match, offset
	tp.mu.Unlock()
}

func (tp *tamperer) modify(r *http.Response) error {
	tp.mu.Lock()
	match, offset := tp.match, tp.offset
	tp.mu.Unlock()
	if match == nil || r.Request.Method != http.MethodGet || !match(r.Request.URL.Path) {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return err
	}
	if len(b) > 0 {
		b[offset(b)] ^= 0x01
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Del("Content-Length")
	return nil
}

// published is what an ISV pushed: a sealed, signed two-chip image.
type published struct {
	ref      name.Digest
	bits     [][]byte // the original bitstreams, by chip
	keys     []image.SealedLayer
	registry *ecdh.PrivateKey
	isv      crypto.PublicKey
}

// publish builds a two-chip image from fresh loopback bitstreams, seals it
// for the registry's key, pushes it and signs it there.
func publish(t *testing.T, host string) published {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	var p published
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "name: loopback2\nversion: 1.0.0\nvendor: Test\nboard: faas-vu9p-dual\nboth_chips: true\nchips:\n")
	for i := range 2 {
		bit, err := loopback.Bitstream(shell.PartVU9P, (256+i)<<10)
		if err != nil {
			t.Fatal(err)
		}
		p.bits = append(p.bits, bit)
		file := fmt.Sprintf("chip%d.bit", i)
		writeFile(t, dir+"/"+file, bit)
		fmt.Fprintf(&yaml, "  - {index: %d, bitstream: %s, role: {name: loopback, version: \"1.0\"}}\n", i, file)
	}
	writeFile(t, dir+"/image.yaml", []byte(yaml.String()))
	m, err := image.Load(dir + "/image.yaml")
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if p.registry, err = ecdh.X25519().GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	img, p.keys, err = image.Seal(ctx, img, p.registry.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host + "/isv/loopback2:1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	p.ref = tag.Context().Digest(d.String())
	key, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	p.isv = key.Public()
	if err := sign.Sign(ctx, p.ref, key); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// consume is what a node does with a published image: verify the ISV's
// signature of the digest, pull by that digest, check the config against the
// layers, unseal every layer with the key the registry releases, and return
// the bitstreams by chip.
func consume(ctx context.Context, p published, reg string) ([][]byte, error) {
	ref, err := name.NewDigest(strings.Replace(p.ref.String(), p.ref.RegistryStr(), reg, 1))
	if err != nil {
		return nil, err
	}
	if _, err := sign.Verify(ctx, ref, []crypto.PublicKey{p.isv}); err != nil {
		return nil, err
	}
	img, err := image.Pull(ctx, ref.String())
	if err != nil {
		return nil, err
	}
	if _, err := image.Inspect(img); err != nil {
		return nil, err
	}
	plain, err := image.Unseal(ctx, img, func(c image.Chip, h seal.Header) (seal.DataKey, error) {
		for _, k := range p.keys {
			if k.Layer == c.Layer && k.KeyID == h.KeyID {
				return seal.UnwrapKey(p.registry, k.Key)
			}
		}
		return seal.DataKey{}, fmt.Errorf("no key for chip %s", c.Index)
	})
	if err != nil {
		return nil, err
	}
	cfg, err := image.ConfigOf(plain)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, c := range cfg.Chips {
		l, err := plain.LayerByDigest(c.Layer)
		if err != nil {
			return nil, err
		}
		b, err := readAll(l)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func readAll(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestRoundTrip: build → seal → push → sign → pull → verify → unseal gives
// back the exact bitstreams, through a registry server over HTTP.
func TestRoundTrip(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p := publish(t, host)
	got, err := consume(t.Context(), p, host)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.bits {
		if !bytes.Equal(got[i], p.bits[i]) {
			t.Errorf("chip %d: bitstream differs after the round trip", i)
		}
	}
}

// TestTamperingIsCaught flips bytes in everything a registry serves — the
// image manifest, its config, each layer, the signature manifest and its
// payload — and checks that the node refuses every case.
func TestTamperingIsCaught(t *testing.T) {
	backend := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer backend.Close()
	tp := &tamperer{}
	target, _ := url.Parse(backend.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = tp.modify
	front := httptest.NewServer(proxy)
	defer front.Close()
	host := strings.TrimPrefix(front.URL, "http://")
	p := publish(t, host)

	img, err := remote.Image(p.ref)
	if err != nil {
		t.Fatal(err)
	}
	mf, _ := img.Manifest()
	sigTag, _ := sign.SignatureTag(p.ref)
	sigImg, err := remote.Image(sigTag)
	if err != nil {
		t.Fatal(err)
	}
	sigMf, _ := sigImg.Manifest()

	// Each target is a response and the bytes of it to flip. The signature
	// manifest is fetched by tag, so nothing pins its digest: what protects
	// the image is the signed payload and the signature value, not the
	// container's other fields (as with cosign), so the flips go to the
	// signature value there.
	type spot struct {
		match func(string) bool
		span  func(body []byte) (from, to int)
	}
	whole := func(b []byte) (int, int) { return 0, len(b) }
	sigValue := func(b []byte) (int, int) {
		key := []byte(`"` + sign.SignatureAnnotation + `":"`)
		i := bytes.Index(b, key)
		if i < 0 {
			return 0, len(b)
		}
		i += len(key)
		return i, i + bytes.IndexByte(b[i:], '"')
	}
	targets := map[string]spot{
		"image manifest":    {suffix("/manifests/" + p.ref.DigestStr()), whole},
		"config":            {suffix("/blobs/" + mf.Config.Digest.String()), whole},
		"signature":         {suffix("/manifests/" + sigTag.TagStr()), sigValue},
		"signature payload": {suffix("/blobs/" + sigMf.Layers[0].Digest.String()), whole},
	}
	for i, l := range mf.Layers {
		targets[fmt.Sprintf("layer %d (sealed bitstream)", i)] = spot{suffix("/blobs/" + l.Digest.String()), whole}
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	refused := 0
	// Sorted, so that the random offsets are the same in every run.
	for _, what := range slices.Sorted(maps.Keys(targets)) {
		tg := targets[what]
		for k := range 40 {
			offset := func(b []byte) int {
				from, to := tg.span(b)
				switch k {
				case 0:
					return from // first byte: JSON brace, seal magic
				case 1:
					return to - 1
				}
				return from + rng.IntN(to-from)
			}
			tp.set(tg.match, offset)
			got, err := consume(t.Context(), p, host)
			if err != nil {
				refused++
				continue
			}
			{
				same := len(got) == len(p.bits)
				for i := range got {
					same = same && bytes.Equal(got[i], p.bits[i])
				}
				if !same {
					t.Fatalf("%s, case %d: tampered image accepted with different bitstreams", what, k)
				}
				t.Errorf("%s, case %d: tampering not detected", what, k)
			}
		}
	}
	tp.set(nil, nil)
	if _, err := consume(t.Context(), p, host); err != nil {
		t.Fatalf("untampered image refused after the tampering cases: %v", err)
	}
	if want := 40 * len(targets); refused != want {
		t.Errorf("%d of %d tampering cases refused", refused, want)
	}

	// A signature by a key that is not the ISV's is refused too.
	other, _ := sign.GenerateKey()
	p.isv = other.Public()
	if _, err := consume(t.Context(), p, host); !errors.Is(err, sign.ErrBadSignature) {
		t.Errorf("image signed by another key = %v, want sign.ErrBadSignature", err)
	}
}

func suffix(s string) func(string) bool {
	return func(path string) bool { return strings.HasSuffix(path, s) }
}
