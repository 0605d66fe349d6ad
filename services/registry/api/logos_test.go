package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// rawBody is a body of e.do that is not JSON.
type rawBody struct {
	ctype string
	data  []byte
}

// raw sends body of Content-Type ctype as user who.
func (e *env) raw(who, method, path, ctype string, body []byte) resp {
	e.t.Helper()
	return e.do(who, method, path, rawBody{ctype, body})
}

// testImage is a w×h image with a diagonal, so that scaling has something
// to keep.
func testImage(w, h int) image.Image {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.NRGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	return m
}

func pngOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webp1x1 is a lossless WebP of one pixel.
var webp1x1, _ = base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")

const svgLogo = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>`

// TestLogo: an ISV sets its listing's logo from a PNG, JPEG or WebP; the
// registry keeps and serves a PNG it made, never the bytes uploaded, under
// nosniff and the digest as ETag; anyone sees a published public
// listing's logo, no one a draft's but its owner.
func TestLogo(t *testing.T) {
	e := newEnv(t)
	var l registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "logo", "repository": "isv1/logo", "visibility": "public"}).decode(t, &l)
	path := "/listings/" + l.ID + "/logo"
	e.must(404, "isv1", "GET", path, nil) // none yet

	for _, c := range []struct {
		ctype      string
		body       []byte
		wantW      int
		wantHeight int
	}{
		{"image/png", pngOf(t, 512, 256), 256, 128},
		{"image/jpeg", jpegOf(t, 40, 80), 40, 80},
		{"image/webp", webp1x1, 1, 1},
		{"image/png; charset=binary", pngOf(t, 1024, 1024), 256, 256},
	} {
		r := e.raw("isv1", "PUT", path, c.ctype, c.body)
		if r.status != 200 {
			t.Fatalf("PUT %s: %d %s", c.ctype, r.status, r.body)
		}
		var got registryapi.Listing
		r.decode(t, &got)
		g := e.must(200, "isv1", "GET", path, nil)
		sum := sha256.Sum256(g.body)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if got.LogoDigest != digest || g.header.Get("ETag") != `"`+digest+`"` {
			t.Fatalf("%s: listing's logo_digest %q, ETag %q, digest of the PNG served %s", c.ctype, got.LogoDigest, g.header.Get("ETag"), digest)
		}
		if g.header.Get("Content-Type") != "image/png" || g.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: served as %q, nosniff %q", c.ctype, g.header.Get("Content-Type"), g.header.Get("X-Content-Type-Options"))
		}
		if bytes.Equal(g.body, c.body) {
			t.Fatalf("%s: the bytes uploaded are served as they were, not a PNG made anew", c.ctype)
		}
		m, err := png.Decode(bytes.NewReader(g.body))
		if err != nil {
			t.Fatalf("%s: served logo is no PNG: %v", c.ctype, err)
		}
		if b := m.Bounds(); b.Dx() != c.wantW || b.Dy() != c.wantHeight {
			t.Fatalf("%s: served %dx%d, want %dx%d", c.ctype, b.Dx(), b.Dy(), c.wantW, c.wantHeight)
		}
	}
	etag := e.must(200, "isv1", "GET", path, nil).header.Get("ETag")
	req, _ := http.NewRequest("GET", e.url+registryapi.Prefix+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.users["isv1"].token)
	req.Header.Set("If-None-Match", etag)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match %s: %v %v, want 304", etag, res, err)
	}

	// A draft: only its owner (and admins) see the logo.
	e.must(404, "", "GET", path, nil)
	e.must(404, "tenant1", "GET", path, nil)
	e.must(200, "admin", "GET", path, nil)
	e.must(200, "isv1", "POST", "/listings/"+l.ID+"/publish", nil)
	if g := e.must(200, "", "GET", path, nil); !strings.HasPrefix(g.header.Get("Cache-Control"), "public") {
		t.Fatalf("published public logo: Cache-Control %q", g.header.Get("Cache-Control"))
	}
	var pub registryapi.Catalog
	e.must(200, "", "GET", "/catalog", nil).decode(t, &pub)
	if len(pub.Items) != 1 || pub.Items[0].LogoDigest == "" {
		t.Fatalf("catalog items %+v, want the listing with its logo_digest", pub.Items)
	}

	e.must(204, "isv1", "DELETE", path, nil)
	e.must(404, "", "GET", path, nil)
	e.must(404, "isv1", "DELETE", path, nil)
	var after registryapi.Listing
	e.must(200, "isv1", "GET", "/listings/"+l.ID, nil).decode(t, &after)
	if after.LogoDigest != "" {
		t.Fatalf("logo_digest %q after DELETE", after.LogoDigest)
	}
}

// TestLogoRefused: whatever is not a small PNG, JPEG or WebP is refused
// with what is wrong, and the logo stays as it was.
func TestLogoRefused(t *testing.T) {
	e := newEnv(t)
	var l registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "logo", "repository": "isv1/logo"}).decode(t, &l)
	path := "/listings/" + l.ID + "/logo"
	big := pngOf(t, 64, 64)
	big = append(big, make([]byte, registryapi.MaxLogoBytes)...) // trailing bytes after IEND
	bomb := pngOf(t, 1, 1)
	// IHDR's width (bytes 16-19) and height (20-23) claim 50000×50000,
	// with the chunk's CRC to match: a few bytes that would decode into
	// 10 GB of pixels.
	copy(bomb[16:24], []byte{0, 0, 0xc3, 0x50, 0, 0, 0xc3, 0x50})
	binary.BigEndian.PutUint32(bomb[29:33], crc32.ChecksumIEEE(bomb[12:29]))
	for _, c := range []struct {
		name, ctype string
		body        []byte
		status      int
		want        string
	}{
		{"svg", "image/svg+xml", []byte(svgLogo), 415, "never SVG"},
		{"svg as png", "image/png", []byte(svgLogo), 422, "not a PNG image"},
		{"gif", "image/gif", []byte("GIF89a"), 415, "image/png, image/jpeg, image/webp"},
		{"no type", "", pngOf(t, 8, 8), 415, "Content-Type"},
		{"jpeg as png", "image/png", jpegOf(t, 8, 8), 422, "not a PNG image"},
		{"truncated png", "image/png", pngOf(t, 32, 32)[:60], 422, "not a PNG image"},
		{"truncated webp", "image/webp", webp1x1[:20], 422, "not a WebP image"},
		{"empty", "image/png", nil, 422, "empty body"},
		{"too many bytes", "image/png", big, 413, "larger than"},
		{"too wide", "image/png", pngOf(t, 1025, 200), 422, "at most 1024x1024"},
		{"too thin", "image/png", pngOf(t, 900, 100), 422, "at most 8 times"},
		{"bomb", "image/png", bomb, 422, "50000x50000"},
	} {
		r := e.raw("isv1", "PUT", path, c.ctype, c.body)
		if r.status != c.status || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s: %d %s, want %d and %q", c.name, r.status, r.body, c.status, c.want)
		}
	}
	e.must(404, "isv1", "GET", path, nil)
	var n int
	if err := e.pool.QueryRow(context.Background(), `select count(*) from listing_logos`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d logos stored (%v), want none", n, err)
	}
	// Roles: a tenant may not set a logo at all; another ISV gets the one
	// answer of a listing not its own, before its body is read.
	if r := e.raw("tenant1", "PUT", path, "image/png", pngOf(t, 8, 8)); r.status != 403 {
		t.Fatalf("tenant PUT: %d %s", r.status, r.body)
	}
	if r := e.raw("isv2", "PUT", path, "image/svg+xml", []byte(svgLogo)); r.status != 404 {
		t.Fatalf("isv2 PUT: %d %s, want 404 before the type is looked at", r.status, r.body)
	}
	if r := e.raw("", "PUT", path, "image/png", pngOf(t, 8, 8)); r.status != 401 {
		t.Fatalf("anonymous PUT: %d %s", r.status, r.body)
	}
}

// TestVersionDocs: an ISV writes a version's documentation; whoever sees
// the listing reads it, an anonymous visitor of an available version of
// a published public listing only.
func TestVersionDocs(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/doc", "v1")
	var l registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "doc", "repository": "isv1/doc", "visibility": "public"}).decode(t, &l)
	e.must(201, "isv1", "POST", "/listings/"+l.ID+"/versions", item{"version": "v1", "digest": d})
	path := "/listings/" + l.ID + "/versions/v1/docs"
	var got registryapi.VersionDocs
	e.must(200, "isv1", "GET", path, nil).decode(t, &got)
	if got.Markdown != "" || got.UpdatedAt != nil {
		t.Fatalf("docs before any: %+v", got)
	}
	md := "# Usage\n\nCall `fft()`.\n"
	e.must(200, "isv1", "PUT", path, item{"markdown": md}).decode(t, &got)
	if got.Markdown != md || got.UpdatedAt == nil || got.Version != "v1" {
		t.Fatalf("PUT docs: %+v", got)
	}
	e.must(404, "isv1", "PUT", "/listings/"+l.ID+"/versions/v2/docs", item{"markdown": md})
	e.must(404, "isv1", "GET", "/listings/"+l.ID+"/versions/v2/docs", nil)
	e.must(422, "isv1", "PUT", path, item{"markdown": strings.Repeat("x", registryapi.MaxDocsBytes+1)})
	e.must(422, "isv1", "PUT", path, item{"markdown": "nul \u0000 here"})
	e.must(422, "isv1", "PUT", path, item{"markdown": 3})
	e.must(403, "tenant1", "PUT", path, item{"markdown": "mine"})
	e.must(404, "isv2", "PUT", path, item{"markdown": "mine"})

	e.must(404, "", "GET", path, nil) // a draft
	e.must(200, "isv1", "POST", "/listings/"+l.ID+"/publish", nil)
	e.must(404, "", "GET", path, nil) // the version is not available yet
	e.must(200, "tenant1", "GET", path, nil)
	if _, err := e.pool.Exec(context.Background(), `update validation_jobs set state = 'available' where manifest_digest = $1`, d); err != nil {
		t.Fatal(err)
	}
	e.must(200, "", "GET", path, nil).decode(t, &got)
	if got.Markdown != md {
		t.Fatalf("anonymous GET: %+v", got)
	}
	e.must(200, "isv1", "PUT", path, item{"markdown": ""})
	e.must(200, "", "GET", path, nil).decode(t, &got)
	if got.Markdown != "" {
		t.Fatalf("docs after removal: %+v", got)
	}
}
