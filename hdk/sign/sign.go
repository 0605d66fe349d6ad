package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Cosign's media type and annotation for simple-signing signature layers.
const (
	PayloadMediaType    types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation                 = "dev.cosignproject.cosign/signature"
)

// Limits on what Verify reads from a signature image. cosign caps layers at
// 1000 too; real payloads are a few hundred bytes.
const (
	maxLayers      = 1000
	maxPayloadSize = 1 << 20
)

var (
	// ErrNoSignature: the image has no signature at all.
	ErrNoSignature = errors.New("sign: no signature")
	// ErrBadSignature: the image has signatures but none is valid for the
	// given keys and digest.
	ErrBadSignature = errors.New("sign: no valid signature")
)

// Option configures Sign and Verify.
type Option func(*config)

type config struct {
	store       store
	identity    string
	annotations map[string]string
}

// WithRemoteOptions sets options (auth, transport, ...) for registry access.
// Without them access is anonymous over the default transport; pass e.g.
// remote.WithAuthFromKeychain(authn.DefaultKeychain) to use docker
// credentials as cosign does. The context is always the one passed to Sign
// or Verify.
func WithRemoteOptions(opts ...remote.Option) Option {
	return func(c *config) { c.store = remoteStore{opts: opts} }
}

// WithLayout stores and looks up signatures in the OCI image layout at p
// instead of a registry.
func WithLayout(p layout.Path) Option {
	return func(c *config) { c.store = layoutStore{path: p} }
}

// WithIdentity sets the docker-reference Sign claims (default: the
// repository name, ref.Context().Name(), as cosign does) and makes Verify
// require exactly that claim (default: not checked, as in cosign).
func WithIdentity(identity string) Option {
	return func(c *config) { c.identity = identity }
}

// WithAnnotations sets the payload's optional annotations on Sign (cosign
// sign -a) and, on Verify, requires each of them in the payload as a string
// with exactly that value (cosign verify -a).
func WithAnnotations(a map[string]string) Option {
	return func(c *config) { c.annotations = maps.Clone(a) }
}

