package distribution_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// newMeta starts PostgreSQL and returns the metadata store on it.
func newMeta(t *testing.T) *meta.Store {
	t.Helper()
	return meta.New(testenv.RegistryDB(t))
}

func newDirStore(t *testing.T) blob.Store {
	t.Helper()
	bs, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// serve starts the API with cfg and returns its base URL.
func serve(t *testing.T, cfg distribution.Config) string {
	t.Helper()
	h, err := distribution.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// client is raw HTTP against one server.
type client struct {
	t    *testing.T
	base string
}

type response struct {
	*http.Response
	body []byte
}

func (c client) do(method, path string, body []byte, header ...string) response {
	c.t.Helper()
	url := path
	if strings.HasPrefix(path, "/") {
		url = c.base + path
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{resp, b}
}

// want checks the status and, for error answers, the error code.
func (r response) want(t *testing.T, status int, code string) response {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", r.Request.Method, r.Request.URL, r.StatusCode, status, r.body)
	}
	if code != "" && r.Request.Method != http.MethodHead {
		var e struct {
			Errors []struct{ Code, Message string }
		}
		if err := json.Unmarshal(r.body, &e); err != nil || len(e.Errors) == 0 || e.Errors[0].Code != code {
			t.Fatalf("%s %s: body %s, want error code %s", r.Request.Method, r.Request.URL, r.body, code)
		}
	}
	return r
}

func (r response) header(t *testing.T, key, want string) {
	t.Helper()
	if got := r.Header.Get(key); got != want {
		t.Fatalf("%s %s: %s = %q, want %q", r.Request.Method, r.Request.URL, key, got, want)
	}
}

// pushBlob uploads p monolithically into repo.
func (c client) pushBlob(repo string, p []byte) blob.Digest {
	c.t.Helper()
	d := blob.FromBytes(p)
	c.do("POST", "/v2/"+repo+"/blobs/uploads/?digest="+string(d), p).want(c.t, 201, "")
	return d
}

// imageManifest returns an OCI image manifest of config and layers.
func imageManifest(t *testing.T, config []byte, artifactType string, subject *v1.Descriptor, layers ...[]byte) []byte {
	t.Helper()
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob.FromBytes(config), "size": len(config)},
	}
	ls := []any{}
	for _, l := range layers {
		ls = append(ls, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob.FromBytes(l), "size": len(l)})
	}
	m["layers"] = ls
	if artifactType != "" {
		m["artifactType"] = artifactType
	}
	if subject != nil {
		m["subject"] = subject
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const ociManifest = "application/vnd.oci.image.manifest.v1+json"

func TestAPI(t *testing.T) {
	md := newMeta(t)
	base := serve(t, distribution.Config{Meta: md, Blobs: newDirStore(t), Authorizer: distribution.AllowAll{}, MaxChunkBytes: 1 << 20})
	host := strings.TrimPrefix(base, "http://")

	t.Run("base", func(t *testing.T) {
		c := client{t, base}
		r := c.do("GET", "/v2/", nil).want(t, 200, "")
		r.header(t, "Docker-Distribution-API-Version", "registry/2.0")
		c.do("HEAD", "/v2/", nil).want(t, 200, "")
		c.do("GET", "/v2/no/such/endpoint", nil).want(t, 404, "NOT_FOUND")
	})

	t.Run("ggcr push and pull", func(t *testing.T) {
		ref, err := name.ParseReference(host+"/isv/fpga/image:v1", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := random.Image(4096, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		got, err := remote.Image(ref)
		if err != nil {
			t.Fatal(err)
		}
		wantD, _ := img.Digest()
		gotD, err := got.Digest()
		if err != nil || gotD != wantD {
			t.Fatalf("pulled digest %v (%v), want %v", gotD, err, wantD)
		}
		layers, err := got.Layers()
		if err != nil || len(layers) != 3 {
			t.Fatalf("layers: %d, %v", len(layers), err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			ld, _ := l.Digest()
			if blob.FromBytes(b) != blob.Digest(ld.String()) {
				t.Fatalf("layer %v: content does not match", ld)
			}
		}
		// An index of images, by digest and tag.
		idx, err := random.Index(1024, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		iref, _ := name.ParseReference(host+"/isv/fpga/image:index", name.Insecure)
		if err := remote.WriteIndex(iref, idx); err != nil {
			t.Fatal(err)
		}
		gotIdx, err := remote.Index(iref)
		if err != nil {
			t.Fatal(err)
		}
		wi, _ := idx.Digest()
		if gi, _ := gotIdx.Digest(); gi != wi {
			t.Fatalf("index digest %v, want %v", gi, wi)
		}
		tags, err := remote.List(ref.Context())
		if err != nil || !slices.Equal(tags, []string{"index", "v1"}) {
			t.Fatalf("tags %v, %v", tags, err)
		}
		repos, err := remote.Catalog(context.Background(), ref.Context().Registry)
		if err != nil || !slices.Contains(repos, "isv/fpga/image") {
			t.Fatalf("catalog %v, %v", repos, err)
		}
		// HEAD carries the digest, type and length.
		c := client{t, base}
		r := c.do("HEAD", "/v2/isv/fpga/image/manifests/v1", nil).want(t, 200, "")
		r.header(t, "Docker-Content-Digest", wantD.String())
		mt, _ := img.MediaType()
		r.header(t, "Content-Type", string(mt))
		raw, _ := img.RawManifest()
		r.header(t, "Content-Length", fmt.Sprint(len(raw)))
		if r := c.do("GET", "/v2/isv/fpga/image/manifests/"+wantD.String(), nil).want(t, 200, ""); !bytes.Equal(r.body, raw) {
			t.Fatal("manifest by digest differs")
		}
	})

	t.Run("docker media types", func(t *testing.T) {
		c := client{t, base}
		cfg := c.pushBlob("docker/img", []byte(`{"architecture":"amd64","os":"linux"}`))
		layer := c.pushBlob("docker/img", []byte("layer"))
		m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
			"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":%q,"size":37},
			"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":%q,"size":5}]}`, cfg, layer)
		md := blob.FromBytes([]byte(m))
		c.do("PUT", "/v2/docker/img/manifests/latest", []byte(m), "Content-Type", "application/vnd.docker.distribution.manifest.v2+json").want(t, 201, "")
		l := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json",
			"manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":%q,"size":%d,"platform":{"architecture":"amd64","os":"linux"}}]}`, md, len(m))
		c.do("PUT", "/v2/docker/img/manifests/list", []byte(l), "Content-Type", "application/vnd.docker.distribution.manifest.list.v2+json").want(t, 201, "")
		r := c.do("GET", "/v2/docker/img/manifests/list", nil).want(t, 200, "")
		r.header(t, "Content-Type", "application/vnd.docker.distribution.manifest.list.v2+json")
		// The index's child cannot go while the index lists it.
		c.do("DELETE", "/v2/docker/img/manifests/"+string(md), nil).want(t, 409, "DENIED")
	})

	t.Run("non-distributable layers", func(t *testing.T) {
		c := client{t, base}
		cfg := c.pushBlob("nondist/img", []byte("{}"))
		ext := blob.FromBytes([]byte("elsewhere"))
		manifest := func(urls string) []byte {
			return []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,
				"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":2},
				"layers":[{"mediaType":"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip","digest":%q,"size":9%s}]}`,
				ociManifest, cfg, ext, urls))
		}
		// Without URLs the layer must be in the registry.
		c.do("PUT", "/v2/nondist/img/manifests/v1", manifest(""), "Content-Type", ociManifest).want(t, 400, "MANIFEST_BLOB_UNKNOWN")
		c.do("PUT", "/v2/nondist/img/manifests/v1", manifest(`,"urls":["https://example.com/layer"]`), "Content-Type", ociManifest).want(t, 201, "")
	})

	t.Run("chunked upload", func(t *testing.T) {
		c := client{t, base}
		data := bytes.Repeat([]byte("0123456789"), 100) // 1000 bytes
		d := blob.FromBytes(data)
		r := c.do("POST", "/v2/chunked/repo/blobs/uploads/", nil).want(t, 202, "")
		loc := r.Header.Get("Location")
		if !strings.HasPrefix(loc, "/v2/chunked/repo/blobs/uploads/") {
			t.Fatalf("Location %q", loc)
		}
		c.do("PATCH", loc, data[:300], "Content-Range", "0-299", "Content-Type", "application/octet-stream").
			want(t, 202, "").header(t, "Range", "0-299")
		r = c.do("GET", loc, nil).want(t, 204, "")
		r.header(t, "Range", "0-299")
		r.header(t, "Location", loc)
		// Out of order: a gap, and a repeat.
		c.do("PATCH", loc, data[400:500], "Content-Range", "400-499").want(t, 416, "RANGE_INVALID").header(t, "Range", "0-299")
		c.do("PATCH", loc, data[0:100], "Content-Range", "0-99").want(t, 416, "RANGE_INVALID")
		// A chunk without Content-Range continues at the offset (streamed).
		c.do("PATCH", loc, data[300:700], "Content-Type", "application/octet-stream").want(t, 202, "").header(t, "Range", "0-699")
		// Not yet complete: the wrong digest is refused and the upload stays.
		c.do("PUT", loc+"?digest="+string(blob.FromBytes([]byte("x"))), nil).want(t, 400, "DIGEST_INVALID")
		c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil).want(t, 404, "BLOB_UNKNOWN")
		// The final chunk with the PUT.
		r = c.do("PUT", loc+"?digest="+string(d), data[700:], "Content-Range", "700-999").want(t, 201, "")
		r.header(t, "Location", "/v2/chunked/repo/blobs/"+string(d))
		r.header(t, "Docker-Content-Digest", string(d))
		c.do("GET", loc, nil).want(t, 404, "BLOB_UPLOAD_UNKNOWN")

		r = c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil).want(t, 200, "")
		if !bytes.Equal(r.body, data) {
			t.Fatal("blob content differs")
		}
		r.header(t, "Docker-Content-Digest", string(d))
		c.do("HEAD", "/v2/chunked/repo/blobs/"+string(d), nil).want(t, 200, "").header(t, "Content-Length", "1000")

		// Ranges.
		r = c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil, "Range", "bytes=10-19").want(t, 206, "")
		r.header(t, "Content-Range", "bytes 10-19/1000")
		if string(r.body) != "0123456789" {
			t.Fatalf("range body %q", r.body)
		}
		r = c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil, "Range", "bytes=995-").want(t, 206, "")
		if string(r.body) != "56789" {
			t.Fatalf("open range body %q", r.body)
		}
		r = c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil, "Range", "bytes=-3").want(t, 206, "")
		r.header(t, "Content-Range", "bytes 997-999/1000")
		for _, bad := range []string{"bytes=1000-", "bytes=5-2", "items=0-1", "bytes=0-1,4-5"} {
			c.do("GET", "/v2/chunked/repo/blobs/"+string(d), nil, "Range", bad).want(t, 416, "RANGE_INVALID").
				header(t, "Content-Range", "bytes */1000")
		}
	})

	t.Run("upload cancel and unknown", func(t *testing.T) {
		c := client{t, base}
		loc := c.do("POST", "/v2/cancel/me/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
		c.do("PATCH", loc, []byte("abc")).want(t, 202, "")
		c.do("DELETE", loc, nil).want(t, 204, "")
		c.do("GET", loc, nil).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
		c.do("PATCH", loc, []byte("abc")).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
		c.do("DELETE", loc, nil).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
		// An upload belongs to its repository.
		loc = c.do("POST", "/v2/cancel/me/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
		other := strings.Replace(loc, "/cancel/me/", "/cancel/other/", 1)
		c.do("PATCH", other, []byte("abc")).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
		// Too large a chunk.
		c.do("PATCH", loc, make([]byte, 1<<20+1)).want(t, 413, "SIZE_INVALID")
	})

	t.Run("monolithic", func(t *testing.T) {
		c := client{t, base}
		p := []byte("monolithic blob")
		c.do("POST", "/v2/mono/blobs/uploads/?digest="+string(blob.FromBytes([]byte("other"))), p).want(t, 400, "DIGEST_INVALID")
		c.do("POST", "/v2/mono/blobs/uploads/?digest=sha256:zz", p).want(t, 400, "DIGEST_INVALID")
		d := blob.FromBytes(p)
		r := c.do("POST", "/v2/mono/blobs/uploads/?digest="+string(d), p).want(t, 201, "")
		r.header(t, "Location", "/v2/mono/blobs/"+string(d))
		if r := c.do("GET", "/v2/mono/blobs/"+string(d), nil).want(t, 200, ""); !bytes.Equal(r.body, p) {
			t.Fatal("content differs")
		}
	})

	t.Run("mount and blob delete", func(t *testing.T) {
		c := client{t, base}
		p := []byte("mountable")
		d := c.pushBlob("mount/src", p)
		// The blob is not visible in another repository until mounted.
		c.do("HEAD", "/v2/mount/dst/blobs/"+string(d), nil).want(t, 404, "")
		r := c.do("POST", "/v2/mount/dst/blobs/uploads/?mount="+string(d)+"&from=mount/src", nil).want(t, 201, "")
		r.header(t, "Location", "/v2/mount/dst/blobs/"+string(d))
		r.header(t, "Docker-Content-Digest", string(d))
		c.do("GET", "/v2/mount/dst/blobs/"+string(d), nil).want(t, 200, "")
		// A source without the blob falls back to an upload session.
		r = c.do("POST", "/v2/mount/dst2/blobs/uploads/?mount="+string(d)+"&from=mount/nothing", nil).want(t, 202, "")
		if !strings.Contains(r.Header.Get("Location"), "/blobs/uploads/") {
			t.Fatalf("fallback Location %q", r.Header.Get("Location"))
		}
		c.do("DELETE", "/v2/mount/src/blobs/"+string(d), nil).want(t, 202, "")
		c.do("GET", "/v2/mount/src/blobs/"+string(d), nil).want(t, 404, "BLOB_UNKNOWN")
		c.do("DELETE", "/v2/mount/src/blobs/"+string(d), nil).want(t, 404, "BLOB_UNKNOWN")
		c.do("GET", "/v2/mount/dst/blobs/"+string(d), nil).want(t, 200, "")
	})

	t.Run("manifest errors", func(t *testing.T) {
		c := client{t, base}
		config := []byte("{}")
		layer := []byte("a layer")
		m := imageManifest(t, config, "", nil, layer)
		c.pushBlob("errs/repo", config)
		// The layer is missing.
		c.do("PUT", "/v2/errs/repo/manifests/v1", m, "Content-Type", ociManifest).want(t, 400, "MANIFEST_BLOB_UNKNOWN")
		c.do("GET", "/v2/errs/repo/manifests/v1", nil).want(t, 404, "MANIFEST_UNKNOWN")
		c.pushBlob("errs/repo", layer)
		c.do("PUT", "/v2/errs/repo/manifests/"+string(blob.FromBytes([]byte("x"))), m, "Content-Type", ociManifest).want(t, 400, "DIGEST_INVALID")
		c.do("PUT", "/v2/errs/repo/manifests/v1", []byte("{not json"), "Content-Type", ociManifest).want(t, 400, "MANIFEST_INVALID")
		c.do("PUT", "/v2/errs/repo/manifests/v1", m, "Content-Type", "application/vnd.oci.image.index.v1+json").want(t, 400, "MANIFEST_INVALID")
		c.do("PUT", "/v2/errs/repo/manifests/v1", []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`), "Content-Type", ociManifest).want(t, 400, "MANIFEST_INVALID")
		idx := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":%q,"digest":%q,"size":1}]}`,
			ociManifest, blob.FromBytes([]byte("no such manifest")))
		c.do("PUT", "/v2/errs/repo/manifests/idx", []byte(idx), "Content-Type", "application/vnd.oci.image.index.v1+json").want(t, 400, "MANIFEST_BLOB_UNKNOWN")
		r := c.do("PUT", "/v2/errs/repo/manifests/v1", m, "Content-Type", ociManifest).want(t, 201, "")
		d := string(blob.FromBytes(m))
		r.header(t, "Docker-Content-Digest", d)
		r.header(t, "Location", "/v2/errs/repo/manifests/"+d)

		c.do("GET", "/v2/errs/nothing/manifests/v1", nil).want(t, 404, "NAME_UNKNOWN")
		c.do("GET", "/v2/errs/nothing/tags/list", nil).want(t, 404, "NAME_UNKNOWN")
		c.do("GET", "/v2/Errs/Upper/manifests/v1", nil).want(t, 400, "NAME_INVALID")
		c.do("GET", "/v2/errs/repo/blobs/sha256:123", nil).want(t, 400, "DIGEST_INVALID")
		c.do("POST", "/v2/errs/repo/manifests/v1", nil).want(t, 405, "UNSUPPORTED")

		// Delete by tag leaves the manifest; delete by digest removes it.
		c.do("DELETE", "/v2/errs/repo/manifests/v1", nil).want(t, 202, "")
		c.do("GET", "/v2/errs/repo/manifests/v1", nil).want(t, 404, "MANIFEST_UNKNOWN")
		c.do("GET", "/v2/errs/repo/manifests/"+d, nil).want(t, 200, "")
		c.do("DELETE", "/v2/errs/repo/manifests/"+d, nil).want(t, 202, "")
		c.do("GET", "/v2/errs/repo/manifests/"+d, nil).want(t, 404, "MANIFEST_UNKNOWN")
		c.do("DELETE", "/v2/errs/repo/manifests/"+d, nil).want(t, 404, "MANIFEST_UNKNOWN")
	})

	t.Run("tag pagination", func(t *testing.T) {
		c := client{t, base}
		config := []byte(`{"page":1}`)
		c.pushBlob("pages/repo", config)
		m := imageManifest(t, config, "", nil)
		want := []string{"A", "a", "b", "c", "v1.0", "v10", "v2"} // byte order
		for _, tag := range []string{"v2", "a", "v10", "A", "c", "v1.0", "b"} {
			c.do("PUT", "/v2/pages/repo/manifests/"+tag, m, "Content-Type", ociManifest).want(t, 201, "")
		}
		var got []string
		path := "/v2/pages/repo/tags/list?n=3"
		for pages := 0; path != ""; pages++ {
			if pages > 3 {
				t.Fatal("too many pages")
			}
			r := c.do("GET", path, nil).want(t, 200, "")
			var body struct {
				Name string
				Tags []string
			}
			if err := json.Unmarshal(r.body, &body); err != nil || body.Name != "pages/repo" || len(body.Tags) > 3 {
				t.Fatalf("page %s: %v", r.body, err)
			}
			got = append(got, body.Tags...)
			path = ""
			if link := r.Header.Get("Link"); link != "" {
				path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("tags %v, want %v", got, want)
		}
		r := c.do("GET", "/v2/pages/repo/tags/list?last=b", nil).want(t, 200, "")
		if !strings.Contains(string(r.body), `"tags":["c","v1.0","v10","v2"]`) {
			t.Fatalf("last=b: %s", r.body)
		}
		// The catalog pages the same way.
		r = c.do("GET", "/v2/_catalog?n=1", nil).want(t, 200, "")
		if r.Header.Get("Link") == "" || !strings.Contains(string(r.body), `"repositories":["`) {
			t.Fatalf("catalog page: %s, Link %q", r.body, r.Header.Get("Link"))
		}
	})

	t.Run("referrers", func(t *testing.T) {
		ref, _ := name.ParseReference(host+"/refs/subject:v1", name.Insecure)
		img, err := random.Image(512, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref)
		if err != nil {
			t.Fatal(err)
		}
		for i, at := range []string{"application/vnd.example.sig", "application/vnd.example.sbom", "application/vnd.example.sig"} {
			art := mutate.Annotations(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.MediaType(at)),
				map[string]string{"n": fmt.Sprint(i)}).(v1.Image)
			art = mutate.Subject(art, *desc).(v1.Image)
			d, _ := art.Digest()
			if err := remote.Write(ref.Context().Digest(d.String()), art); err != nil {
				t.Fatal(err)
			}
		}
		subj := ref.Context().Digest(desc.Digest.String())
		all, err := remote.Referrers(subj)
		if err != nil {
			t.Fatal(err)
		}
		im, _ := all.IndexManifest()
		if len(im.Manifests) != 3 {
			t.Fatalf("%d referrers, want 3", len(im.Manifests))
		}
		sigs, err := remote.Referrers(subj, remote.WithFilter("artifactType", "application/vnd.example.sig"))
		if err != nil {
			t.Fatal(err)
		}
		im, _ = sigs.IndexManifest()
		if len(im.Manifests) != 2 || im.Manifests[0].ArtifactType != "application/vnd.example.sig" || im.Manifests[0].Annotations["n"] != "0" {
			t.Fatalf("filtered referrers %+v", im.Manifests)
		}
		c := client{t, base}
		r := c.do("GET", "/v2/refs/subject/referrers/"+desc.Digest.String()+"?artifactType=application/vnd.example.sbom", nil).want(t, 200, "")
		r.header(t, "Content-Type", "application/vnd.oci.image.index.v1+json")
		r.header(t, "OCI-Filters-Applied", "artifactType")
		r = c.do("GET", "/v2/refs/subject/referrers/"+string(blob.FromBytes([]byte("none"))), nil).want(t, 200, "")
		r.header(t, "OCI-Filters-Applied", "")
		if !strings.Contains(string(r.body), `"manifests":[]`) {
			t.Fatalf("no referrers: %s", r.body)
		}
		// The OCI-Subject header on PUT.
		config := []byte("{}")
		c.pushBlob("refs/subject", config)
		m := imageManifest(t, config, "application/vnd.example.raw", desc)
		c.do("PUT", "/v2/refs/subject/manifests/"+string(blob.FromBytes(m)), m, "Content-Type", ociManifest).
			want(t, 201, "").header(t, "OCI-Subject", desc.Digest.String())
	})
}

