package portal_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// postLogo posts the listing editor's logo form with a file of type ctype.
func (b *browser) postLogo(listing, csrf, filename, ctype string, data []byte) (*http.Response, string) {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("csrf", csrf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="logo"; filename="`+filename+`"`)
	h.Set("Content-Type", ctype)
	part, err := mw.CreatePart(h)
	if err != nil {
		b.t.Fatal(err)
	}
	_, _ = part.Write(data)
	_ = mw.Close()
	return b.send(http.MethodPost, "/isv/listings/"+listing+"/logo", mw.FormDataContentType(), &body)
}

// TestLogoForm: the editor's logo form saves a logo and redirects (PRG);
// what the registry refuses is shown on the field; the portal serves the
// logo under nosniff to whoever may see the listing, and another ISV
// cannot set it.
func TestLogoForm(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("zeta", auth.RoleISV)
	pub := r.listing("acme", "Edge FFT", "Fast.", true)
	draft := r.listing("acme", "Draft FFT", "Soon.", false)
	b := r.browser()
	b.signIn("acme")
	_, page := b.get("/isv/listings/" + pub)
	tok := csrf(t, page)
	png := logoPNG(t, 64, 64)

	for _, c := range []struct {
		name, filename, ctype string
		data                  []byte
		want                  string
	}{
		{"too large", "big.png", "image/png", append(png, make([]byte, 300<<10)...), "big.png is larger than 256 KiB"},
		{"not a PNG", "x.png", "image/png", []byte("hello"), "not a PNG image"},
		{"svg", "x.svg", "image/svg+xml", []byte("<svg/>"), "never SVG"},
	} {
		resp, page := b.postLogo(pub, tok, c.filename, c.ctype, c.data)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="l-logo-err"`) || !strings.Contains(page, c.want) {
			t.Errorf("%s: %d, %s; want 422 with %q on the field", c.name, resp.StatusCode, errorOf(page), c.want)
		}
	}
	// A browser that sends no type: the first bytes tell.
	for _, id := range []string{pub, draft} {
		resp, _ := b.postLogo(id, tok, "logo.png", "application/octet-stream", png)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/isv/listings/"+id {
			t.Fatalf("logo of %s: %d to %q, want 303 to the editor", id, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if _, page := b.get("/isv/listings/" + pub); !strings.Contains(page, "Logo saved.") || !strings.Contains(page, `alt="Logo of Edge FFT"`) {
		t.Fatalf("editor after the upload lacks the notice or the logo: %s", errorOf(page))
	}

	visitor := r.browser()
	resp, logo := visitor.get("/listings/" + pub + "/logo")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(logo, "\x89PNG") || resp.Header.Get("ETag") == "" {
		t.Fatalf("visitor's logo: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = visitor.do(http.MethodGet, "/listings/"+pub+"/logo", nil, map[string]string{"If-None-Match": resp.Header.Get("ETag")})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", resp.StatusCode)
	}
	if resp, _ := visitor.get("/listings/" + draft + "/logo"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a draft's logo to a visitor: %d, want 404", resp.StatusCode)
	}
	if resp, _ := b.get("/listings/" + draft + "/logo"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a draft's logo to its owner: %d, want 200", resp.StatusCode)
	}
	if _, page := visitor.get("/"); !strings.Contains(page, `src="/listings/`+pub+`/logo?v=`) {
		t.Fatal("the marketplace's card has no logo")
	}

	other := r.browser()
	other.signIn("zeta")
	_, page = other.get("/isv")
	if resp, _ := other.postLogo(pub, csrf(t, page), "logo.png", "image/png", png); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("zeta sets acme's logo: %d, want 404", resp.StatusCode)
	}

	_, page = b.get("/isv/listings/" + pub)
	resp, _ = b.do(http.MethodPost, "/isv/listings/"+pub+"/logo/delete", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove the logo: %d", resp.StatusCode)
	}
	if resp, _ := visitor.get("/listings/" + pub + "/logo"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the logo removed: %d, want 404", resp.StatusCode)
	}
}

// TestDocsForm: the version page's documentation form saves (PRG), keeps
// what was typed when refused, and the listing page shows the docs of the
// latest version by default and of one by link, with one h1.
func TestDocsForm(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Edge FFT", "Fast.", true)
	r.version("acme", id, "acme/edge-fft", "1.0.0")
	r.version("acme", id, "acme/edge-fft", "2.0.0")
	b := r.browser()
	b.signIn("acme")
	save := func(version, md string) (*http.Response, string) {
		_, page := b.get("/isv/listings/" + id + "/versions/" + version)
		return b.do(http.MethodPost, "/isv/listings/"+id+"/versions/"+version+"/docs", url.Values{"csrf": {csrf(t, page)}, "markdown": {md}}, nil)
	}
	resp, page := save("1.0.0", strings.Repeat("é", 40000))
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="v-docs-err"`) || !strings.Contains(page, "80000 bytes") {
		t.Fatalf("docs of 80000 bytes: %d %s", resp.StatusCode, errorOf(page))
	}
	for v, md := range map[string]string{"1.0.0": "# One\n\nFirst.", "2.0.0": "# Two\n\nSecond.\n\n# Also"} {
		if resp, _ := save(v, md); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("docs of %s: %d", v, resp.StatusCode)
		}
	}
	_, page = b.get("/listings/" + id + "?tab=docs")
	if !strings.Contains(page, "Documentation of version 2.0.0") || !strings.Contains(page, "<h2>Two</h2>") || strings.Count(page, "<h1") != 1 {
		t.Fatalf("docs tab: want 2.0.0's, its headings demoted, one h1:\n%s", page)
	}
	_, page = b.get("/listings/" + id + "?tab=docs&version=1.0.0")
	if !strings.Contains(page, "<h2>One</h2>") || strings.Contains(page, "Second.") {
		t.Fatal("docs tab of 1.0.0 by link shows another version's")
	}
	if resp, _ := b.get("/listings/" + id + "?tab=docs&version=9.9"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("docs of a version that is not there: %d, want 404", resp.StatusCode)
	}
}
