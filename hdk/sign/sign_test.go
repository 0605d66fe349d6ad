package sign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// newRegistry starts an in-memory registry on 127.0.0.1 and returns its host.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushImage pushes a random image to host/isv/accel:tag and returns its digest.
func pushImage(t *testing.T, host, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(host + "/isv/accel:" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return digestOf(t, ref.Context(), img)
}

func digestOf(t *testing.T, repo name.Repository, img v1.Image) name.Digest {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return repo.Digest(h.String())
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pubs(keys ...*ecdsa.PrivateKey) []crypto.PublicKey {
	out := make([]crypto.PublicKey, len(keys))
	for i, k := range keys {
		out[i] = k.Public()
	}
	return out
}

func sigLayers(t *testing.T, ref name.Digest, opts ...remote.Option) []v1.Descriptor {
	t.Helper()
	tag, err := SignatureTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag, opts...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Layers
}

func TestPayloadMatchesCosign(t *testing.T) {
	// From cosign's pkg/cosign/obsolete_test.go.
	const want = `{"critical":{"identity":{"docker-reference":"index.docker.io/namespace/image"},"image":{"docker-manifest-digest":"sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec"},"type":"cosign container image signature"},"optional":null}`
	b, err := NewPayload("index.docker.io/namespace/image",
		"sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec", nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("payload\n got %s\nwant %s", b, want)
	}
}

func TestSignatureTag(t *testing.T) {
	ref, err := name.NewDigest("reg.example/isv/accel@sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := SignatureTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := "reg.example/isv/accel:sha256-4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec.sig"; tag.Name() != want {
		t.Errorf("SignatureTag = %s, want %s", tag.Name(), want)
	}
}

func TestSignVerifyRegistry(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	key := newKey(t)

	if err := Sign(ctx, ref, key); err != nil {
		t.Fatal(err)
	}
	sigs, err := Verify(ctx, ref, pubs(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 {
		t.Fatalf("got %d signatures, want 1", len(sigs))
	}
	p := sigs[0].Payload
	if p.Critical.Identity.DockerReference != ref.Context().Name() || p.Critical.Image.DockerManifestDigest != ref.DigestStr() {
		t.Errorf("payload = %+v", p)
	}
	if !sigs[0].Key.(*ecdsa.PublicKey).Equal(key.Public()) {
		t.Error("Signature.Key is not the signing key")
	}
	layers := sigLayers(t, ref)
	if len(layers) != 1 || layers[0].MediaType != PayloadMediaType || layers[0].Annotations[SignatureAnnotation] == "" {
		t.Errorf("signature layers = %+v", layers)
	}
	if _, err := Verify(ctx, ref, pubs(key), WithIdentity(ref.Context().Name())); err != nil {
		t.Errorf("Verify with the repository identity: %v", err)
	}
}

func TestMultipleSignatures(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)
	for _, k := range []*ecdsa.PrivateKey{k1, k2, k1} { // k1 twice: no duplicate
		if err := Sign(ctx, ref, k); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sigLayers(t, ref)); n != 2 {
		t.Errorf("signature image has %d layers, want 2 (re-signing is a no-op)", n)
	}
	for _, tc := range []struct {
		keys []crypto.PublicKey
		want int
	}{
		{pubs(k1), 1}, {pubs(k2), 1}, {pubs(k1, k2), 2}, {pubs(k3, k2), 1},
	} {
		sigs, err := Verify(ctx, ref, tc.keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(sigs) != tc.want {
			t.Errorf("got %d signatures, want %d", len(sigs), tc.want)
		}
	}
}

func TestVerifyWrongKey(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	if err := Sign(ctx, ref, newKey(t)); err != nil {
		t.Fatal(err)
	}
	other := newKey(t)
	_, err := Verify(ctx, ref, pubs(other))
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Verify = %v, want ErrBadSignature", err)
	}
	fp, _ := Fingerprint(other.Public())
	if msg := err.Error(); !strings.Contains(msg, ref.String()) || !strings.Contains(msg, fp) {
		t.Errorf("error %q does not name the image and the key", msg)
	}
}

func TestVerifyNoSignature(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	_, err := Verify(ctx, ref, pubs(newKey(t)))
	if !errors.Is(err, ErrNoSignature) || !strings.Contains(err.Error(), ref.String()) {
		t.Fatalf("Verify = %v, want ErrNoSignature naming %s", err, ref)
	}
}

// TestVerifyOtherDigest moves a valid signature of image B to image A's
// signature tag: the signature verifies, but its payload names B.
func TestVerifyOtherDigest(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	a, b := pushImage(t, host, "a"), pushImage(t, host, "b")
	key := newKey(t)
	if err := Sign(ctx, b, key); err != nil {
		t.Fatal(err)
	}
	tagA, _ := SignatureTag(a)
	tagB, _ := SignatureTag(b)
	img, err := remote.Image(tagB)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tagA, img); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(ctx, a, pubs(key))
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), b.DigestStr()) {
		t.Fatalf("Verify = %v, want ErrBadSignature naming the signed digest", err)
	}
}