// authz answers with a fixed error, and challenges.
type authz struct{ err error }

func (a authz) Authorize(*http.Request, string, ...string) error { return a.err }
func (a authz) Challenge(_ *http.Request, repo string, actions ...string) string {
	return fmt.Sprintf(`Bearer realm="https://auth.example/token",service="test",scope="repository:%s:%s"`, repo, strings.Join(actions, ","))
}

func TestAuthorizationAndLimits(t *testing.T) {
	md := newMeta(t)
	bs := newDirStore(t)
	unauth := client{t, serve(t, distribution.Config{Meta: md, Blobs: bs, Authorizer: authz{fmt.Errorf("no token: %w", distribution.ErrUnauthorized)}})}
	r := unauth.do("GET", "/v2/", nil).want(t, 401, "UNAUTHORIZED")
	r.header(t, "WWW-Authenticate", `Bearer realm="https://auth.example/token",service="test",scope="repository::"`)
	r = unauth.do("GET", "/v2/a/b/manifests/v1", nil).want(t, 401, "UNAUTHORIZED")
	r.header(t, "WWW-Authenticate", `Bearer realm="https://auth.example/token",service="test",scope="repository:a/b:pull"`)
	unauth.do("POST", "/v2/a/b/blobs/uploads/", nil).want(t, 401, "UNAUTHORIZED")

	denied := client{t, serve(t, distribution.Config{Meta: md, Blobs: bs, Authorizer: authz{distribution.ErrDenied}})}
	denied.do("GET", "/v2/_catalog", nil).want(t, 403, "DENIED")
	denied.do("DELETE", "/v2/a/b/manifests/v1", nil).want(t, 403, "DENIED")

	if _, err := distribution.New(distribution.Config{Meta: md, Blobs: bs}); err == nil {
		t.Error("New without an Authorizer succeeded")
	}

	small := client{t, serve(t, distribution.Config{Meta: md, Blobs: bs, Authorizer: distribution.AllowAll{}, MaxManifestBytes: 100})}
	small.pushBlob("lim/repo", []byte("{}"))
	m := imageManifest(t, []byte("{}"), "", nil)
	if len(m) <= 100 {
		t.Fatalf("test manifest is only %d bytes", len(m))
	}
	small.do("PUT", "/v2/lim/repo/manifests/v1", m, "Content-Type", ociManifest).want(t, 413, "SIZE_INVALID")
}
