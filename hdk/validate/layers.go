package validate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// content is what reading a layer found out about its bitstream.
type content struct {
	header bitfile.Header // of a plain layer whose header parsed
	ok     bool           // header is valid
	// stream is the result of the full-stream check, nil if not run or
	// failed.
	stream *bitfile.Result
}

// layers checks the manifest's layer descriptors, matches them to the
// config's chips (cfg may be nil), and reads every layer the limits allow.
// It returns what was read of each plain layer, by digest.
func (c *checker) layers(mf *v1.Manifest, cfg *config) map[v1.Hash]*content {
	tooMany := len(mf.Layers) > c.opts.MaxLayers
	if tooMany {
		c.add(TooManyLayers, -1, "layers", "%d layers, more than the limit of %d; no layer was read", len(mf.Layers), c.opts.MaxLayers)
	}
	for j, d := range mf.Layers {
		if d.MediaType != image.BitstreamMediaType && d.MediaType != image.SealedBitstreamMediaType {
			c.add(LayerMediaTypeInvalid, -1, fmt.Sprintf("layers[%d].mediaType", j), "media type %q, want %q or %q", d.MediaType, image.BitstreamMediaType, image.SealedBitstreamMediaType)
		}
		if d.Size > c.opts.MaxLayerBytes {
			c.add(LayerTooLarge, -1, fmt.Sprintf("layers[%d].size", j), "layer is %d bytes, more than the limit of %d", d.Size, c.opts.MaxLayerBytes)
		}
	}
	if cfg != nil {
		c.match(mf, cfg)
	}
	read := make(map[v1.Hash]*content)
	if tooMany {
		return read
	}
	for j, d := range mf.Layers {
		if _, done := read[d.Digest]; done || d.Size > c.opts.MaxLayerBytes {
			continue
		}
		if err := c.ctx.Err(); err != nil {
			c.add(ReadFailed, -1, "layers", "reading the layers: %v", err)
			break
		}
		read[d.Digest] = c.read(j, d, firstChip(cfg, j))
	}
	return read
}

// firstChip returns the first chip matched to layer j, or -1.
func firstChip(cfg *config, j int) int {
	if cfg != nil {
		for i, ch := range cfg.chips {
			if ch.layerIdx == j {
				return i
			}
		}
	}
	return -1
}

// match gives each chip a layer of its own among the manifest's layers, by
// digest: two chips may name the same bitstream, but the manifest then lists
// it twice, one layer per chip. It reports chips without a layer, layers
// without a chip, and sealed flags that disagree with the media type.
func (c *checker) match(mf *v1.Manifest, cfg *config) {
	taken := make([]bool, len(mf.Layers))
	for i := range cfg.chips {
		ch := &cfg.chips[i]
		if ch.layer == (v1.Hash{}) {
			continue // missing or malformed, reported already
		}
		inManifest := false
		for j, d := range mf.Layers {
			if d.Digest != ch.layer {
				continue
			}
			inManifest = true
			if !taken[j] {
				taken[j], ch.layerIdx = true, j
				break
			}
		}
		field := fmt.Sprintf("chips[%d].layer", i)
		switch {
		case !inManifest:
			c.add(LayerMissing, i, field, "layer %s is not a layer of the manifest", ch.layer)
			continue
		case ch.layerIdx < 0:
			c.add(LayerMissing, i, field, "layer %s is named by another chip too, but the manifest lists it once; it must list it once per chip", ch.layer)
			continue
		}
		mt := mf.Layers[ch.layerIdx].MediaType
		sealed := ch.Sealed
		if (mt == image.BitstreamMediaType && sealed) || (mt == image.SealedBitstreamMediaType && !sealed) {
			c.add(LayerMediaTypeInvalid, i, fmt.Sprintf("chips[%d].sealed", i), "sealed is %t, but layers[%d] has media type %q", sealed, ch.layerIdx, mt)
		}
	}
	for j, t := range taken {
		if !t {
			c.add(LayerUnexpected, -1, fmt.Sprintf("layers[%d]", j), "layer %s belongs to no chip of the config", mf.Layers[j].Digest)
		}
	}
}

