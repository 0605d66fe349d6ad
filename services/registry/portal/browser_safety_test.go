package portal_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestBrowserSafety: in a real browser, a listing description's scripts do
// not run, a cross-site form post is refused, and a signed-out visitor of
// a private page lands on sign-in.
func TestBrowserSafety(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	evil := "<script>window.pwned='script'</script>\n\n<img src=x onerror=\"window.pwned='onerror'\">\n\n" +
		"[click me](javascript:window.pwned='link')\n\n![img](javascript:window.pwned='image')\n\n" +
		"<a href=\"javascript:window.pwned='raw'\" id=raw>raw</a>"
	id := r.listing("acme", "Evil Listing", evil, true)

	c := newChrome(t)
	c.run("evil listing", chromedp.Navigate(r.url+"/listings/"+id), chromedp.WaitVisible(".description", chromedp.ByQuery))
	var links int
	c.run("links", chromedp.Evaluate(`document.querySelectorAll(".description a").length`, &links))
	if links > 0 {
		c.run("click", chromedp.Click(".description a", chromedp.ByQuery))
	}
	var pwned string
	c.run("pwned?", chromedp.Evaluate(`String(window.pwned)`, &pwned))
	if pwned != "undefined" {
		t.Fatalf("the description ran script: window.pwned = %q", pwned)
	}

	// Signed out, a private page sends the browser to sign in.
	var loc string
	c.run("signed out", chromedp.Navigate(r.url+"/tokens"), chromedp.WaitVisible("#name", chromedp.ByID), chromedp.Location(&loc))
	if !strings.Contains(loc, "/signin?next=") {
		t.Fatalf("signed out /tokens landed on %s", loc)
	}
	c.run("sign in", chromedp.SendKeys("#name", "alice", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.follow("submit sign-in", chromedp.Submit("#password", chromedp.ByID), "#token-name")

	// Another site's page posts a form to the portal as the signed-in alice.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s/tokens"><input name=name value=stolen></form>
<script>document.getElementById("f").submit()</script>`, r.url)
	}))
	defer attacker.Close()
	c.run("cross-site post", chromedp.Navigate(attacker.URL), chromedp.WaitVisible("body", chromedp.ByQuery))
	var body string
	c.run("after the post", chromedp.WaitVisible("main .error", chromedp.ByQuery), chromedp.Text("main", &body, chromedp.ByQuery))
	if !strings.Contains(body, "another site") {
		t.Errorf("the refused post shows: %s", body)
	}
	toks, err := r.as("alice").Tokens(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks.Items {
		if tk.Name == "stolen" {
			t.Fatalf("a cross-site post created a token; the page said: %s", body)
		}
	}
}
