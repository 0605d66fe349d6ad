// Package modelartifact is a model as an OCI artifact in the registry: the
// media types, the manifest's checks, and the push and pull that `faas
// model push` and the model server (services/modelserver) share.
//
// An artifact is an OCI image manifest (schemaVersion 2, mediaType
// application/vnd.oci.image.manifest.v1+json) with
//
//	artifactType  application/vnd.faas.model.v1+json
//	config        the model's config.json (the model server's ModelConfig),
//	              media type application/vnd.faas.model.config.v1+json
//	layers        exactly one: the model, media type
//	              application/vnd.faas.model.onnx.v1    an ONNX model, compiled at load
//	              application/vnd.faas.model.alidnn.v1  a program compiled by faas model compile
//
// so that generic OCI clients (oras, crane) can copy and inspect it and a
// registry's garbage collection keeps its blobs. Pull reads nothing it has
// not checked: the manifest's size before its body, every blob's digest and
// size against the manifest, every media type against the list above, and
// every size against Limits.
package modelartifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The media types of a model artifact (see the package comment).
const (
	ManifestMediaType = "application/vnd.oci.image.manifest.v1+json"
	ArtifactType      = "application/vnd.faas.model.v1+json"
	ConfigMediaType   = "application/vnd.faas.model.config.v1+json"
	ONNXMediaType     = "application/vnd.faas.model.onnx.v1"
	ProgramMediaType  = "application/vnd.faas.model.alidnn.v1"
)

// Default limits (Limits' zero values).
const (
	DefaultMaxManifestBytes = 64 << 10
	DefaultMaxConfigBytes   = 1 << 20
	DefaultMaxModelBytes    = 2 << 30
)

// ErrInvalid is what a manifest or blob that is not a model artifact, or
// breaks Limits, fails with.
var ErrInvalid = errors.New("not a valid model artifact")

// Limits bound what Pull and ParseManifest accept; zero fields take the
// defaults above.
type Limits struct {
	MaxManifestBytes int64
	MaxConfigBytes   int64
	MaxModelBytes    int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxManifestBytes <= 0 {
		l.MaxManifestBytes = DefaultMaxManifestBytes
	}
	if l.MaxConfigBytes <= 0 {
		l.MaxConfigBytes = DefaultMaxConfigBytes
	}
	if l.MaxModelBytes <= 0 {
		l.MaxModelBytes = DefaultMaxModelBytes
	}
	return l
}

// Descriptor is an OCI content descriptor, the fields a model artifact
// uses.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Manifest is a model artifact's manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Model is the manifest's one layer: the model.
func (m *Manifest) Model() Descriptor { return m.Layers[0] }

// IsONNX reports whether the model is ONNX (else a compiled program).
func (m *Manifest) IsONNX() bool { return m.Model().MediaType == ONNXMediaType }

// ParseManifest parses and checks b as a model artifact's manifest under
// lim: the media types, one model layer, digests of the sha256 form and
// sizes within the limits. Its errors wrap ErrInvalid and say which field.
func ParseManifest(b []byte, lim Limits) (*Manifest, error) {
	lim = lim.withDefaults()
	if int64(len(b)) > lim.MaxManifestBytes {
		return nil, fmt.Errorf("%w: manifest of %d bytes, more than %d", ErrInvalid, len(b), lim.MaxManifestBytes)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: manifest: data after the JSON object", ErrInvalid)
	}
	switch {
	case m.SchemaVersion != 2:
		return nil, fmt.Errorf("%w: manifest: schemaVersion %d, want 2", ErrInvalid, m.SchemaVersion)
	case m.MediaType != ManifestMediaType:
		return nil, fmt.Errorf("%w: manifest: mediaType %q, want %q", ErrInvalid, m.MediaType, ManifestMediaType)
	case m.ArtifactType != ArtifactType:
		return nil, fmt.Errorf("%w: manifest: artifactType %q, want %q (is this a model pushed by faas model push?)", ErrInvalid, m.ArtifactType, ArtifactType)
	case m.Config.MediaType != ConfigMediaType:
		return nil, fmt.Errorf("%w: manifest: config mediaType %q, want %q", ErrInvalid, m.Config.MediaType, ConfigMediaType)
	case len(m.Layers) != 1:
		return nil, fmt.Errorf("%w: manifest: %d layers, want exactly one (the model)", ErrInvalid, len(m.Layers))
	case m.Layers[0].MediaType != ONNXMediaType && m.Layers[0].MediaType != ProgramMediaType:
		return nil, fmt.Errorf("%w: manifest: layer mediaType %q, want %q or %q", ErrInvalid, m.Layers[0].MediaType, ONNXMediaType, ProgramMediaType)
	}
	if err := checkDescriptor("config", m.Config, lim.MaxConfigBytes); err != nil {
		return nil, err
	}
	if err := checkDescriptor("model layer", m.Layers[0], lim.MaxModelBytes); err != nil {
		return nil, err
	}
	return &m, nil
}

func checkDescriptor(what string, d Descriptor, max int64) error {
	if !ValidDigest(d.Digest) {
		return fmt.Errorf("%w: manifest: %s digest %q is not sha256:<64 hex digits>", ErrInvalid, what, d.Digest)
	}
	if d.Size <= 0 || d.Size > max {
		return fmt.Errorf("%w: manifest: %s size %d, want 1 to %d bytes", ErrInvalid, what, d.Size, max)
	}
	return nil
}

// ValidDigest reports whether d is "sha256:" and 64 lower-case hex digits,
// the only digest this package writes or accepts.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Digest is b's sha256 digest in the OCI form.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Verify checks that b is what d describes: its size and digest.
func Verify(what string, d Descriptor, b []byte) error {
	if int64(len(b)) != d.Size {
		return fmt.Errorf("%w: %s: %d bytes, the manifest says %d", ErrInvalid, what, len(b), d.Size)
	}
	if got := Digest(b); got != d.Digest {
		return fmt.Errorf("%w: %s: digest %s, the manifest says %s", ErrInvalid, what, got, d.Digest)
	}
	return nil
}

// NewManifest is the manifest of an artifact of config and model, an ONNX
// model if onnx, else a compiled program, with its encoding.
func NewManifest(config, model []byte, onnx bool) (*Manifest, []byte, error) {
	mt := ProgramMediaType
	if onnx {
		mt = ONNXMediaType
	}
	m := &Manifest{SchemaVersion: 2, MediaType: ManifestMediaType, ArtifactType: ArtifactType,
		Config: Descriptor{MediaType: ConfigMediaType, Digest: Digest(config), Size: int64(len(config))},
		Layers: []Descriptor{{MediaType: mt, Digest: Digest(model), Size: int64(len(model))}}}
	b, err := json.Marshal(m)
	return m, b, err
}