// read reads layer j, verifying its digest and size, and checks its
// content as far as it can be checked without the config: the .bit header
// and optionally the whole stream of a plain layer, the seal header of a
// sealed one. Findings name chip, the first chip the layer is for. It
// returns nil if the content is not known good enough to compare with the
// config.
func (c *checker) read(j int, d v1.Descriptor, chip int) *content {
	field := fmt.Sprintf("layers[%d]", j)
	l, err := c.img.LayerByDigest(d.Digest)
	if err != nil {
		c.add(ReadFailed, chip, field, "reading layer %s: %v", d.Digest, err)
		return nil
	}
	rc, err := l.Compressed() // layers are stored as they are: this is the blob the digest names
	if err != nil {
		c.add(ReadFailed, chip, field, "reading layer %s: %v", d.Digest, err)
		return nil
	}
	defer rc.Close()
	// One byte past the declared size tells a longer blob from an exact one
	// without reading more.
	r := io.LimitReader(ctxReader{c.ctx, rc}, max(d.Size, 0)+1)

	var (
		hash     = sha256.New()
		n        int64
		readErr  error
		parser   = bitfile.NewParser(bitfile.Limits{})
		parseErr error
		head     []byte // the first bytes of a sealed layer, for its header
	)
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		b := buf[:k]
		hash.Write(b)
		n += int64(k)
		switch d.MediaType {
		case image.BitstreamMediaType:
			// Past the header, the parser is fed only for a full check.
			if _, done := parser.Header(); parseErr == nil && k > 0 && (!done || c.opts.FullStream) {
				_, parseErr = parser.Write(b)
			}
		case image.SealedBitstreamMediaType:
			if len(head) < seal.HeaderSize {
				head = append(head, b[:min(k, seal.HeaderSize-len(head))]...)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
	}

	sum := hex.EncodeToString(hash.Sum(nil))
	switch {
	case n == d.Size && sum != d.Digest.Hex:
		// Also when reading failed: a registry client reports its own
		// digest check as an error at the end of the blob.
		c.add(LayerDigestMismatch, chip, field+".digest", "layer's bytes have digest sha256:%s, the manifest says %s", sum, d.Digest)
		return nil
	case readErr != nil:
		c.add(ReadFailed, chip, field, "reading layer %s: %v", d.Digest, readErr)
		return nil
	case n != d.Size:
		more := "fewer"
		if n > d.Size {
			more = "more"
		}
		c.add(LayerDigestMismatch, chip, field+".size", "layer has %s bytes than the %d the manifest says", more, d.Size)
		return nil
	}

	switch d.MediaType {
	case image.SealedBitstreamMediaType:
		h, err := seal.ParseHeader(bytes.NewReader(head)) // needs no key
		switch {
		case err != nil:
			c.add(SealHeaderInvalid, chip, field, "%v", err)
		case h.SealedSize() != d.Size:
			c.add(SealHeaderInvalid, chip, field, "the seal header declares a sealed blob of %d bytes, but the layer is %d", h.SealedSize(), d.Size)
		}
		return nil
	case image.BitstreamMediaType:
		return c.plain(parser, parseErr, chip, field)
	}
	return nil
}

// plain finishes the checks of a plain layer whose bytes went to parser.
func (c *checker) plain(parser *bitfile.Parser, parseErr error, chip int, field string) *content {
	h, ok := parser.Header()
	if !ok {
		if parseErr == nil {
			_, parseErr = parser.Close() // the layer ends inside the header
		}
		c.add(BitstreamHeaderInvalid, chip, field, "%v", parseErr)
		return nil
	}
	ct := &content{header: h, ok: true}
	if !h.Partial() {
		c.add(BitstreamNotPartial, chip, field, "the .bit header's design field %q does not say PARTIAL=TRUE: only partial bitstreams load into a role slot", h.Design)
	}
	if c.opts.FullStream {
		err := parseErr
		if err == nil {
			var r bitfile.Result
			if r, err = parser.Close(); err == nil {
				ct.stream = &r
			}
		}
		if err != nil {
			c.add(BitstreamInvalid, chip, field, "%v", err)
		}
	}
	return ct
}

// bitstreams compares the content of each chip's plain layer with the chip.
func (c *checker) bitstreams(mf *v1.Manifest, cfg *config, read map[v1.Hash]*content) {
	for i, ch := range cfg.chips {
		if ch.layerIdx < 0 {
			continue
		}
		ct := read[mf.Layers[ch.layerIdx].Digest]
		if ct == nil || !ct.ok || mf.Layers[ch.layerIdx].MediaType != image.BitstreamMediaType {
			continue
		}
		h, want := ct.header, ch
		if ch.part.Name != "" && !h.ForPart(ch.part) {
			c.add(BitstreamPartMismatch, i, fmt.Sprintf("chips[%d].part", i), "the .bit header is for part %q, not %s", h.Part, ch.part.Name)
		}
		if want.Role.Name != "" && h.DesignName() != want.Role.Name {
			c.add(RoleMismatch, i, fmt.Sprintf("chips[%d].role.name", i), "the .bit header's design name %q is not the role name %q", h.DesignName(), want.Role.Name)
		}
		if ct.stream != nil && ch.part.Name != "" && ct.stream.IDCode != ch.part.IDCode {
			c.add(BitstreamInvalid, i, fmt.Sprintf("chips[%d].layer", i), "the stream writes IDCODE 0x%08x, but part %s is 0x%08x", ct.stream.IDCode, ch.part.Name, ch.part.IDCode)
		}
	}
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
