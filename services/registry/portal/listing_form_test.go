package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// input returns the opening tag of the element of page with id.
func input(t *testing.T, page, id string) string {
	t.Helper()
	tag := regexp.MustCompile(`<(?:input|textarea|select) id="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(page)
	if tag == "" {
		t.Fatalf("no element #%s in the page", id)
	}
	return tag
}

// flagged fails unless the page marks element id as the refused field,
// with msg beside it, and no other.
func flagged(t *testing.T, what, page, id, msg string) {
	t.Helper()
	if tag := input(t, page, id); !strings.Contains(tag, `aria-invalid="true"`) || !strings.Contains(tag, "autofocus") ||
		!strings.Contains(tag, id+"-err") {
		t.Errorf("%s: #%s is not marked: %s", what, id, tag)
	}
	beside := regexp.MustCompile(`<span id="` + regexp.QuoteMeta(id) + `-err" class="field-error">([^<]*)</span>`).FindStringSubmatch(page)
	if beside == nil || !strings.Contains(beside[1], msg) {
		t.Errorf("%s: beside #%s: %q, want %q", what, id, beside, msg)
	}
	if n := strings.Count(page, `aria-invalid="true"`); n != 1 {
		t.Errorf("%s: %d fields marked, want 1", what, n)
	}
}

// TestListingFormFields: the editor takes prices as decimal amounts in
// number inputs, converted exactly; the namespace is fixed text before the
// repository's name; and a refused field is marked, with its message
// beside it and the focus on it.
func TestListingFormFields(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	b := r.browser()
	b.signIn("acme")
	_, page := b.get("/isv/listings/new")
	if !strings.Contains(page, `<span class="prefix">acme/</span>`) || strings.Contains(input(t, page, "l-repo"), `value="acme/`) {
		t.Fatalf("new listing: want acme/ as fixed text and an empty repository field: %s", input(t, page, "l-repo"))
	}
	for _, id := range []string{"l-pph", "l-ppl", "l-ppa"} {
		if tag := input(t, page, id); !strings.Contains(tag, `type="number"`) || !strings.Contains(tag, `min="0"`) || !strings.Contains(tag, `max="1000000"`) || !strings.Contains(tag, `step="0.000001"`) {
			t.Errorf("#%s is not a number input from 0 in micro-units: %s", id, tag)
		}
	}
	tok := csrf(t, page)
	form := func(repo, pph, ppl string) url.Values {
		return url.Values{"csrf": {tok}, "name": {"Edge FFT"}, "repository": {repo}, "currency": {"USD"},
			"price_per_hour": {pph}, "price_per_load": {ppl}, "visibility": {"public"}}
	}
	for name, c := range map[string]struct {
		form    url.Values
		id, msg string
	}{
		"negative price":     {form("edge-fft", "-1", ""), "l-pph", "must not be negative"},
		"price too high":     {form("edge-fft", "1", "1000000.000001"), "l-ppl", "at most 1000000.00"},
		"not an amount":      {form("edge-fft", "1.5", "1.2345678"), "l-ppl", "at most 6 decimals"},
		"namespace again":    {form("acme/edge-fft", "1", ""), "l-repo", "acme/ is there already"},
		"leading slash":      {form("/edge-fft", "1", ""), "l-repo", "without a leading /"},
		"api refuses a name": {form("edge-fftacme/", "1", ""), "l-repo", "under your namespace"},
	} {
		resp, page := b.do(http.MethodPost, "/isv/listings", c.form, nil)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", name, resp.StatusCode)
			continue
		}
		flagged(t, name, page, c.id, c.msg)
		if got := input(t, page, "l-repo"); !strings.Contains(got, `value="`+c.form.Get("repository")+`"`) {
			t.Errorf("%s: the repository field does not keep what was typed: %s", name, got)
		}
	}
	ls, err := r.as("acme").Listings(t.Context(), nil)
	if err != nil || len(ls.Items) != 0 {
		t.Fatalf("refused forms created listings: %+v %v", ls.Items, err)
	}

	resp, _ := b.do(http.MethodPost, "/isv/listings", form("edge-fft", "999999.999999", "0.000001"), nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	ls, err = r.as("acme").Listings(t.Context(), nil)
	if err != nil || len(ls.Items) != 1 {
		t.Fatalf("listings: %+v %v", ls.Items, err)
	}
	l := ls.Items[0]
	if l.Repository != "acme/edge-fft" || l.PricePerHourMicros != 999_999_999_999 || l.PricePerLoadMicros != 1 {
		t.Fatalf("created %s at %d/hour, %d/load; want acme/edge-fft at 999999999999 and 1", l.Repository, l.PricePerHourMicros, l.PricePerLoadMicros)
	}

	// The editor of a listing shows its repository fixed, and flags its fields alike.
	_, page = b.get(resp.Header.Get("Location"))
	if !strings.Contains(page, `<code id="l-repo">acme/edge-fft</code>`) {
		t.Errorf("editor: the repository is not shown as fixed text")
	}
	edit := form("", "2.40", "-0.5")
	edit.Del("repository")
	resp, page = b.do(http.MethodPost, "/isv/listings/"+l.ID, edit, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("save with a negative price per load: %d, want 422", resp.StatusCode)
	}
	flagged(t, "save", page, "l-ppl", "must not be negative")
	if !strings.Contains(errorOf(page), "Price per load: must not be negative") {
		t.Errorf("save: the alert says %q", errorOf(page))
	}
}

// TestFieldRefusalsOnOtherForms: the tokens, keys, tag rule, offer and
// version forms mark the field a refusal names too, keeping what was
// typed.
func TestFieldRefusalsOnOtherForms(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Edge FFT", "an FFT", false)
	b := r.browser()
	b.signIn("acme")
	_, page := b.get("/tokens")
	tok := csrf(t, page)
	long := strings.Repeat("n", 200)
	for _, c := range []struct {
		what, path string
		form       url.Values
		id, msg    string
		kept       string
	}{
		{"token days", "/tokens", url.Values{"name": {"ci"}, "days": {"0"}}, "token-days", "whole number of days", `value="ci"`},
		{"token name", "/tokens", url.Values{"name": {long}}, "token-name", "at most 128 bytes", `value="` + long + `"`},
		{"key", "/isv/keys", url.Values{"pem": {"not a key"}}, "pem", "want one PEM PUBLIC KEY block", ">not a key</textarea>"},
		{"tag rule", "/isv/listings/" + id + "/tag-rules", url.Values{"pattern": {"v 1"}}, "r-pattern", "neither a tag character", `value="v 1"`},
		{"version", "/isv/listings/" + id + "/versions", url.Values{"version": {"1.0.0"}, "digest": {"sha256:nope"}}, "v-digest", "want sha256:", `value="sha256:nope"`},
	} {
		c.form.Set("csrf", tok)
		resp, page := b.do(http.MethodPost, c.path, c.form, nil)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", c.what, resp.StatusCode, errorOf(page))
			continue
		}
		flagged(t, c.what, page, c.id, c.msg)
		if !strings.Contains(page, c.kept) {
			t.Errorf("%s: what was typed is lost", c.what)
		}
		if c.id == "v-digest" && !strings.Contains(page, "<details open>") {
			t.Errorf("%s: the form with the refused field is folded away", c.what)
		}
	}
}
