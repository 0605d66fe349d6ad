package portal_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/hdk/publish"
	"github.com/fpga-faas/faas/internal/loadtest"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// pageLoad is the portal's target load: 100 requests per second.
var pageLoad = loadtest.Load{Rate: 100, Duration: 3e9, Workers: 16}

// benchPages signs acme in (20 published listings) and drives paths in
// turn at pageLoad.
func benchPages(b *testing.B, paths func(r *rig, ids []string) []string) {
	r := newRig(b)
	r.user("acme", auth.RoleISV)
	var ids []string
	for i := range 20 {
		ids = append(ids, r.listing("acme", fmt.Sprintf("IP %02d", i), "An **accelerator** for benchmarks.\n\n- fast\n- small", true))
	}
	br := r.browser()
	br.signIn("acme")
	u, _ := url.Parse(r.url)
	cookies := br.c.Jar.Cookies(u)
	ps := paths(r, ids)
	var n atomic.Uint64
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: pageLoad.Workers}}
	defer c.CloseIdleConnections()
	loadtest.Bench(b, c, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, r.url+ps[int(n.Add(1))%len(ps)], nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		return req, err
	}, func(resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s", resp.Request.URL.Path, resp.Status)
		}
		return nil
	}, pageLoad)
}

// BenchmarkPortalPages is the portal's pages for a signed-in ISV, in
// turn: the marketplace, a search, a listing page (Markdown), the
// dashboard (every listing's versions) and the API tokens, at 100 req/s.
func BenchmarkPortalPages(b *testing.B) {
	benchPages(b, func(r *rig, ids []string) []string {
		return []string{"/", "/?q=IP+1", "/listings/" + ids[3], "/isv", "/tokens", "/isv/keys"}
	})
}

// BenchmarkPortalHealthz is the floor of BenchmarkPortalPages: the same
// load on /healthz.
func BenchmarkPortalHealthz(b *testing.B) {
	benchPages(b, func(*rig, []string) []string { return []string{"/healthz"} })
}

// uploadEnv is a registry with acme's signing key and a full-size signed,
// sealed two-chip image (2×38 MiB of frames) as hdk leaves it.
type uploadEnv struct {
	r      *rig
	img    built
	layout string // the unpacked layout, for hdk push
	n      int
}

func newUploadEnv(b *testing.B) *uploadEnv {
	r := newRig(b)
	r.user("acme", auth.RoleISV)
	key := r.isvKey("acme")
	img := r.buildImageSized(benchImage, "alidnn-dual", key)
	dir := filepath.Join(b.TempDir(), "layout")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := publish.Untar(context.Background(), bytes.NewReader(img.tar), dir, publish.Options{}); err != nil {
		b.Fatal(err)
	}
	return &uploadEnv{r: r, img: img, layout: dir}
}

// benchImage is the benchmarks' image's name, the last part of each
// repository they upload into.
const benchImage = "dnn"

// next creates a listing on a repository of its own, so that every
// iteration moves every byte (a repository that has a blob skips it).
func (e *uploadEnv) next(b *testing.B) (listing, repo string) {
	e.n++
	repo = fmt.Sprintf("acme/bench-%d/%s", e.n, benchImage)
	return e.r.listingAt(repo, fmt.Sprintf("Bench %d", e.n), "", false), repo
}

// BenchmarkBrowserUpload is the portal's publish form posting the image
// (multipart, as a browser sends it) and answering once it is pushed and
// attached; bytes are the tar's.
func BenchmarkBrowserUpload(b *testing.B) {
	e := newUploadEnv(b)
	br := e.r.browser()
	br.signIn("acme")
	_, page := br.get("/isv/publish")
	token := csrf(b, page)
	b.SetBytes(int64(len(e.img.tar)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		listing, _ := e.next(b)
		body, ctype := multipartBody(token, listing, e.img)
		b.StartTimer()
		resp, page := br.send(http.MethodPost, "/isv/publish", ctype, body)
		if resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("upload: %d: %s", resp.StatusCode, errorOf(page))
		}
		// The upload queued a validation, which hdk push does not: let it
		// end before the next iteration, so that it does not compete.
		b.StopTimer()
		br.awaitState(listing, "1.0.0")
		b.StartTimer()
	}
}

// BenchmarkHdkPush is the baseline of BenchmarkBrowserUpload: what `hdk
// push` does (publish.Layout over HTTP to the registry) with the same
// layout; bytes are the same tar's, so the ratio compares times.
func BenchmarkHdkPush(b *testing.B) {
	e := newUploadEnv(b)
	host := strings.TrimPrefix(e.r.url, "http://")
	b.SetBytes(int64(len(e.img.tar)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		_, repo := e.next(b)
		ref, err := name.ParseReference(host+"/"+repo+":1.0.0", name.Insecure)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := publish.Layout(context.Background(), e.layout, ref, e.img.keys, nil,
			remote.WithAuth(&authn.Basic{Username: "acme", Password: password})); err != nil {
			b.Fatal(err)
		}
	}
}

// multipartBody is the publish form with img, streamed from memory.
func multipartBody(token, listing string, img built) (io.Reader, string) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	mw.WriteField("csrf", token)
	mw.WriteField("listing", listing)
	mw.WriteField("version", "1.0.0")
	w, _ := mw.CreateFormFile("keys", "layout.keys.json")
	w.Write(img.keys)
	mw.CreateFormFile("layout", "image.tar")
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	return io.MultiReader(bytes.NewReader(head.Bytes()), bytes.NewReader(img.tar), strings.NewReader(tail)), mw.FormDataContentType()
}
