package modelartifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrRef is what a reference that names no registry, or is malformed,
// fails with.
var ErrRef = errors.New("bad model reference")

// ErrDenied is what a pull or push the registry refuses (401, 403) fails
// with.
var ErrDenied = errors.New("the registry refused the credentials")

// Remote is how to reach a registry: credentials (User and Token, HTTP
// Basic at the registry's token endpoint; both empty: anonymous) and an
// optional transport.
type Remote struct {
	User, Token string
	Transport   http.RoundTripper
	UserAgent   string
}

func (r Remote) options(ctx context.Context) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx)}
	if r.User != "" || r.Token != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Token}))
	}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	if r.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(r.UserAgent))
	}
	return opts
}

// ParseRef parses REGISTRY/NS/REPO:TAG or REGISTRY/NS/REPO@sha256:…. The
// registry must be named (a host with a dot or a port, or localhost): a
// model never comes from a default registry by accident. Plain http is used
// for loopback registries only, as go-containerregistry decides.
func ParseRef(s string) (name.Reference, error) {
	host, _, ok := strings.Cut(s, "/")
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return nil, fmt.Errorf("%w: %q: want REGISTRY/NAMESPACE/REPOSITORY:TAG or @sha256:DIGEST, with the registry's host", ErrRef, s)
	}
	ref, err := name.ParseReference(s, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrRef, s, err)
	}
	if d, ok := ref.(name.Digest); ok && !ValidDigest(d.DigestStr()) {
		return nil, fmt.Errorf("%w: %q: the digest must be sha256", ErrRef, s)
	}
	return ref, nil
}

// remoteErr wraps the registry's refusals of credentials in ErrDenied.
func remoteErr(what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%s: %w: %v", what, ErrDenied, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Push uploads config and model as an artifact to ref (a tag or a digest
// reference) and returns the manifest's digest.
func Push(ctx context.Context, r Remote, ref string, config, model []byte, onnx bool) (string, error) {
	nref, err := ParseRef(ref)
	if err != nil {
		return "", err
	}
	m, raw, err := NewManifest(config, model, onnx)
	if err != nil {
		return "", err
	}
	opts := r.options(ctx)
	repo := nref.Context()
	blobs := []struct {
		b  []byte
		mt string
	}{{config, m.Config.MediaType}, {model, m.Model().MediaType}}
	for _, b := range blobs {
		if err := remote.WriteLayer(repo, static.NewLayer(b.b, types.MediaType(b.mt)), opts...); err != nil {
			return "", remoteErr("pushing a blob to "+repo.String(), err)
		}
	}
	if err := remote.Put(nref, rawManifest(raw), opts...); err != nil {
		return "", remoteErr("pushing the manifest to "+nref.String(), err)
	}
	return Digest(raw), nil
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return ManifestMediaType, nil }

// Resolve returns ref pinned to its manifest's digest
// (REGISTRY/NS/REPO@sha256:…), asking the registry (a HEAD) for a tag, not
// for a digest reference. A manifest over lim's size or of another media
// type is refused before its body is read.
func Resolve(ctx context.Context, r Remote, ref string, lim Limits) (name.Digest, error) {
	nref, err := ParseRef(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if d, ok := nref.(name.Digest); ok {
		return d, nil
	}
	desc, err := remote.Head(nref, r.options(ctx)...)
	if err != nil {
		return name.Digest{}, remoteErr("resolving "+ref, err)
	}
	lim = lim.withDefaults()
	if string(desc.MediaType) != ManifestMediaType || desc.Size > lim.MaxManifestBytes {
		return name.Digest{}, fmt.Errorf("%w: %s: a manifest of type %q and %d bytes, want %q of at most %d", ErrInvalid, ref,
			desc.MediaType, desc.Size, ManifestMediaType, lim.MaxManifestBytes)
	}
	return nref.Context().Digest(desc.Digest.String()), nil
}

// Artifact is a pulled model artifact, checked.
type Artifact struct {
	Digest   string // the manifest's
	Raw      []byte // the manifest as the registry sent it
	Manifest *Manifest
	Config   []byte
	Model    []byte
}

// Pull fetches the artifact at ref, a digest reference (see Resolve), and
// checks the manifest against ref's digest, ParseManifest and lim, and
// every blob against its descriptor.
func Pull(ctx context.Context, r Remote, ref name.Digest, lim Limits) (*Artifact, error) {
	opts := r.options(ctx)
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, remoteErr("fetching the manifest of "+ref.String(), err)
	}
	if Digest(desc.Manifest) != ref.DigestStr() {
		return nil, fmt.Errorf("%w: %s: the manifest's digest is %s", ErrInvalid, ref, Digest(desc.Manifest))
	}
	m, err := ParseManifest(desc.Manifest, lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	a := &Artifact{Digest: ref.DigestStr(), Raw: desc.Manifest, Manifest: m}
	if a.Config, err = fetchBlob(ref.Context(), "config", m.Config, opts); err != nil {
		return nil, err
	}
	if a.Model, err = fetchBlob(ref.Context(), "model", m.Model(), opts); err != nil {
		return nil, err
	}
	return a, nil
}

// fetchBlob reads the blob d describes, at most its size plus one byte,
// and checks it.
func fetchBlob(repo name.Repository, what string, d Descriptor, opts []remote.Option) ([]byte, error) {
	l, err := remote.Layer(repo.Digest(d.Digest), opts...)
	if err != nil {
		return nil, remoteErr("fetching the "+what+" of "+repo.String(), err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, remoteErr("fetching the "+what+" of "+repo.String(), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	if err != nil {
		return nil, remoteErr("reading the "+what+" of "+repo.String(), err)
	}
	return b, Verify(repo.String()+" "+what, d, b)
}
