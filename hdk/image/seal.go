package image

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/hdk/seal"
)

// maxLayerBytes bounds what sealing and unsealing hold in memory per layer.
const maxLayerBytes = 1 << 30

// SealedLayer records how one chip's bitstream was sealed. The wrapped key
// goes to the registry, never into the image.
type SealedLayer struct {
	Chip      ChipIndex
	Layer     v1.Hash         // the sealed layer in the sealed image
	Plaintext v1.Hash         // the .bit it seals
	KeyID     seal.KeyID      // opaque id in the seal header, to ask for the key by
	Key       seal.WrappedKey // the layer's data key, wrapped to the recipient
}

// Seal returns img with every plain bitstream layer sealed under a fresh data
// key, and each data key wrapped to recipient (the registry's key). Sealed
// layers stay as they are. The config marks the chips sealed and names the
// sealed layers; everything else is unchanged.
func Seal(ctx context.Context, img v1.Image, recipient *ecdh.PublicKey) (v1.Image, []SealedLayer, error) {
	var out []SealedLayer
	sealed, err := rewrite(ctx, img, BitstreamMediaType, SealedBitstreamMediaType, func(chip Chip, plain []byte) ([]byte, error) {
		key := seal.NewDataKey()
		var id seal.KeyID
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if _, err := seal.Seal(&buf, bytes.NewReader(plain), key, seal.Options{KeyID: id}); err != nil {
			return nil, err
		}
		wrapped, err := seal.WrapKey(recipient, key)
		if err != nil {
			return nil, err
		}
		digest, _, err := v1.SHA256(bytes.NewReader(buf.Bytes()))
		if err != nil {
			return nil, err
		}
		out = append(out, SealedLayer{Chip: chip.Index, Layer: digest, Plaintext: chip.Layer, KeyID: id, Key: wrapped})
		return buf.Bytes(), nil
	})
	if err != nil {
		return nil, nil, err
	}
	return sealed, out, nil
}

// Unseal returns img with every sealed layer decrypted, with the data key
// keyFor returns for it; each plaintext is authenticated chunk by chunk and
// checked against the digest in its seal header. Unsealing what Seal made
// gives back the original image, digest for digest.
func Unseal(ctx context.Context, img v1.Image, keyFor func(chip Chip, h seal.Header) (seal.DataKey, error)) (v1.Image, error) {
	return rewrite(ctx, img, SealedBitstreamMediaType, BitstreamMediaType, func(chip Chip, blob []byte) ([]byte, error) {
		h, err := seal.ParseHeader(bytes.NewReader(blob))
		if err != nil {
			return nil, err
		}
		key, err := keyFor(chip, h)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if _, err := seal.Unseal(ctx, &buf, bytes.NewReader(blob), key, 2); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
}

// rewrite returns img with each layer of media type from replaced by
// convert's output, of media type to, and the config's chips updated.
func rewrite(ctx context.Context, img v1.Image, from, to types.MediaType, convert func(Chip, []byte) ([]byte, error)) (v1.Image, error) {
	if err := checkMediaTypes(img); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cfg, err := ConfigOf(img)
	if err != nil {
		return nil, err
	}
	mf, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image: reading manifest: %w", err)
	}
	var layers []v1.Layer
	for i, desc := range mf.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, err := img.LayerByDigest(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("image: layer %s: %w", desc.Digest, err)
		}
		if desc.MediaType != from {
			layers = append(layers, l)
			continue
		}
		c := -1
		for k := range cfg.Chips {
			if cfg.Chips[k].Layer == desc.Digest {
				c = k
			}
		}
		if c < 0 {
			return nil, fmt.Errorf("image: layer %s belongs to no chip of the config", desc.Digest)
		}
		data, err := layerBytes(l)
		if err != nil {
			return nil, fmt.Errorf("image: layer %s: %w", desc.Digest, err)
		}
		conv, err := convert(cfg.Chips[c], data)
		if err != nil {
			return nil, fmt.Errorf("image: chip %s, layer %s: %w", cfg.Chips[c].Index, desc.Digest, err)
		}
		nl := static.NewLayer(conv, to)
		nd, err := partial.Descriptor(nl)
		if err != nil {
			return nil, err
		}
		nd.Annotations = desc.Annotations
		mf.Layers[i] = *nd
		cfg.Chips[c].Layer, cfg.Chips[c].Sealed = nd.Digest, to == SealedBitstreamMediaType
		layers = append(layers, nl)
	}
	rawConfig, err := marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("image: encoding config: %w", err)
	}
	mf.Config.Digest, mf.Config.Size, err = v1.SHA256(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, err
	}
	rawManifest, err := marshal(mf)
	if err != nil {
		return nil, fmt.Errorf("image: encoding manifest: %w", err)
	}
	return partial.CompressedToImage(&built{manifest: rawManifest, config: rawConfig, layers: layers})
}

func layerBytes(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxLayerBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxLayerBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxLayerBytes)
	}
	return b, nil
}
