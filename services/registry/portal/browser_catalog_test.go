package portal_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// logoPNG is a w×h logo: a dark disc on an orange ground, easy to tell on
// a screenshot.
func logoPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	cx, cy, rr := w/2, h/2, min(w, h)*2/5
	for y := range h {
		for x := range w {
			c := color.NRGBA{0xf5, 0x8a, 0x1f, 0xff}
			if (x-cx)*(x-cx)+(y-cy)*(y-cy) < rr*rr {
				c = color.NRGBA{0x1d, 0x23, 0x30, 0xff}
			}
			m.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// loaded is the number of images matching sel that the browser decoded
// (naturalWidth > 0), under the page's CSP.
func (c *chrome) loaded(sel string) int {
	c.t.Helper()
	var n int
	c.run("images "+sel, chromedp.Evaluate(`[...document.querySelectorAll(`+"`"+sel+"`"+`)].filter(i => i.complete && i.naturalWidth > 0).length`, &n))
	return n
}

// TestBrowserLogoAndDocs: an ISV uploads its listing's logo (after an SVG
// is refused on the field) and writes a version's documentation; a
// visitor signed out sees the logo on the marketplace's card, the vendor
// page and the listing page, and the documentation on its tab, each page
// with one h1.
func TestBrowserLogoAndDocs(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Edge FFT", "Streaming FFT.", true)
	r.validated(r.version("acme", id, "acme/edge-fft", "1.0.0"))
	dir := t.TempDir()
	logoPath, svgPath := filepath.Join(dir, "logo.png"), filepath.Join(dir, "logo.svg")
	if err := os.WriteFile(logoPath, logoPNG(t, 600, 400), 0o600); err != nil {
		t.Fatal(err)
	}
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>`
	if err := os.WriteFile(svgPath, []byte(svg), 0o600); err != nil {
		t.Fatal(err)
	}

	c := newChrome(t)
	c.run("sign in", chromedp.Navigate(r.url+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "acme", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.follow("submit sign-in", chromedp.Submit("#password", chromedp.ByID), "form[action='/signout']")
	c.run("editor", chromedp.Navigate(r.url+"/isv/listings/"+id), chromedp.WaitVisible("#l-logo", chromedp.ByID),
		chromedp.SetUploadFiles("#l-logo", []string{svgPath}, chromedp.ByID))
	c.follow("upload the SVG", chromedp.Submit("#l-logo", chromedp.ByID), "#l-logo-err")
	if got, focused := c.text("#l-logo-err"), c.focused("l-logo"); focused != "l-logo" || !strings.Contains(got, "never SVG") {
		t.Fatalf("SVG logo: focus on %q, beside the field %q", focused, got)
	}
	c.shot("30-isv-logo-svg-refused")
	c.refused(http.StatusUnprocessableEntity)
	c.run("choose the PNG", chromedp.SetUploadFiles("#l-logo", []string{logoPath}, chromedp.ByID))
	c.follow("upload the PNG", chromedp.Submit("#l-logo", chromedp.ByID), ".flash")
	if got := c.text(".flash"); got != "Logo saved." || c.loaded(".logo-form img.logo") != 1 {
		t.Fatalf("after the upload: flash %q, logo shown %d", got, c.loaded(".logo-form img.logo"))
	}
	c.shot("31-isv-logo")
	c.clean("listing editor")

	docs := "# Getting started\n\nCall `fft(n)` with **n** a power of two.\n\n## Limits\n\n- n ≤ 65536\n\n<script>alert(1)</script>\n"
	c.run("version page", chromedp.Navigate(r.url+"/isv/listings/"+id+"/versions/1.0.0"), chromedp.WaitVisible("#v-docs", chromedp.ByID),
		chromedp.SetValue("#v-docs", docs, chromedp.ByID))
	c.follow("save the docs", chromedp.Submit("#v-docs", chromedp.ByID), ".flash")
	if got := c.text(".flash"); got != "Documentation saved." {
		t.Fatalf("after saving the docs: %q", got)
	}
	var typed string
	c.run("docs kept", chromedp.Value("#v-docs", &typed, chromedp.ByID))
	if typed != docs {
		t.Fatalf("the form shows %q after saving, want %q", typed, docs)
	}
	c.shot("32-isv-version-docs")
	c.clean("version page")
	c.follow("sign out", chromedp.Click(`form[action="/signout"] button`, chromedp.ByQuery), ".flash")

	h1s := func(page string) {
		t.Helper()
		var n int
		c.run("h1 count", chromedp.Evaluate(`document.querySelectorAll("h1").length`, &n))
		if n != 1 {
			t.Errorf("%s: %d h1, want 1", page, n)
		}
	}
	for _, path := range []string{"/", "/vendors/acme"} {
		c.run("cards "+path, chromedp.Navigate(r.url+path), chromedp.WaitVisible(".cards", chromedp.ByQuery),
			chromedp.WaitReady(`.card img.logo[alt="Logo of Edge FFT"]`, chromedp.ByQuery))
		c.run("logo decoded", chromedp.Poll(`document.querySelector(".card img.logo").complete`, nil))
		if n := c.loaded(`.card img.logo[alt="Logo of Edge FFT"]`); n != 1 {
			t.Fatalf("%s: %d logos shown on the cards, want 1", path, n)
		}
		h1s(path)
	}
	c.shot("33-market-logo")
	c.follow("the listing", chromedp.Click(`.card h2 a`, chromedp.ByQuery), ".listing-head")
	c.run("listing logo", chromedp.Poll(`document.querySelector(".listing-head img.logo").complete`, nil))
	if n := c.loaded(`.listing-head img.logo[alt="Logo of Edge FFT"]`); n != 1 {
		t.Fatalf("listing page: %d logos shown, want 1", n)
	}
	h1s("listing page")
	c.shot("34-listing-logo")
	c.follow("documentation tab", chromedp.Click(`nav.tabs a[href$="tab=docs"]`, chromedp.ByQuery), "#documentation")
	if got := c.text("#docs-heading"); got != "Documentation of version 1.0.0" {
		t.Fatalf("documentation heading %q", got)
	}
	var heading, current string
	var scripts int
	c.run("docs", chromedp.Text("#documentation .docs h2", &heading, chromedp.ByQuery),
		chromedp.Text(`nav.tabs a[aria-current="page"]`, &current, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("main script").length`, &scripts))
	if heading != "Getting started" || current != "Documentation" || scripts != 0 {
		t.Fatalf("documentation tab: first heading %q (an h2: the h1 demoted), current tab %q, %d scripts in main", heading, current, scripts)
	}
	h1s("documentation tab")
	c.shot("35-listing-docs")
	c.follow("versions tab", chromedp.Click(`nav.tabs a[href$="tab=versions"]`, chromedp.ByQuery), "table.versions")
	c.follow("a version's docs", chromedp.Click(`table.versions a[href*="version=1.0.0"]`, chromedp.ByQuery), "#documentation")
	if got := c.text("#documentation .docs"); !strings.Contains(got, "power of two") {
		t.Fatalf("docs of 1.0.0 by link: %q", got)
	}
	c.clean("listing page")
}
