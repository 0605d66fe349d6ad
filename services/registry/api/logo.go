package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"mime"
	"slices"
	"strings"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// ErrUnsupportedType: a body of a Content-Type the route does not take
// (415); a logo of any type but registryapi.LogoTypes, SVG included.
var ErrUnsupportedType = errors.New("api: unsupported media type")

// logo is the PNG the registry keeps of an uploaded logo.
type logo struct {
	png           []byte
	digest        string // sha256:<hex> of png
	width, height int
}

// logoCodec is the decoder of one of registryapi.LogoTypes.
type logoCodec struct {
	name   string
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

var logoCodecs = map[string]logoCodec{
	"image/png":  {"PNG", png.DecodeConfig, png.Decode},
	"image/jpeg": {"JPEG", jpeg.DecodeConfig, jpeg.Decode},
	"image/webp": {"WebP", webp.DecodeConfig, webp.Decode},
}

// decodeLogo makes the logo the registry keeps of data, an upload of
// Content-Type ctype: its header is read first (image.DecodeConfig), so
// that an image too large to decode (a decompression bomb of a few bytes
// claiming 65535×65535 pixels) is refused before any pixel is; then it is
// decoded with the decoder of the type claimed, never one guessed from the
// bytes, and drawn anew as a PNG of at most registryapi.LogoSide a side.
// Nothing of data but its pixels reaches what is kept: no metadata, no
// chunk, no script.
func decodeLogo(ctype string, data []byte) (logo, error) {
	mt, _, err := mime.ParseMediaType(ctype)
	codec, ok := logoCodecs[mt]
	if err != nil || !ok {
		return logo{}, fmt.Errorf("%w: a logo is a PNG, JPEG or WebP image (Content-Type %s), not %q; never SVG",
			ErrUnsupportedType, strings.Join(registryapi.LogoTypes, ", "), ctype)
	}
	switch {
	case len(data) == 0:
		return logo{}, fieldErr("logo", "empty body: want the image's bytes")
	case len(data) > registryapi.MaxLogoBytes:
		return logo{}, fieldErr("logo", "%d bytes, want at most %d", len(data), registryapi.MaxLogoBytes)
	}
	cfg, err := codec.config(bytes.NewReader(data))
	if err != nil {
		return logo{}, fieldErr("logo", "not a %s image: %v", codec.name, err)
	}
	if err := checkLogoSize(cfg.Width, cfg.Height); err != nil {
		return logo{}, err
	}
	img, err := codec.decode(bytes.NewReader(data))
	if err != nil {
		return logo{}, fieldErr("logo", "not a %s image: %v", codec.name, err)
	}
	if b := img.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return logo{}, fieldErr("logo", "the %s image is %dx%d, its header says %dx%d", codec.name, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	return encodeLogo(img)
}

// checkLogoSize refuses a logo larger than registryapi.MaxLogoSide a side
// or further from square than registryapi.MaxLogoAspect, which would
// shrink to a line of a few pixels on a card.
func checkLogoSize(w, h int) error {
	const maxSide, aspect = registryapi.MaxLogoSide, registryapi.MaxLogoAspect
	switch {
	case w < 1 || h < 1:
		return fieldErr("logo", "the image is %dx%d pixels, want at least 1x1", w, h)
	case w > maxSide || h > maxSide:
		return fieldErr("logo", "the image is %dx%d pixels, want at most %dx%d", w, h, maxSide, maxSide)
	case w > aspect*h || h > aspect*w:
		return fieldErr("logo", "the image is %dx%d pixels, want one at most %d times wider than high or higher than wide", w, h, aspect)
	}
	return nil
}

// encodeLogo draws img into an NRGBA image scaled to fit
// registryapi.LogoSide (never enlarged) and encodes it as PNG.
func encodeLogo(img image.Image) (logo, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if side := registryapi.LogoSide; w > side || h > side {
		if w >= h {
			w, h = side, max(1, h*side/b.Dx())
		} else {
			w, h = max(1, w*side/b.Dy()), side
		}
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, dst); err != nil {
		return logo{}, fmt.Errorf("logo: encoding the PNG: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return logo{png: buf.Bytes(), digest: "sha256:" + hex.EncodeToString(sum[:]), width: w, height: h}, nil
}

// logoType reports whether ctype is one of registryapi.LogoTypes.
func logoType(ctype string) bool {
	mt, _, err := mime.ParseMediaType(ctype)
	return err == nil && slices.Contains(registryapi.LogoTypes, mt)
}
