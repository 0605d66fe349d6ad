package api

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"
)

// BenchmarkDecodeLogo: a logo of the largest size taken (1024×1024), as a
// PNG and as a JPEG, decoded and drawn anew as a 256×256 PNG; what a PUT
// of a logo costs the registry in CPU.
func BenchmarkDecodeLogo(b *testing.B) {
	m := image.NewNRGBA(image.Rect(0, 0, 1024, 1024))
	for y := range 1024 {
		for x := range 1024 {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var pb, jb bytes.Buffer
	if err := png.Encode(&pb, m); err != nil {
		b.Fatal(err)
	}
	if err := jpeg.Encode(&jb, m, &jpeg.Options{Quality: 60}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, ctype string
		data        []byte
	}{{"png", "image/png", pb.Bytes()}, {"jpeg", "image/jpeg", jb.Bytes()}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeLogo(c.ctype, c.data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.data)), "upload-bytes")
		})
	}
}
