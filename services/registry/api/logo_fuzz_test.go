package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// FuzzLogo: no upload panics the logo's decoding or makes it allocate
// beyond the limits; every refusal is a field error on "logo" or
// ErrUnsupportedType; what is accepted is a PNG of at most LogoSide a side
// whose digest is the one recorded. Seeds: tiny valid PNG, JPEG and WebP
// (lossless and lossy), an SVG, truncated files (and testdata/fuzz).
func FuzzLogo(f *testing.F) {
	var pb, jb bytes.Buffer
	m := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	m.Pix[3] = 255
	if err := png.Encode(&pb, m); err != nil {
		f.Fatal(err)
	}
	if err := jpeg.Encode(&jb, m, nil); err != nil {
		f.Fatal(err)
	}
	lossless, _ := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	lossy, _ := base64.StdEncoding.DecodeString("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	for _, s := range []struct {
		ctype string
		data  []byte
	}{
		{"image/png", pb.Bytes()}, {"image/jpeg", jb.Bytes()}, {"image/webp", lossless}, {"image/webp", lossy},
		{"image/svg+xml", svg}, {"image/png", svg}, {"image/png", pb.Bytes()[:pb.Len()/2]},
		{"image/jpeg", jb.Bytes()[:jb.Len()/2]}, {"image/webp", lossless[:16]}, {"image/jpeg", pb.Bytes()},
	} {
		f.Add(s.ctype, s.data)
	}
	f.Fuzz(func(t *testing.T, ctype string, data []byte) {
		lg, err := decodeLogo(ctype, data)
		if err != nil {
			var fe *FieldError
			if !errors.Is(err, ErrUnsupportedType) && (!errors.As(err, &fe) || fe.Field != "logo") {
				t.Fatalf("refusal %v is neither a field error on logo nor an unsupported type", err)
			}
			return
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(lg.png))
		if err != nil {
			t.Fatalf("the logo kept is no PNG: %v", err)
		}
		if cfg.Width != lg.width || cfg.Height != lg.height || lg.width > registryapi.LogoSide || lg.height > registryapi.LogoSide {
			t.Fatalf("logo %dx%d, recorded %dx%d, want at most %d a side", cfg.Width, cfg.Height, lg.width, lg.height, registryapi.LogoSide)
		}
		sum := sha256.Sum256(lg.png)
		if lg.digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("digest %s is not the PNG's", lg.digest)
		}
	})
}