// writeSigImage stores a hand-made signature image for ref.
func writeSigImage(t *testing.T, ref name.Digest, mt types.MediaType, payload []byte, annotations map[string]string) {
	t.Helper()
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(payload, mt), Annotations: annotations})
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := SignatureTag(ref)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyTampered(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	key := newKey(t)
	ref := pushImage(t, host, "v1")
	payload, err := NewPayload(ref.Context().Name(), ref.DigestStr(), nil).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	var sig []byte
	// DER signatures vary in length; one that is not a multiple of three
	// bytes long ends in base64 padding bits.
	for len(sig)%3 == 0 {
		if sig, err = ecdsa.SignASN1(nil, key, sum[:]); err != nil {
			t.Fatal(err)
		}
	}
	good := base64.StdEncoding.EncodeToString(sig)
	// The last character before '=' carries unused low bits; setting one
	// leaves the decoded bytes alone for a lenient decoder.
	padded := []byte(good)
	last := strings.IndexByte(good, '=') - 1
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	padded[last] = alphabet[strings.IndexByte(alphabet, padded[last])|1]
	flipped := append([]byte(nil), sig...)
	flipped[len(flipped)-1] ^= 1

	for _, tc := range []struct {
		name    string
		mt      types.MediaType
		payload []byte
		ann     map[string]string
		want    string
	}{
		{"control", PayloadMediaType, payload, map[string]string{SignatureAnnotation: good}, ""},
		{"payload", PayloadMediaType, []byte(strings.Replace(string(payload), "isv/accel", "isv/accex", 1)),
			map[string]string{SignatureAnnotation: good}, "does not verify"},
		{"signature", PayloadMediaType, payload,
			map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(flipped)}, "does not verify"},
		{"padding bits", PayloadMediaType, payload, map[string]string{SignatureAnnotation: string(padded)}, "decoding"},
		{"not base64", PayloadMediaType, payload, map[string]string{SignatureAnnotation: "!" + good}, "decoding"},
		{"no annotation", PayloadMediaType, payload, nil, "no " + SignatureAnnotation},
		{"media type", "application/octet-stream", payload, map[string]string{SignatureAnnotation: good}, "media type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeSigImage(t, ref, tc.mt, tc.payload, tc.ann)
			_, err := Verify(ctx, ref, pubs(key))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Verify = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want ErrBadSignature mentioning %q", err, tc.want)
			}
		})
	}
}

func TestIdentityAndAnnotations(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	key := newKey(t)
	ann := map[string]string{"isv": "acme"}
	if err := Sign(ctx, ref, key, WithIdentity("reg.example/isv/accel:v1"), WithAnnotations(ann)); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, ref, pubs(key), WithIdentity("reg.example/isv/accel:v1"), WithAnnotations(ann)); err != nil {
		t.Errorf("Verify with matching identity and annotations: %v", err)
	}
	if _, err := Verify(ctx, ref, pubs(key)); err != nil {
		t.Errorf("Verify without identity (cosign default): %v", err)
	}
	if _, err := Verify(ctx, ref, pubs(key), WithIdentity(ref.Context().Name())); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify with another identity = %v, want ErrBadSignature", err)
	}
	if _, err := Verify(ctx, ref, pubs(key), WithAnnotations(map[string]string{"isv": "evil"})); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify with another annotation = %v, want ErrBadSignature", err)
	}
}

func TestSignVerifyLayout(t *testing.T) {
	ctx := context.Background()
	p, err := layout.Write(t.TempDir(), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	repo, _ := name.NewRepository("reg.example/isv/accel")
	ref := digestOf(t, repo, img)
	k1, k2 := newKey(t), newKey(t)

	if _, err := Verify(ctx, ref, pubs(k1), WithLayout(p)); !errors.Is(err, ErrNoSignature) {
		t.Fatalf("Verify before signing = %v, want ErrNoSignature", err)
	}
	for _, k := range []*ecdsa.PrivateKey{k1, k2} {
		if err := Sign(ctx, ref, k, WithLayout(p)); err != nil {
			t.Fatal(err)
		}
	}
	sigs, err := Verify(ctx, ref, pubs(k1, k2), WithLayout(p))
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 2 {
		t.Errorf("got %d signatures, want 2", len(sigs))
	}
	if _, err := Verify(ctx, ref, pubs(newKey(t)), WithLayout(p)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Verify with wrong key = %v, want ErrBadSignature", err)
	}

	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := SignatureTag(ref)
	var tagged int
	for _, d := range m.Manifests {
		if d.Annotations[refNameAnnotation] == tag.TagStr() {
			tagged++
		}
	}
	if len(m.Manifests) != 2 || tagged != 1 {
		t.Errorf("index.json has %d manifests, %d tagged %s; want the image and one signature image",
			len(m.Manifests), tagged, tag.TagStr())
	}
}

func TestVerifyRejectsBadKeys(t *testing.T) {
	ctx := context.Background()
	ref := pushImage(t, newRegistry(t), "v1")
	if _, err := Verify(ctx, ref, nil); err == nil {
		t.Error("Verify with no keys succeeded")
	}
	if _, err := Verify(ctx, ref, []crypto.PublicKey{"not a key"}); err == nil {
		t.Error("Verify with a non-ECDSA key succeeded")
	}
}

func TestContextCanceled(t *testing.T) {
	ref := pushImage(t, newRegistry(t), "v1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sign(ctx, ref, newKey(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("Sign with canceled context = %v, want context.Canceled", err)
	}
}
