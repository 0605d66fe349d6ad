package portal_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// signInChrome signs c in as name from the sign-in page.
func signInChrome(c *chrome, base, name string) {
	c.t.Helper()
	c.run("sign in as "+name, chromedp.Navigate(base+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", name, chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.follow("submit sign-in as "+name, chromedp.Submit("#password", chromedp.ByID), "form[action='/signout']")
}

func TestBrowserTenantAccelerators(t *testing.T) {
	r := newRig(t)
	newFleet(r)
	c := newChrome(t)
	signInChrome(c, r.url, "alice")
	c.run("my accelerators", chromedp.Navigate(r.url+"/my"), chromedp.WaitVisible("#loads-h", chromedp.ByID))
	if got := c.text("main"); !strings.Contains(got, "Fast AES") || !strings.Contains(got, "n1") || !strings.Contains(got, "USD 3.00") {
		t.Fatalf("/my: %q", got)
	}
	c.shot("40-my-accelerators")
	c.clean("my accelerators")
	c.follow("unsubscribe", chromedp.Click(`a[href$="/end"]`, chromedp.ByQuery), ".confirm")
	c.shot("41-unsubscribe-confirm")
	c.follow("confirm", chromedp.Click(`.confirm button`, chromedp.ByQuery), ".flash")
	if got := c.text(".flash"); !strings.Contains(got, "Subscription ended") {
		t.Fatalf("after unsubscribing: %q", got)
	}
	c.clean("unsubscribe")
}

func TestBrowserOperator(t *testing.T) {
	r := newRig(t)
	newFleet(r)
	c := newChrome(t)
	signInChrome(c, r.url, "root")
	c.run("operations", chromedp.Navigate(r.url+"/admin"), chromedp.WaitVisible(".slots", chromedp.ByQuery))
	var cells int
	c.run("count slots", chromedp.Evaluate(`document.querySelectorAll(".slot").length`, &cells))
	if cells != 4 {
		t.Fatalf("%d slot cells, want n1's 4", cells)
	}
	c.shot("50-admin-nodes")
	c.clean("nodes")
	c.follow("accounts", chromedp.Click(`.tabs a[href="/admin/accounts"]`, chromedp.ByQuery), "#acct-name")
	c.run("new account", chromedp.SendKeys("#acct-name", "carol", chromedp.ByID), chromedp.SetValue("#acct-role", "isv", chromedp.ByID))
	c.follow("create account", chromedp.Submit("#acct-name", chromedp.ByID), ".flash")
	if got := c.text("main table"); !strings.Contains(got, "carol") {
		t.Fatalf("accounts after creating carol: %q", got)
	}
	c.shot("51-admin-accounts")
	c.clean("accounts")
	c.follow("validation", chromedp.Click(`.tabs a[href="/admin/validation"]`, chromedp.ByQuery), "#vstate")
	c.shot("52-admin-validation")
	c.clean("validation")
	c.follow("audit", chromedp.Click(`.tabs a[href="/admin/audit"]`, chromedp.ByQuery), "#f-action")
	c.run("audit filter", chromedp.SendKeys("#f-action", "account.create", chromedp.ByID))
	c.follow("filter audit", chromedp.Submit("#f-action", chromedp.ByID), "table.audit")
	if got := c.text("table.audit tbody"); !strings.Contains(got, "account.create") || strings.Contains(got, "listing.create") {
		t.Fatalf("audit filtered: %q", got)
	}
	c.shot("53-admin-audit")
	c.clean("audit")

	// The ISV's subscribers and usage, and its audit.
	c2 := newChrome(t)
	signInChrome(c2, r.url, "acme")
	c2.run("isv usage", chromedp.Navigate(r.url+"/isv/usage"), chromedp.WaitVisible("svg.bars", chromedp.ByQuery))
	var bars int
	c2.run("count bars", chromedp.Evaluate(`document.querySelectorAll("svg.bars rect.bar").length`, &bars))
	if bars != 30 {
		t.Fatalf("%d bars, want one a day of 30", bars)
	}
	c2.shot("60-isv-usage")
	c2.clean("isv usage")
	c2.run("isv audit", chromedp.Navigate(r.url+"/isv/audit"), chromedp.WaitVisible("table.audit", chromedp.ByQuery))
	c2.shot("61-isv-audit")
	c2.clean("isv audit")
}
