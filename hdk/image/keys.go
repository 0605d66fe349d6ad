package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// KeysArtifactType is the artifactType of the artifact that carries a sealed
// image's wrapped data keys (the keys file hdk seal writes) to the registry,
// attached to the image as its subject. The keys are wrapped to the
// registry's recipient key, so the artifact is harmless to whoever can pull
// the repository.
const KeysArtifactType = "application/vnd.faas.image.keys.v1+json"

const emptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"

type rawManifest struct{ b []byte }

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// PushKeys attaches keysJSON to the image subject in repo as a
// KeysArtifactType artifact (an OCI 1.1 referrer) and returns its digest.
func PushKeys(ctx context.Context, repo name.Repository, subject v1.Descriptor, keysJSON []byte, opts ...remote.Option) (v1.Hash, error) {
	if !json.Valid(keysJSON) {
		return v1.Hash{}, fmt.Errorf("keys file is not JSON")
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	keys := static.NewLayer(keysJSON, "application/json")
	empty := static.NewLayer([]byte("{}"), emptyMediaType)
	for _, l := range []v1.Layer{keys, empty} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing the keys artifact: %w", err)
		}
	}
	kd, _ := keys.Digest()
	ed, _ := empty.Digest()
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": types.OCIManifestSchema1, "artifactType": KeysArtifactType,
		"config":  map[string]any{"mediaType": emptyMediaType, "digest": ed.String(), "size": 2},
		"layers":  []any{map[string]any{"mediaType": "application/json", "digest": kd.String(), "size": len(keysJSON)}},
		"subject": map[string]any{"mediaType": subject.MediaType, "digest": subject.Digest.String(), "size": subject.Size},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	d, _, err := v1.SHA256(bytes.NewReader(m))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(repo.Digest(d.String()), rawManifest{m}, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the keys artifact: %w", err)
	}
	return d, nil
}
