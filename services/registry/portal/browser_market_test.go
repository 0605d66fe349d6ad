package portal_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestBrowserMarketSearch: the marketplace finds a vendor's listings,
// narrows them by a category chosen from the keyboard, counts what it
// finds and pages through more results than fit on one page.
func TestBrowserMarketSearch(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("zeta", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	add := func(user, name, category, board string, hour int64) string {
		var l struct{ ID string }
		r.api(user, http.MethodPost, "/listings", map[string]any{"name": name, "summary": name + " on both chips",
			"repository": user + "/" + strings.ToLower(strings.ReplaceAll(name, " ", "-")), "category": category,
			"board_model": board, "price_per_hour_micros": hour, "visibility": "public"}, &l)
		r.api(user, http.MethodPost, "/listings/"+l.ID+"/publish", nil, nil)
		return l.ID
	}
	add("acme", "Fast AES", "Crypto", "faas-vu9p-2", 2_500_000)
	add("acme", "ResNet Inference", "ML", "faas-vu9p-2", 0)
	var kernel string
	for i := range 25 {
		id := add("zeta", fmt.Sprintf("Kernel %02d", i), "hpc", "faas-ku115", int64(i)*1_000_000)
		if i == 0 { // zeta: a verified publisher
			kernel = id
			r.isvKey("zeta")
			r.validated(r.version("zeta", id, "zeta/kernel-00", "v1"))
		}
	}

	c := newChrome(t)
	c.run("marketplace", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	if got := c.text("#result-count"); got != "27 accelerators · 1–24 shown" {
		t.Fatalf("result count %q", got)
	}
	c.shot("10-market")
	c.clean("marketplace")

	c.run("search for a vendor", chromedp.SetValue("#q", "acme", chromedp.ByID))
	c.follow("search", chromedp.Submit("#q", chromedp.ByID), ".cards")
	if got := c.text(".cards"); !strings.Contains(got, "Fast AES") || !strings.Contains(got, "ResNet") || strings.Contains(got, "Kernel") {
		t.Fatalf("search for acme: %q", got)
	}
	if got := strings.Join(strings.Fields(c.text(".facets")), " "); !strings.Contains(got, "Cryptography 1") || !strings.Contains(got, "Machine learning 1") {
		t.Fatalf("facets of acme's listings: %q", got)
	}
	c.shot("11-market-vendor")

	// From the keyboard: space ticks the category, Enter presses the button.
	c.run("focus crypto", chromedp.Focus(`input[name=category][value=crypto]`, chromedp.ByQuery), chromedp.KeyEvent(" "))
	c.run("focus apply", chromedp.Focus(`.facets button`, chromedp.ByQuery))
	c.follow("apply", chromedp.KeyEvent(kb.Enter), ".cards")
	if got := c.text(".cards"); !strings.Contains(got, "Fast AES") || strings.Contains(got, "ResNet") {
		t.Fatalf("acme in crypto: %q", got)
	}
	if got := c.text("#result-count"); got != "1 accelerator for “acme”" {
		t.Fatalf("result count %q", got)
	}
	c.shot("12-market-category")

	c.run("all", chromedp.Navigate(r.url+"/?sort=price"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	c.follow("next page", chromedp.Click(`a[rel=next]`, chromedp.ByQuery), ".cards")
	if got := c.text("#result-count"); got != "27 accelerators · 25–27 shown" {
		t.Fatalf("second page: %q", got)
	}
	if got := c.text(".cards"); !strings.Contains(got, "Kernel 24") {
		t.Fatalf("second page by price: %q", got)
	}
	c.shot("13-market-page-2")
	c.clean("marketplace search")

	c.run("a vendor's card", chromedp.Navigate(r.url+"/?q=fast+aes"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	c.follow("vendor page", chromedp.Click(`.card .vendor a[href="/vendors/acme"]`, chromedp.ByQuery), ".cards")
	if got := c.text("h1"); got != "acme" {
		t.Fatalf("vendor page heading %q, want acme without the badge (acme has no validated version)", got)
	}
	if got := c.text("#result-count"); got != "2 accelerators" {
		t.Fatalf("vendor page: %q", got)
	}
	c.shot("14-vendor")

	c.run("verified vendor", chromedp.Navigate(r.url+"/vendors/zeta"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	if got := c.text("h1"); got != "zeta Verified publisher" {
		t.Fatalf("verified vendor's heading %q", got)
	}
	var badges int
	c.run("badges", chromedp.Evaluate(`document.querySelectorAll(".card .verified").length`, &badges))
	if badges != 24 {
		t.Fatalf("%d cards with the badge, want 24", badges)
	}
	c.shot("15-vendor-verified")
	c.clean("vendor pages")

	c.run("a listing's versions", chromedp.Navigate(r.url+"/listings/"+kernel+"?tab=versions"), chromedp.WaitVisible("table.versions", chromedp.ByQuery))
	c.shot("16-listing-versions")
	c.clean("listing page")

	for _, path := range []string{"/vendors/nobody", "/vendors/alice"} {
		if res, _ := r.browser().get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404 (no listings to show)", path, res.StatusCode)
		}
	}
}
