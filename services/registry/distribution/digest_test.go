package distribution_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/distribution"
)

// manifest512 returns an OCI image manifest whose descriptors carry sha512
// digests; subject, when not nil, is its subject descriptor.
func manifest512(t *testing.T, config []byte, subject map[string]any, layers ...[]byte) []byte {
	t.Helper()
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifest,
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob.SHA512.FromBytes(config), "size": len(config)},
	}
	ls := []any{}
	for _, l := range layers {
		ls = append(ls, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob.SHA512.FromBytes(l), "size": len(l)})
	}
	m["layers"] = ls
	if subject != nil {
		m["subject"] = subject
		m["artifactType"] = "application/vnd.example.sig"
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSHA512 pushes, pulls, mounts and deletes blobs and manifests
// addressed by sha512 digests through every upload flavour.
func TestSHA512(t *testing.T) {
	base := serve(t, distribution.Config{Meta: newMeta(t), Blobs: newDirStore(t), Authorizer: distribution.AllowAll{}})
	c := client{t, base}
	const repo = "isv/sha512"

	// Monolithic: one POST.
	config := []byte(`{"architecture":"amd64","os":"linux"}`)
	dc := blob.SHA512.FromBytes(config)
	r := c.do("POST", "/v2/"+repo+"/blobs/uploads/?digest="+string(dc), config).want(t, 201, "")
	r.header(t, "Location", "/v2/"+repo+"/blobs/"+string(dc))
	r.header(t, "Docker-Content-Digest", string(dc))
	// The sha256 address of the same bytes is another blob.
	c.do("HEAD", "/v2/"+repo+"/blobs/"+string(blob.FromBytes(config)), nil).want(t, 404, "")

	// Chunked, announced with digest-algorithm: POST, PATCH, status, PUT.
	layer := bytes.Repeat([]byte("sha512 layer "), 1000)
	dl := blob.SHA512.FromBytes(layer)
	loc := c.do("POST", "/v2/"+repo+"/blobs/uploads/?digest-algorithm=sha512", nil).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", loc, layer[:5000], "Content-Range", "0-4999", "Content-Type", "application/octet-stream").want(t, 202, "").header(t, "Range", "0-4999")
	c.do("GET", loc, nil).want(t, 204, "").header(t, "Range", "0-4999")
	// A wrong sha512 is refused and the upload stays.
	c.do("PUT", loc+"?digest="+string(dl), nil).want(t, 400, "DIGEST_INVALID")
	c.do("PUT", loc+"?digest="+string(dl), layer[5000:], "Content-Range", fmt.Sprintf("5000-%d", len(layer)-1)).
		want(t, 201, "").header(t, "Docker-Content-Digest", string(dl))

	// Streamed: PATCH bodies of unknown length, then an empty PUT.
	streamed := bytes.Repeat([]byte("streamed "), 3000)
	ds := blob.SHA512.FromBytes(streamed)
	loc = c.do("POST", "/v2/"+repo+"/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
	for _, part := range [][]byte{streamed[:10_000], streamed[10_000:]} {
		req, err := http.NewRequest("PATCH", base+loc, io.MultiReader(bytes.NewReader(part))) // no length: chunked encoding
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("streamed PATCH: %d", resp.StatusCode)
		}
		loc = resp.Header.Get("Location")
	}
	c.do("PUT", loc+"?digest="+string(ds), nil).want(t, 201, "").header(t, "Docker-Content-Digest", string(ds))

	// Pull: HEAD, GET, ranges.
	for _, b := range []struct {
		d blob.Digest
		p []byte
	}{{dc, config}, {dl, layer}, {ds, streamed}} {
		r := c.do("HEAD", "/v2/"+repo+"/blobs/"+string(b.d), nil).want(t, 200, "")
		r.header(t, "Docker-Content-Digest", string(b.d))
		r.header(t, "Content-Length", fmt.Sprint(len(b.p)))
		if r := c.do("GET", "/v2/"+repo+"/blobs/"+string(b.d), nil).want(t, 200, ""); !bytes.Equal(r.body, b.p) {
			t.Fatalf("GET %s: content differs", b.d)
		}
		if r := c.do("GET", "/v2/"+repo+"/blobs/"+string(b.d), nil, "Range", "bytes=3-9").want(t, 206, ""); !bytes.Equal(r.body, b.p[3:10]) {
			t.Fatalf("GET %s range: %q", b.d, r.body)
		}
	}

	// Mount into another repository.
	c.do("HEAD", "/v2/isv/other/blobs/"+string(dl), nil).want(t, 404, "")
	c.do("POST", "/v2/isv/other/blobs/uploads/?mount="+string(dl)+"&from="+repo, nil).want(t, 201, "").
		header(t, "Docker-Content-Digest", string(dl))
	c.do("GET", "/v2/isv/other/blobs/"+string(dl), nil).want(t, 200, "")

	// A manifest of sha512 descriptors, pushed by its sha512 digest with
	// tag parameters.
	m := manifest512(t, config, nil, layer, streamed)
	dm := blob.SHA512.FromBytes(m)
	r = c.do("PUT", "/v2/"+repo+"/manifests/"+string(dm)+"?tag=v1&tag=latest", m, "Content-Type", ociManifest).want(t, 201, "")
	r.header(t, "Docker-Content-Digest", string(dm))
	r.header(t, "Location", "/v2/"+repo+"/manifests/"+string(dm))
	if got := r.Header.Values("OCI-Tag"); strings.Join(got, ",") != "v1,latest" {
		t.Fatalf("OCI-Tag %q", got)
	}
	for _, ref := range []string{string(dm), "v1", "latest"} {
		r := c.do("GET", "/v2/"+repo+"/manifests/"+ref, nil).want(t, 200, "")
		r.header(t, "Docker-Content-Digest", string(dm))
		if !bytes.Equal(r.body, m) {
			t.Fatalf("GET manifest %s: content differs", ref)
		}
		c.do("HEAD", "/v2/"+repo+"/manifests/"+ref, nil).want(t, 200, "").header(t, "Docker-Content-Digest", string(dm))
	}
	// The same bytes by sha256, or pushed by tag, are the canonical manifest.
	c.do("GET", "/v2/"+repo+"/manifests/"+string(blob.FromBytes(m)), nil).want(t, 404, "MANIFEST_UNKNOWN")
	c.do("PUT", "/v2/"+repo+"/manifests/canonical", m, "Content-Type", ociManifest).want(t, 201, "").
		header(t, "Docker-Content-Digest", string(blob.FromBytes(m)))
	c.do("GET", "/v2/"+repo+"/manifests/canonical", nil).want(t, 200, "").header(t, "Docker-Content-Digest", string(blob.FromBytes(m)))
	// A body that is not the sha512 named.
	c.do("PUT", "/v2/"+repo+"/manifests/"+string(blob.SHA512.FromBytes(config)), m, "Content-Type", ociManifest).want(t, 400, "DIGEST_INVALID")

	// Referrers of the sha512 manifest.
	sig := manifest512(t, config, map[string]any{"mediaType": ociManifest, "digest": dm, "size": len(m)})
	dsig := blob.SHA512.FromBytes(sig)
	c.do("PUT", "/v2/"+repo+"/manifests/"+string(dsig), sig, "Content-Type", ociManifest).want(t, 201, "").header(t, "OCI-Subject", string(dm))
	r = c.do("GET", "/v2/"+repo+"/referrers/"+string(dm), nil).want(t, 200, "")
	var idx struct {
		Manifests []struct {
			Digest, ArtifactType string
		}
	}
	if err := json.Unmarshal(r.body, &idx); err != nil || len(idx.Manifests) != 1 || idx.Manifests[0].Digest != string(dsig) {
		t.Fatalf("referrers of %s: %s (%v)", dm, r.body, err)
	}

	// Deletes by sha512 digest.
	c.do("DELETE", "/v2/"+repo+"/manifests/"+string(dsig), nil).want(t, 202, "")
	c.do("GET", "/v2/"+repo+"/manifests/"+string(dsig), nil).want(t, 404, "MANIFEST_UNKNOWN")
	c.do("DELETE", "/v2/"+repo+"/manifests/"+string(dm), nil).want(t, 202, "")
	c.do("GET", "/v2/"+repo+"/manifests/v1", nil).want(t, 404, "MANIFEST_UNKNOWN")
	c.do("DELETE", "/v2/isv/other/blobs/"+string(dl), nil).want(t, 202, "")
	c.do("GET", "/v2/isv/other/blobs/"+string(dl), nil).want(t, 404, "BLOB_UNKNOWN")
	c.do("GET", "/v2/"+repo+"/blobs/"+string(dl), nil).want(t, 200, "")
}

// TestUnsupportedDigests: digests of other algorithms, and malformed ones,
// answer 400 DIGEST_INVALID (UNSUPPORTED for an unknown digest-algorithm
// parameter) wherever a digest is accepted; never a 500.
func TestUnsupportedDigests(t *testing.T) {
	base := serve(t, distribution.Config{Meta: newMeta(t), Blobs: newDirStore(t), Authorizer: distribution.AllowAll{}})
	c := client{t, base}
	const repo = "isv/digests"
	config := []byte("{}")
	c.pushBlob(repo, config)
	hex := string(blob.FromBytes(nil))[7:]
	bad := []string{
		"md5:d41d8cd98f00b204e9800998ecf8427e", "sha384:" + hex + hex[:32], "foo:" + hex, "sha256+b64u:abc",
		"sha256:zz", "sha512:" + hex, "sha256:" + strings.ToUpper(hex), "sha256:" + hex + hex,
	}
	for _, d := range bad {
		t.Run(d[:min(len(d), 12)], func(t *testing.T) {
			c.do("POST", "/v2/"+repo+"/blobs/uploads/?digest="+d, []byte("x")).want(t, 400, "DIGEST_INVALID")
			c.do("POST", "/v2/"+repo+"/blobs/uploads/?mount="+d+"&from=isv/x", nil).want(t, 400, "DIGEST_INVALID")
			loc := c.do("POST", "/v2/"+repo+"/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
			c.do("PATCH", loc, []byte("x")).want(t, 202, "")
			c.do("PUT", loc+"?digest="+d, nil).want(t, 400, "DIGEST_INVALID")
			c.do("GET", loc, nil).want(t, 204, "") // the upload survives
			c.do("DELETE", loc, nil).want(t, 204, "")
			c.do("HEAD", "/v2/"+repo+"/blobs/"+d, nil).want(t, 400, "")
			c.do("GET", "/v2/"+repo+"/blobs/"+d, nil).want(t, 400, "DIGEST_INVALID")
			c.do("DELETE", "/v2/"+repo+"/blobs/"+d, nil).want(t, 400, "DIGEST_INVALID")
			c.do("GET", "/v2/"+repo+"/manifests/"+d, nil).want(t, 400, "DIGEST_INVALID")
			c.do("HEAD", "/v2/"+repo+"/manifests/"+d, nil).want(t, 400, "")
			c.do("DELETE", "/v2/"+repo+"/manifests/"+d, nil).want(t, 400, "DIGEST_INVALID")
			c.do("PUT", "/v2/"+repo+"/manifests/"+d, imageManifest(t, config, "", nil), "Content-Type", ociManifest).want(t, 400, "DIGEST_INVALID")
			c.do("GET", "/v2/"+repo+"/referrers/"+d, nil).want(t, 400, "DIGEST_INVALID")
			// In a manifest's descriptors.
			m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":2},"layers":[]}`, ociManifest, d)
			c.do("PUT", "/v2/"+repo+"/manifests/v1", []byte(m), "Content-Type", ociManifest).want(t, 400, "MANIFEST_INVALID")
		})
	}
	for _, a := range []string{"md5", "sha384", "SHA512", ""} {
		c.do("POST", "/v2/"+repo+"/blobs/uploads/?digest-algorithm="+a, nil).want(t, 400, "UNSUPPORTED")
	}
	// Bad tag parameters.
	m := imageManifest(t, config, "", nil)
	d := string(blob.FromBytes(m))
	c.do("PUT", "/v2/"+repo+"/manifests/"+d+"?tag=-bad", m, "Content-Type", ociManifest).want(t, 400, "MANIFEST_INVALID")
	c.do("PUT", "/v2/"+repo+"/manifests/"+d+"?tag=t"+strings.Repeat("&tag=t", 40), m, "Content-Type", ociManifest).want(t, 414, "UNSUPPORTED")
	c.do("GET", "/v2/"+repo+"/manifests/"+d, nil).want(t, 404, "MANIFEST_UNKNOWN")
}
