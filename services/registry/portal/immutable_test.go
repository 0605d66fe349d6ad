package portal_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestUploadOverAVersion uploads an image as a version the listing has:
// refused 409 naming the listing and version, before the server reads the
// image (the answer comes while most of the declared body is unsent), and
// the version's tag still names its image.
func TestUploadOverAVersion(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	key := r.isvKey("acme")
	listing := r.listing("acme", "Edge FFT", "an FFT", true)
	b := r.browser()
	b.signIn("acme")
	if resp, page := b.upload(listing, "0.9.0", r.buildImage("edge-fft", "loopback", false, key)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first upload of 0.9.0: %d %s", resp.StatusCode, errorOf(page))
	}
	before, err := r.as("acme").Tag(t.Context(), listing, "0.9.0")
	if err != nil || before.Digest == "" || !before.Immutable {
		t.Fatalf("tag 0.9.0 after the upload: %+v %v", before, err)
	}

	other := r.buildImage("edge-fft", "alidnn-dual", false, key)
	status, page, sent := b.uploadUnfinished(listing, "0.9.0", other.tar, 1<<30)
	if status != http.StatusConflict || !strings.Contains(page, "Edge FFT") || !strings.Contains(page, "0.9.0") {
		t.Errorf("upload over 0.9.0: %d %s, want 409 naming the listing and version", status, errorOf(page))
	}
	t.Logf("refused after %d of %d bytes were sent: %s", sent, 1<<30, errorOf(page))

	// A whole other image, as a browser sends it, is refused alike.
	resp, page := b.upload(listing, "0.9.0", other)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("whole upload over 0.9.0: %d %s, want 409", resp.StatusCode, errorOf(page))
	}
	after, err := r.as("acme").Tag(t.Context(), listing, "0.9.0")
	if err != nil || after.Digest != before.Digest {
		t.Errorf("tag 0.9.0 names %s after the refusals (%v), want %s", after.Digest, err, before.Digest)
	}
	vs, err := r.as("acme").Versions(t.Context(), listing, nil)
	if err != nil || len(vs.Items) != 1 {
		t.Errorf("versions after the refusals: %+v %v", vs.Items, err)
	}
}

// uploadUnfinished posts the publish form for version with a body that
// declares length bytes but sends only the fields and at most the first
// 64 KiB of image, then waits for the answer. It returns the status, the
// page and the bytes sent: an answer at all shows that the server refused
// without the rest, which it would otherwise wait for.
func (b *browser) uploadUnfinished(listing, version string, image []byte, length int64) (int, string, int64) {
	b.t.Helper()
	_, page := b.get("/isv/publish")
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	mw.WriteField("csrf", csrf(b.t, page))
	mw.WriteField("listing", listing)
	mw.WriteField("version", version)
	w, _ := mw.CreateFormFile("layout", "image.tar")
	w.Write(image[:min(len(image), 64<<10)])
	u, _ := url.Parse(b.base)
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		b.t.Fatal(err)
	}
	defer conn.Close()
	var cookies []string
	for _, c := range b.c.Jar.Cookies(u) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	req := fmt.Sprintf("POST /isv/publish HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		u.Host, strings.Join(cookies, "; "), mw.FormDataContentType(), length)
	n, err := io.WriteString(conn, req)
	if err != nil {
		b.t.Fatal(err)
	}
	m, err := conn.Write(head.Bytes())
	if err != nil {
		b.t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		b.t.Fatalf("no answer while the image was unsent: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), int64(n + m)
}

// TestBrowserUploadOverAVersion: in Chromium, an ISV uploads another image
// as a version its listing has, through the publish form's upload: the
// page shows the refusal naming the listing and the version, and the
// version's tag still names its image.
func TestBrowserUploadOverAVersion(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	key := r.isvKey("acme")
	listing := r.listing("acme", "Edge FFT", "an FFT", true)
	owner := r.browser()
	owner.signIn("acme")
	if resp, page := owner.upload(listing, "0.9.0", r.buildImage("edge-fft", "loopback", false, key)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first upload of 0.9.0: %d %s", resp.StatusCode, errorOf(page))
	}
	before, err := r.as("acme").Tag(t.Context(), listing, "0.9.0")
	if err != nil {
		t.Fatal(err)
	}
	other := r.buildImage("edge-fft", "alidnn-dual", false, key)
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(tarPath, other.tar, 0o600); err != nil {
		t.Fatal(err)
	}

	c := newChrome(t)
	signInChrome(c, r.url, "acme")
	c.run("publish form", chromedp.Navigate(r.url+"/isv/publish?listing="+listing), chromedp.WaitVisible("#p-layout", chromedp.ByID),
		chromedp.SendKeys("#p-version", "0.9.0", chromedp.ByID), chromedp.SetUploadFiles("#p-layout", []string{tarPath}, chromedp.ByID))
	c.run("upload over 0.9.0", chromedp.Click(`form[data-upload] button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`main [role=alert]`, chromedp.ByQuery))
	if got := c.text(`main [role=alert]`); !strings.Contains(got, "Edge FFT") || !strings.Contains(got, "0.9.0") {
		t.Errorf("the refusal %q does not name the listing and the version", got)
	}
	c.shot("18-upload-over-a-version")
	c.refused(http.StatusConflict)
	c.clean("upload over a version")
	after, err := r.as("acme").Tag(t.Context(), listing, "0.9.0")
	if err != nil || after.Digest != before.Digest {
		t.Errorf("tag 0.9.0 names %s after the refused upload (%v), want %s", after.Digest, err, before.Digest)
	}
}
