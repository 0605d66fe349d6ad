package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

func TestSignInAndOut(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	b := r.browser()

	resp, _ := b.get("/tokens")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2Ftokens" {
		t.Fatalf("signed out /tokens: %d to %q, want 303 to sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}

	_, page := b.get("/signin?next=/tokens")
	resp, page = b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {"alice"}, "password": {"wrong"}, "next": {"/tokens"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Wrong account name or password") {
		t.Fatalf("wrong password: %d", resp.StatusCode)
	}
	resp, _ = b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {"alice"}, "password": {password}, "next": {"/tokens"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tokens" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "faas_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, Path=/", session)
	}
	resp, page = b.get("/tokens")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "act as <strong>alice</strong>") {
		t.Fatalf("/tokens signed in: %d", resp.StatusCode)
	}

	resp, _ = b.do(http.MethodPost, "/signout", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	// The old cookie, replayed, opens nothing: the session is gone from the database.
	old := r.browser()
	u, _ := url.Parse(r.url)
	old.c.Jar.SetCookies(u, []*http.Cookie{{Name: "faas_session", Value: session.Value, Path: "/"}})
	if resp, _ := old.get("/tokens"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("replayed cookie after sign-out: %d, want 303 to sign-in", resp.StatusCode)
	}
}

func TestSignInRefusals(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	r.user("node1", auth.RoleNode)
	b := r.browser()
	_, page := b.get("/signin")
	tok := csrf(t, page)

	// Without the form's token (a cross-site login attempt) nothing is checked.
	other := r.browser()
	if resp, _ := other.do(http.MethodPost, "/signin", url.Values{"csrf": {tok}, "name": {"alice"}, "password": {password}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without the form's cookie: %d, want 403", resp.StatusCode)
	}
	// Nodes do not sign in.
	if resp, _ := b.do(http.MethodPost, "/signin", url.Values{"csrf": {tok}, "name": {"node1"}, "password": {password}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("node sign-in: %d, want 403", resp.StatusCode)
	}
	// An off-site next is not followed.
	_, page = b.get("/signin")
	resp, _ := b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {"alice"}, "password": {password}, "next": {"//evil.example/x"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/my" {
		t.Fatalf("next=//evil.example: %d to %q, want 303 to the tenant's /my", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestLoginRateLimit(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	b := r.browser()
	var last int
	for i := 0; i < 20 && last != http.StatusTooManyRequests; i++ {
		_, page := b.get("/signin")
		resp, _ := b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {"alice"}, "password": {"guess"}}, nil)
		last = resp.StatusCode
		if last == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("20 wrong passwords: last %d, want 429", last)
	}
}

func TestCSRF(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	b := r.browser()
	b.signIn("alice")
	_, page := b.get("/tokens")
	tok := csrf(t, page)

	for name, c := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no token":       {url.Values{"name": {"x"}}, nil},
		"wrong token":    {url.Values{"name": {"x"}, "csrf": {tok + "x"}}, nil},
		"cross-site":     {url.Values{"name": {"x"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"foreign origin": {url.Values{"name": {"x"}, "csrf": {tok}}, map[string]string{"Origin": "https://evil.example"}},
	} {
		if resp, _ := b.do(http.MethodPost, "/tokens", c.form, c.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: POST /tokens %d, want 403", name, resp.StatusCode)
		}
	}
	toks, err := r.as("alice").Tokens(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks.Items) != 0 {
		t.Fatalf("refused posts created tokens: %+v", toks.Items)
	}
	if resp, _ := b.do(http.MethodPost, "/tokens", url.Values{"name": {"ci"}, "csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /tokens with token: %d, want 303", resp.StatusCode)
	}
	// htmx sends the token as a header.
	if resp, _ := b.do(http.MethodPost, "/tokens", url.Values{"name": {"hx"}}, map[string]string{"X-CSRF-Token": tok}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /tokens with X-CSRF-Token: %d", resp.StatusCode)
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Fast AES", "fast", true)
	for _, signedIn := range []bool{false, true} {
		b := r.browser()
		if signedIn {
			b.signIn("acme")
		}
		for _, p := range []string{"/", "/?q=aes", "/signin", "/listings/" + id, "/listings/00000000-0000-0000-0000-000000000000",
			"/tokens", "/no/such/page", "/static/portal.css", "/static/htmx.min.js"} {
			resp, _ := b.get(p)
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("GET %s (signed in %v): CSP %q", p, signedIn, csp)
			}
			if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: frame/nosniff headers missing", p)
			}
		}
	}
}

func TestMarketplaceAndIsolation(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("globex", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	pub := r.listing("acme", "Fast AES", "Encrypts **fast**.", true)
	draft := r.listing("acme", "Secret Draft", "not yet", false)

	anon := r.browser()
	resp, page := anon.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Fast AES") || strings.Contains(page, "Secret Draft") {
		t.Fatalf("anonymous marketplace: %d, want Fast AES and no draft", resp.StatusCode)
	}
	if resp, page = anon.get("/listings/" + pub); resp.StatusCode != http.StatusOK || !strings.Contains(page, "<strong>fast</strong>") {
		t.Fatalf("listing page: %d, want the description rendered", resp.StatusCode)
	}
	for who, b := range map[string]*browser{"anonymous": anon, "globex": r.browser(), "alice": r.browser()} {
		if who != "anonymous" {
			b.signIn(who)
		}
		if resp, page := b.get("/listings/" + draft); resp.StatusCode != http.StatusNotFound || strings.Contains(page, "not yet") {
			t.Errorf("%s sees acme's unpublished listing: %d", who, resp.StatusCode)
		}
	}
	owner := r.browser()
	owner.signIn("acme")
	if resp, _ := owner.get("/listings/" + draft); resp.StatusCode != http.StatusOK {
		t.Errorf("acme's own draft: %d", resp.StatusCode)
	}
}

func TestSubscribe(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	id := r.listing("acme", "Fast AES", "x", true)
	b := r.browser()
	b.signIn("alice")
	_, page := b.get("/listings/" + id)
	if !strings.Contains(page, ">Subscribe</button>") {
		t.Fatal("no subscribe button for a tenant")
	}
	resp, _ := b.do(http.MethodPost, "/listings/"+id+"/subscribe", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("subscribe: %d", resp.StatusCode)
	}
	_, page = b.get(resp.Header.Get("Location"))
	if !strings.Contains(page, "You are subscribed") || !strings.Contains(page, "Subscribed. You can load") {
		t.Fatal("listing after subscribing does not say so")
	}
	ents, err := r.as("alice").Entitlements(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents.Items) != 1 || ents.Items[0].ListingID != id {
		t.Fatalf("entitlements after subscribing: %+v", ents.Items)
	}
}

func TestDescriptionRendersInert(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	evil := "# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n" +
		"[click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=)\n\n" +
		"![img](javascript:alert(4))\n\n<a href=\"javascript:alert(5)\" onclick=\"alert(6)\">raw</a>\n\n" +
		"[ok](https://example.com/doc)"
	id := r.listing("acme", "Evil Listing", evil, true)
	_, page := r.browser().get("/listings/" + id)
	desc := page[strings.Index(page, `<section class="description">`):]
	desc = desc[:strings.Index(desc, "</section>")]
	for _, bad := range []string{"<script", "onerror", "onclick", "javascript:", "data:text/html"} {
		if strings.Contains(strings.ToLower(desc), bad) {
			t.Errorf("description carries %q:\n%s", bad, desc)
		}
	}
	if !strings.Contains(desc, `<a href="https://example.com/doc">ok</a>`) || !strings.Contains(desc, "<h2>Title</h2>") {
		t.Errorf("safe Markdown lost, or its heading not demoted under the page's <h1>:\n%s", desc)
	}
	if n := strings.Count(page, "<h1"); n != 1 {
		t.Errorf("%d <h1> on the listing page, want 1", n)
	}
}