func newConfig(opts []Option) config {
	c := config{store: remoteStore{}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Sign signs the manifest digest ref with key (an ECDSA P-256 signer) and
// appends the signature to ref's sha256-<hex>.sig image, creating it if
// needed. If that image already holds a signature of the same payload by the
// same key, nothing is written.
func Sign(ctx context.Context, ref name.Digest, key crypto.Signer, opts ...Option) error {
	c := newConfig(opts)
	pub, ok := key.Public().(*ecdsa.PublicKey)
	if !ok {
		return fmt.Errorf("sign: signing %s: key is %T, want ECDSA P-256", ref, key.Public())
	}
	if err := checkCurve(pub); err != nil {
		return fmt.Errorf("sign: signing %s: %w", ref, err)
	}
	tag, err := SignatureTag(ref)
	if err != nil {
		return err
	}
	identity := c.identity
	if identity == "" {
		identity = ref.Context().Name()
	}
	var optional map[string]any
	if len(c.annotations) > 0 {
		optional = make(map[string]any, len(c.annotations))
		for k, v := range c.annotations {
			optional[k] = v
		}
	}
	payload, err := NewPayload(identity, ref.DigestStr(), optional).Marshal()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	sig, err := key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return fmt.Errorf("sign: signing %s: %w", ref, err)
	}
	// Catch signers (HSM, KMS) that do not produce ASN.1 ECDSA signatures
	// before anything is pushed.
	if !ecdsa.VerifyASN1(pub, sum[:], sig) {
		return fmt.Errorf("sign: signing %s: signer produced a signature its public key does not verify", ref)
	}

	base, err := c.store.get(ctx, tag)
	if err != nil {
		return err
	}
	if base == nil {
		base = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	} else if dup, err := hasSignature(base, payload, pub); err != nil {
		return fmt.Errorf("sign: reading existing signatures of %s: %w", ref, err)
	} else if dup {
		return nil
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(payload, PayloadMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return fmt.Errorf("sign: building signature image for %s: %w", ref, err)
	}
	return c.store.put(ctx, tag, img)
}

// hasSignature reports whether img holds payload signed by pub (cosign's
// duplicate detection).
func hasSignature(img v1.Image, payload []byte, pub *ecdsa.PublicKey) (bool, error) {
	layers, err := readLayers(img)
	if err != nil {
		return false, err
	}
	for _, l := range layers {
		if !bytes.Equal(l.payload, payload) || l.mediaType != PayloadMediaType {
			continue
		}
		if _, _, err := l.verifiedBy(pub); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// Signature is a verified signature.
type Signature struct {
	Payload   Payload
	Raw       []byte           // the signed payload bytes
	Signature []byte           // ASN.1 DER ECDSA signature
	Key       crypto.PublicKey // the key it verified against
}

// Verify fetches ref's signatures and returns those that verify against one
// of keys and whose payload names exactly ref's digest (and the identity and
// annotations required by options). It returns an error wrapping
// ErrNoSignature if there are no signatures and ErrBadSignature if none is
// valid.
func Verify(ctx context.Context, ref name.Digest, keys []crypto.PublicKey, opts ...Option) ([]Signature, error) {
	c := newConfig(opts)
	if len(keys) == 0 {
		return nil, fmt.Errorf("sign: verifying %s: no keys given", ref)
	}
	pubs := make([]*ecdsa.PublicKey, len(keys))
	names := make([]string, len(keys))
	for i, k := range keys {
		ek, ok := k.(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("sign: verifying %s: key %d is %T, want ECDSA P-256", ref, i, k)
		}
		if err := checkCurve(ek); err != nil {
			return nil, fmt.Errorf("sign: verifying %s: key %d: %w", ref, i, err)
		}
		fp, err := Fingerprint(ek)
		if err != nil {
			return nil, err
		}
		pubs[i], names[i] = ek, fp
	}
	tag, err := SignatureTag(ref)
	if err != nil {
		return nil, err
	}
	img, err := c.store.get(ctx, tag)
	if err != nil {
		return nil, err
	}
	if img == nil {
		return nil, fmt.Errorf("%w for %s (no %s in %s)", ErrNoSignature, ref, tag.TagStr(), c.store)
	}
	layers, err := readLayers(img)
	if err != nil {
		return nil, fmt.Errorf("sign: reading signatures of %s: %w", ref, err)
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("%w for %s (%s in %s is empty)", ErrNoSignature, ref, tag.TagStr(), c.store)
	}

	var valid []Signature
	var reasons []string
	for i, l := range layers {
		sig, err := l.check(ref, pubs, c)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("layer %d: %v", i, err))
			continue
		}
		valid = append(valid, sig)
	}
	if len(valid) == 0 {
		return nil, fmt.Errorf("%w for %s with key(s) %s: %s",
			ErrBadSignature, ref, strings.Join(names, ", "), strings.Join(reasons, "; "))
	}
	return valid, nil
}

// layer is one signature layer as stored.
type layer struct {
	mediaType  types.MediaType
	payload    []byte
	annotation string
	hasAnn     bool
}

func readLayers(img v1.Image) ([]layer, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) > maxLayers {
		return nil, fmt.Errorf("%d layers, more than the %d allowed", len(m.Layers), maxLayers)
	}
	out := make([]layer, 0, len(m.Layers))
	for i, d := range m.Layers {
		if d.Size > maxPayloadSize {
			return nil, fmt.Errorf("layer %d is %d bytes, more than the %d allowed", i, d.Size, maxPayloadSize)
		}
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxPayloadSize+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if int64(len(b)) != d.Size {
			return nil, fmt.Errorf("layer %d: read %d bytes, manifest says %d", i, len(b), d.Size)
		}
		ann, ok := d.Annotations[SignatureAnnotation]
		out = append(out, layer{mediaType: d.MediaType, payload: b, annotation: ann, hasAnn: ok})
	}
	return out, nil
}

func (l layer) signature() ([]byte, error) {
	if !l.hasAnn {
		return nil, fmt.Errorf("no %s annotation", SignatureAnnotation)
	}
	// Strict: a lenient decoder ignores the padding bits of the last
	// character, so a changed annotation would still verify.
	sig, err := base64.StdEncoding.Strict().DecodeString(l.annotation)
	if err != nil {
		return nil, fmt.Errorf("decoding %s annotation: %w", SignatureAnnotation, err)
	}
	return sig, nil
}

// verifiedBy returns the first of pubs the layer's signature verifies
// against, and the decoded signature.
func (l layer) verifiedBy(pubs ...*ecdsa.PublicKey) (*ecdsa.PublicKey, []byte, error) {
	sig, err := l.signature()
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(l.payload)
	for _, pub := range pubs {
		if ecdsa.VerifyASN1(pub, sum[:], sig) {
			return pub, sig, nil
		}
	}
	return nil, nil, errors.New("signature does not verify against any key")
}

// check verifies the layer's signature against pubs and then its claims.
func (l layer) check(ref name.Digest, pubs []*ecdsa.PublicKey, c config) (Signature, error) {
	if l.mediaType != PayloadMediaType {
		return Signature{}, fmt.Errorf("media type %q, want %q", l.mediaType, PayloadMediaType)
	}
	key, sig, err := l.verifiedBy(pubs...)
	if err != nil {
		return Signature{}, err
	}
	p, err := ParsePayload(l.payload)
	if err != nil {
		return Signature{}, err
	}
	if got := p.Critical.Image.DockerManifestDigest; got != ref.DigestStr() {
		return Signature{}, fmt.Errorf("payload signs digest %q, not %s", got, ref.DigestStr())
	}
	if c.identity != "" && p.Critical.Identity.DockerReference != c.identity {
		return Signature{}, fmt.Errorf("payload claims identity %q, want %q", p.Critical.Identity.DockerReference, c.identity)
	}
	for k, want := range c.annotations {
		if got, ok := p.Optional[k].(string); !ok || got != want {
			return Signature{}, fmt.Errorf("payload annotation %q is %v, want %q", k, p.Optional[k], want)
		}
	}
	return Signature{Payload: p, Raw: l.payload, Signature: sig, Key: key}, nil
}
