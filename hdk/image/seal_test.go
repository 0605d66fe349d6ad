package image_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
)

// TestSealRoundTrip seals a built image for a recipient, checks that no
// plaintext is left in it, and unseals it back to the same digest.
func TestSealRoundTrip(t *testing.T) {
	img := referenceImage(t)
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sealed, keys, err := image.Seal(t.Context(), img, priv.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := image.ConfigOf(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(cfg.Chips) {
		t.Fatalf("%d keys for %d chips", len(keys), len(cfg.Chips))
	}
	plain := layers(t, img)
	for i, c := range cfg.Chips {
		if !c.Sealed || c.Layer != keys[i].Layer {
			t.Errorf("chip %s: sealed %v, layer %s, key for %s", c.Index, c.Sealed, c.Layer, keys[i].Layer)
		}
		l, err := sealed.LayerByDigest(c.Layer)
		if err != nil {
			t.Fatal(err)
		}
		if mt, _ := l.MediaType(); mt != image.SealedBitstreamMediaType {
			t.Errorf("chip %s layer media type %s", c.Index, mt)
		}
		b := read(t, l)
		for _, p := range plain {
			if bytes.Contains(b, p[len(p)/2:len(p)/2+64]) {
				t.Errorf("chip %s: sealed layer holds plaintext", c.Index)
			}
		}
	}
	// Only the recipient can unseal, and only the whole image back.
	keyFor := func(k *ecdh.PrivateKey) func(image.Chip, seal.Header) (seal.DataKey, error) {
		return func(c image.Chip, h seal.Header) (seal.DataKey, error) {
			for _, sl := range keys {
				if sl.Layer == c.Layer && sl.KeyID == h.KeyID {
					return seal.UnwrapKey(k, sl.Key)
				}
			}
			return seal.DataKey{}, errors.New("no key")
		}
	}
	back, err := image.Unseal(t.Context(), sealed, keyFor(priv))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got, _ := back.Digest(); got != want {
		t.Errorf("unsealed image %s, original %s", got, want)
	}
	other, _ := ecdh.X25519().GenerateKey(rand.Reader)
	if _, err := image.Unseal(t.Context(), sealed, keyFor(other)); !errors.Is(err, seal.ErrKey) {
		t.Errorf("Unseal with another recipient's key = %v, want seal.ErrKey", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := image.Seal(ctx, img, priv.PublicKey()); !errors.Is(err, context.Canceled) {
		t.Errorf("Seal with a canceled context = %v", err)
	}
}

func layers(t *testing.T, img v1.Image) [][]byte {
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range ls {
		out = append(out, read(t, l))
	}
	return out
}

func read(t *testing.T, l v1.Layer) []byte {
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
