package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestAnotherISVsListings sends every /isv page and form that names a
// listing (and version, and tag rule) as another ISV, with the ids of a
// published listing the marketplace shows it and of a private one: each
// answers 404 with the same page, as the API answers, and changes nothing.
// The owner then gets through each.
func TestAnotherISVsListings(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("bob", auth.RoleISV)
	r.user("carol", auth.RoleTenant)
	key := r.isvKey("acme")
	public := r.listing("acme", "Edge FFT", "an FFT", true)
	private := r.listing("acme", "Secret DSP", "not yet", false)
	owner := r.browser()
	owner.signIn("acme")
	for l, name := range map[string]string{public: "edge-fft", private: "secret-dsp"} {
		if resp, page := owner.upload(l, "0.9.0", r.buildImage(name, "loopback", false, key)); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("upload: %d %s", resp.StatusCode, errorOf(page))
		}
	}
	var rule registryapi.TagRule
	r.api("acme", http.MethodPost, "/listings/"+public+"/tag-rules", registryapi.NewTagRule{Pattern: "release-*"}, &rule)

	type request struct {
		method, path string
		form         url.Values
	}
	requests := func(id string) []request {
		base := "/isv/listings/" + id
		return []request{
			{http.MethodGet, base, nil},
			{http.MethodGet, base + "/versions/0.9.0", nil},
			{http.MethodPost, base, url.Values{"name": {"Stolen"}, "currency": {"USD"}, "visibility": {"private"}}},
			{http.MethodPost, base + "/unpublish", url.Values{}},
			{http.MethodPost, base + "/publish", url.Values{}},
			{http.MethodPost, base + "/shares", url.Values{"account": {"carol"}}},
			{http.MethodPost, base + "/versions", url.Values{"version": {"6.6.6"}, "digest": {"sha256:" + strings.Repeat("0", 64)}}},
			{http.MethodPost, base + "/tag-rules", url.Values{"pattern": {"*"}}},
			{http.MethodPost, base + "/tag-rules/" + rule.ID + "/delete", url.Values{}},
		}
	}
	bob := r.browser()
	bob.signIn("bob")
	_, page := bob.get("/tokens")
	bobCSRF := csrf(t, page)
	send := func(b *browser, token string, q request) (*http.Response, string) {
		if q.form == nil {
			return b.get(q.path)
		}
		form := url.Values{"csrf": {token}}
		for k, v := range q.form {
			form[k] = v
		}
		return b.do(q.method, q.path, form, nil)
	}
	pub, priv := requests(public), requests(private)
	for i := range pub {
		resp, pubPage := send(bob, bobCSRF, pub[i])
		respPriv, privPage := send(bob, bobCSRF, priv[i])
		if resp.StatusCode != http.StatusNotFound || respPriv.StatusCode != http.StatusNotFound {
			t.Errorf("bob: %s %s: %d (published) and %d (private), want 404 for both", pub[i].method, pub[i].path,
				resp.StatusCode, respPriv.StatusCode)
		}
		if errorOf(pubPage) != errorOf(privPage) || strings.Contains(pubPage, "Edge FFT") {
			t.Errorf("bob: %s %s: the published listing's page %q differs from the private one's %q, or names it",
				pub[i].method, pub[i].path, errorOf(pubPage), errorOf(privPage))
		}
	}

	// Nothing changed.
	var l registryapi.Listing
	r.api("acme", http.MethodGet, "/listings/"+public, nil, &l)
	if l.Name != "Edge FFT" || !l.Published {
		t.Errorf("after bob's forms the listing is %+v", l)
	}
	var rules registryapi.Items[registryapi.TagRule]
	r.api("acme", http.MethodGet, "/listings/"+public+"/tag-rules", nil, &rules)
	if len(rules.Items) != 1 {
		t.Errorf("after bob's forms the rules are %+v", rules.Items)
	}
	vs, err := r.as("acme").Versions(t.Context(), public, nil)
	if err != nil || len(vs.Items) != 1 {
		t.Errorf("after bob's forms the versions are %+v %v", vs.Items, err)
	}
	var ents registryapi.Page[registryapi.Entitlement]
	r.api("acme", http.MethodGet, "/entitlements?listing_id="+public, nil, &ents)
	if len(ents.Items) != 0 {
		t.Errorf("after bob's forms the entitlements are %+v", ents.Items)
	}

	// The owner gets through every one (the forms' refusals of bad values
	// are not 404s).
	_, page = owner.get("/tokens")
	ownerCSRF := csrf(t, page)
	for _, q := range pub {
		if resp, page := send(owner, ownerCSRF, q); resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500 {
			t.Errorf("acme: %s %s: %d %s", q.method, q.path, resp.StatusCode, errorOf(page))
		}
	}
}

// TestBrowserNotYours: in Chromium, another ISV opening an ISV's listing,
// version and webhook pages, by the ids of a published listing and a
// private one, gets one "not found" page for all, which names nothing of
// them; the owner gets each page.
func TestBrowserNotYours(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("bob", auth.RoleISV)
	key := r.isvKey("acme")
	public := r.listing("acme", "Edge FFT", "an FFT", true)
	private := r.listing("acme", "Secret DSP", "not yet", false)
	owner := r.browser()
	owner.signIn("acme")
	for l, name := range map[string]string{public: "edge-fft", private: "secret-dsp"} {
		if resp, page := owner.upload(l, "0.9.0", r.buildImage(name, "loopback", false, key)); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("upload: %d %s", resp.StatusCode, errorOf(page))
		}
	}
	var hook registryapi.Webhook
	r.api("acme", http.MethodPost, "/webhooks", registryapi.NewWebhook{URL: "https://hooks.example.com/in",
		Events: []string{registryapi.EventSubscriptionCreated}}, &hook)
	pages := []string{"/isv/listings/" + public, "/isv/listings/" + private,
		"/isv/listings/" + public + "/versions/0.9.0", "/isv/listings/" + private + "/versions/0.9.0", "/webhooks/" + hook.ID}

	c := newChrome(t)
	signInChrome(c, r.url, "bob")
	var first string
	for i, p := range pages {
		c.run("bob opens "+p, chromedp.Navigate(r.url+p), chromedp.WaitVisible("main h1", chromedp.ByQuery))
		got := c.text("main")
		if i == 0 {
			first = got
			c.shot("17-not-yours")
		}
		same := got == first || strings.Replace(got, "webhook", "listing", 1) == first // one rule, its resource named
		if !same || strings.Contains(got, "Edge FFT") || strings.Contains(got, "Secret DSP") || strings.Contains(got, "hooks.example.com") {
			t.Errorf("bob at %s sees %q, want the page of %s: %q", p, got, pages[0], first)
		}
		c.refused(http.StatusNotFound)
	}
	if !strings.Contains(first, "no such listing of yours") {
		t.Errorf("the refusal %q does not say what is wrong", first)
	}
	c.clean("another ISV's pages")

	c2 := newChrome(t)
	signInChrome(c2, r.url, "acme")
	for _, p := range pages {
		c2.run("acme opens "+p, chromedp.Navigate(r.url+p), chromedp.WaitVisible("main h1", chromedp.ByQuery))
		if got := c2.text("main"); got == first {
			t.Errorf("acme at %s gets the refusal %q", p, got)
		}
	}
	c2.clean("the owner's pages")
}
