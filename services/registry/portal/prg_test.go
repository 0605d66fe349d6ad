package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

var secretRE = regexp.MustCompile(`<code id="new-secret">(faas_[^<]+)</code>`)

// TestTokenShownOnce: creating a token redirects to the tokens page, which
// shows its secret once; reloading it neither shows it again nor creates
// another token, and the secret never appears in an address.
func TestTokenShownOnce(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	r.user("bob", auth.RoleTenant)
	b := r.browser()
	b.signIn("alice")
	_, page := b.get("/tokens")
	resp, _ := b.do(http.MethodPost, "/tokens", url.Values{"name": {"laptop"}, "csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tokens" {
		t.Fatalf("create token: %d to %q, want 303 to /tokens", resp.StatusCode, resp.Header.Get("Location"))
	}
	var sealed *http.Cookie
	for _, c := range resp.Cookies() {
		if strings.Contains(c.Value, "faas_") {
			t.Fatalf("cookie %s holds the secret in clear", c.Name)
		}
		if c.MaxAge > 0 {
			sealed = c
		}
	}
	if sealed == nil || !sealed.HttpOnly {
		t.Fatalf("no HttpOnly cookie carries the new secret: %+v", resp.Cookies())
	}
	resp, page = b.get("/tokens")
	m := secretRE.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("after the redirect: %d, no secret shown", resp.StatusCode)
	}
	api, err := registryclient.New(r.url, registryclient.WithToken(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Tokens(t.Context(), nil); err != nil {
		t.Fatalf("the shown secret does not authenticate: %v", err)
	}
	if _, page = b.get("/tokens"); strings.Contains(page, m[1]) || strings.Contains(page, `id="new-secret"`) {
		t.Fatal("reloading the page shows the secret again")
	}
	toks, err := r.as("alice").Tokens(t.Context(), nil)
	if err != nil || len(toks.Items) != 1 {
		t.Fatalf("tokens after one creation and two loads: %+v %v", toks.Items, err)
	}
	// Another session replaying the cookie cannot open it.
	other := r.browser()
	other.signIn("bob")
	u, _ := url.Parse(r.url)
	other.c.Jar.SetCookies(u, []*http.Cookie{{Name: sealed.Name, Value: sealed.Value, Path: "/tokens"}})
	if _, page := other.get("/tokens"); strings.Contains(page, `id="new-secret"`) {
		t.Fatal("another session opened the sealed secret")
	}
}

// TestKeyAddedRedirects: registering a key redirects to a page naming it;
// reloading that page registers nothing.
func TestKeyAddedRedirects(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	b := r.browser()
	b.signIn("acme")
	key, _ := sign.GenerateKey()
	pub, _ := sign.MarshalPublicKey(key.Public())
	_, page := b.get("/isv/keys")
	resp, _ := b.do(http.MethodPost, "/isv/keys", url.Values{"csrf": {csrf(t, page)}, "pem": {string(pub)}}, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/isv/keys?added=") {
		t.Fatalf("register key: %d to %q, want 303 to /isv/keys?added=", resp.StatusCode, loc)
	}
	for range 2 {
		if _, page = b.get(loc); !strings.Contains(page, "Key registered. Fingerprint") {
			t.Fatalf("after the redirect: %s", page)
		}
	}
	keys, err := r.as("acme").SigningKeys(t.Context(), nil)
	if err != nil || len(keys.Items) != 1 {
		t.Fatalf("keys after one registration: %+v %v", keys.Items, err)
	}
}
