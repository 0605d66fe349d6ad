package sign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// PayloadType is the critical.type of a cosign simple-signing payload.
const PayloadType = "cosign container image signature"

// Payload is cosign's simple-signing payload. Its JSON encoding is
// byte-for-byte what cosign produces for the same fields.
type Payload struct {
	Critical Critical `json:"critical"`
	// Optional holds free-form annotations (cosign sign -a k=v); nil
	// encodes as null, as cosign does.
	Optional map[string]any `json:"optional"`
}

// Critical is the part of a payload a verifier must evaluate.
type Critical struct {
	Identity Identity `json:"identity"`
	Image    Image    `json:"image"`
	Type     string   `json:"type"`
}

// Identity is the image reference claimed by the signer.
type Identity struct {
	DockerReference string `json:"docker-reference"`
}

// Image names the signed manifest.
type Image struct {
	DockerManifestDigest string `json:"docker-manifest-digest"`
}

// NewPayload returns the payload signing manifest digest (sha256:<hex>) under
// the claimed identity, with optional annotations (may be nil).
func NewPayload(identity, digest string, annotations map[string]any) Payload {
	return Payload{
		Critical: Critical{
			Identity: Identity{DockerReference: identity},
			Image:    Image{DockerManifestDigest: digest},
			Type:     PayloadType,
		},
		Optional: annotations,
	}
}

// Marshal returns the payload bytes that get signed.
func (p Payload) Marshal() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("sign: encoding payload: %w", err)
	}
	return b, nil
}

// ParsePayload decodes a simple-signing payload. It rejects anything that is
// not a single JSON object of the cosign container image signature type with
// a manifest digest; unknown fields are ignored, as cosign does.
func ParsePayload(b []byte) (Payload, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return Payload{}, fmt.Errorf("sign: decoding payload: %w", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return Payload{}, errors.New("sign: decoding payload: trailing data after JSON object")
	}
	if p.Critical.Type != PayloadType {
		return Payload{}, fmt.Errorf("sign: payload type %q, want %q", p.Critical.Type, PayloadType)
	}
	if p.Critical.Image.DockerManifestDigest == "" {
		return Payload{}, errors.New("sign: payload names no manifest digest")
	}
	return p, nil
}
