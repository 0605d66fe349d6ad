package portal_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// spendFleet is acme's Fast AES at USD 2.00 a load, alice subscribed,
// node n1 approved; it returns the listing's digest and the node.
func spendFleet(r *rig) (digest, nodeAcct, nodeID string) {
	r.t.Helper()
	for name, role := range map[string]auth.Role{"acme": auth.RoleISV, "alice": auth.RoleTenant, "bob": auth.RoleTenant,
		"root": auth.RoleAdmin} {
		r.user(name, role)
	}
	aes := r.listing("acme", "Fast AES", "AES at line rate.", true)
	r.api("acme", http.MethodPatch, "/listings/"+aes, map[string]any{"price_per_load_micros": 2_000_000, "price_per_hour_micros": 0}, nil)
	digest = r.version("acme", aes, "acme/fast-aes", "1.0.0")
	r.api("alice", http.MethodPost, "/listings/"+aes+"/subscribe", nil, nil)
	nodeAcct, nodeID = r.node("n1")
	return digest, nodeAcct, nodeID
}

// TestSpendLimitForm: the form's refusals on their fields, in the form's
// units, and a save redirected to /my (POST, redirect, GET), where the
// month's spend shows against the limit; another tenant sees none of it.
func TestSpendLimitForm(t *testing.T) {
	r := newRig(t)
	digest, nodeAcct, nodeID := spendFleet(r)
	r.load("alice", nodeAcct, nodeID, "acme/fast-aes", digest, 0, 0)
	alice := r.browser()
	alice.signIn("alice")
	_, page := alice.get("/my/spend-limit")
	if m := has(page, "<title>Spend limit", `name="alert"`, `name="limit"`, `value="USD"`, "USD 2.00"); len(m) > 0 {
		t.Fatalf("the form lacks %q:\n%s", m, page)
	}
	for _, c := range []struct {
		form        url.Values
		status      int
		field, want string
	}{
		{url.Values{"currency": {"USD"}, "alert": {"5"}, "limit": {"4"}}, 422, "alert", "Alert at: is above the hard limit: the alert comes first"},
		{url.Values{"currency": {"USD"}, "limit": {"four"}}, 422, "limit", "Hard limit: want an amount such as 1.50"},
		{url.Values{"currency": {"USD"}, "limit": {"-1"}}, 422, "limit", "Hard limit: must not be negative"},
		{url.Values{"currency": {"USD"}, "limit": {"2000000000"}}, 422, "limit", "Hard limit: at most 1000000000.00"},
		{url.Values{"currency": {"US"}, "limit": {"1"}}, 422, "currency", "Currency: want an ISO 4217 code"},
	} {
		c.form.Set("csrf", csrf(t, page))
		resp, got := alice.do(http.MethodPost, "/my/spend-limit", c.form, nil)
		if resp.StatusCode != c.status || !strings.Contains(got, c.want) || !strings.Contains(got, `name="`+c.field+`"`) ||
			!strings.Contains(got, `aria-invalid="true"`) {
			t.Errorf("%v: %d, want %d and %q on %s:\n%s", c.form, resp.StatusCode, c.status, c.want, c.field, got)
		}
		if resp.StatusCode == 422 && !strings.Contains(got, `value="`+c.form.Get(c.field)+`"`) {
			t.Errorf("%v: the typed %s is gone", c.form, c.field)
		}
	}
	resp, _ := alice.do(http.MethodPost, "/my/spend-limit", url.Values{"csrf": {csrf(t, page)}, "currency": {"usd"},
		"alert": {"3"}, "limit": {"10.5"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/my" {
		t.Fatalf("save: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = alice.get("/my")
	if m := has(page, "Spend limit saved.", "Spent this month", "USD 2.00", "USD 3.00", "USD 10.50", ">ok<"); len(m) > 0 {
		t.Fatalf("/my lacks %q:\n%s", m, page)
	}
	if _, page = alice.get("/my/spend-limit"); !strings.Contains(page, `value="10.50"`) || !strings.Contains(page, `value="3.00"`) {
		t.Errorf("the form does not show the saved limits:\n%s", page)
	}
	bob := r.browser()
	bob.signIn("bob")
	if _, page := bob.get("/my"); strings.Contains(page, "USD 10.50") || !strings.Contains(page, "Nothing spent this month") {
		t.Errorf("bob's /my shows alice's limit:\n%s", page)
	}
}

// TestBrowserSpendLimit: alice sets a spend limit in the portal (a refusal
// on its field first), loads past it, and a new load's grant is refused
// with the registry's clear error; /my says the limit is reached and the
// alert is among her notifications.
func TestBrowserSpendLimit(t *testing.T) {
	r := newRig(t)
	digest, nodeAcct, nodeID := spendFleet(r)
	c := newChrome(t)
	signInChrome(c, r.url, "alice")
	c.run("spend limit form", chromedp.Navigate(r.url+"/my/spend-limit"), chromedp.WaitVisible("#s-limit", chromedp.ByID))
	c.run("alert above the limit", chromedp.SendKeys("#s-alert", "5", chromedp.ByID), chromedp.SendKeys("#s-limit", "4", chromedp.ByID))
	c.follow("submit", chromedp.Submit("#s-limit", chromedp.ByID), "#s-alert-err")
	c.refused(http.StatusUnprocessableEntity)
	if got := c.text("#s-alert-err"); !strings.Contains(got, "above the hard limit") {
		t.Fatalf("the alert's refusal: %q", got)
	}
	c.shot("47-spend-limit-refused")
	c.clean("spend limit refused")
	c.run("alert below", chromedp.SetValue("#s-alert", "3", chromedp.ByID))
	c.follow("save", chromedp.Submit("#s-limit", chromedp.ByID), ".flash")
	if got := c.text("main"); !strings.Contains(got, "Spend limit saved.") || !strings.Contains(got, "USD 4.00") {
		t.Fatalf("/my after saving: %q", got)
	}
	c.clean("spend limit saved")

	// Two loads at USD 2.00 reach the limit; the usage report that
	// crosses USD 3.00 writes the month's alert.
	r.load("alice", nodeAcct, nodeID, "acme/fast-aes", digest, 0, 0)
	r.load("alice", nodeAcct, nodeID, "acme/fast-aes", digest, 1, 0)
	_, err := r.as("alice").LoadGrant(context.Background(), registryapi.GrantRequest{NodeID: nodeID, Repository: "acme/fast-aes", Digest: digest})
	var re *registryclient.Error
	if !errors.Is(err, registryclient.ErrSpendLimit) || !errors.As(err, &re) || re.Status != http.StatusPaymentRequired ||
		re.Code != registryapi.CodeSpendLimit || !strings.Contains(re.Message, "alice has spent 4.000000 USD of its spend limit of 4.000000 USD") {
		t.Fatalf("a load past the limit: %v", err)
	}

	c.follow("my accelerators", chromedp.Navigate(r.url+"/my"), ".limit-reached")
	if got := c.text("table.spend"); !strings.Contains(got, "USD 4.00") || !strings.Contains(got, "limit reached: new loads are refused") {
		t.Fatalf("/my at the limit: %q", got)
	}
	c.shot("48-spend-limit-reached")
	c.follow("notifications", chromedp.Click(`a[href="/notifications"]`, chromedp.ByQuery), "main")
	if got := c.text("main"); !strings.Contains(got, "reached USD 4.00, past your alert at USD 3.00") ||
		!strings.Contains(got, "At your hard limit of USD 4.00 new loads and attachments are refused.") {
		t.Fatalf("notifications: %q", got)
	}
	c.shot("49-spend-notification")
	c.clean("notifications")
}

// TestListingTrialField: the listing editor sets the free trial in whole
// hours; anything else is refused on the field, as typed.
func TestListingTrialField(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Fast AES", "AES at line rate.", false)
	b := r.browser()
	b.signIn("acme")
	save := func(trial string) (*http.Response, string) {
		t.Helper()
		_, page := b.get("/isv/listings/" + id)
		return b.do(http.MethodPost, "/isv/listings/"+id, url.Values{"csrf": {csrf(t, page)}, "name": {"Fast AES"},
			"currency": {"USD"}, "price_per_hour": {"1.50"}, "visibility": {"public"}, "trial_hours": {trial}}, nil)
	}
	for _, bad := range []string{"1.5", "-1", "10001", "x"} {
		resp, page := save(bad)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "Free trial: want whole hours, 0 to 10000") ||
			!strings.Contains(page, `value="`+bad+`"`) {
			t.Errorf("trial %q: %d\n%s", bad, resp.StatusCode, errorOf(page))
		}
	}
	if resp, page := save("12"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d %s", resp.StatusCode, errorOf(page))
	}
	l, err := r.as("acme").Listing(context.Background(), id)
	if err != nil || l.TrialHours != 12 {
		t.Fatalf("after saving a trial of 12 hours: %+v %v", l, err)
	}
	if _, page := b.get("/isv/listings/" + id); !strings.Contains(page, `name="trial_hours" type="number" min="0" max="10000" step="1" inputmode="numeric" value="12"`) {
		t.Errorf("the editor does not show the trial:\n%s", page)
	}
}
