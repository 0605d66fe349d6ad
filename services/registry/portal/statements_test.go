package portal_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestStatementPages: a tenant's printable invoice and an ISV's revenue
// statement of a month, before and after the month is closed, their CSV,
// and nobody else's.
func TestStatementPages(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	// Two months back: none of the fleet's usage of today reaches it.
	y, m, _ := time.Now().UTC().Date()
	month := time.Date(y, m-2, 1, 0, 0, 0, 0, time.UTC)
	name := month.Format("2006-01")
	var g, me struct{ ID string }
	r.api("alice", http.MethodPost, "/load-grants", map[string]string{"node_id": f.n1, "repository": "acme/fast-aes", "digest": f.aesDigest}, &g)
	r.api("alice", http.MethodGet, "/me", nil, &me)
	end := month.AddDate(0, 0, 10)
	report := map[string]any{"node_id": f.n1, "records": []map[string]any{
		{"report_id": "old-load", "tenant_id": me.ID, "grant_id": g.ID, "event": "load", "started_at": end.Add(-2 * time.Hour)},
		{"report_id": "old-busy", "tenant_id": me.ID, "grant_id": g.ID, "event": "busy", "busy_ns": 2 * time.Hour.Nanoseconds(), "ended_at": end},
	}}
	r.api(f.n1Acct, http.MethodPost, "/usage", report, nil)

	alice := r.browser()
	alice.signIn("alice")
	resp, page := alice.get("/my/invoices?month=" + name)
	if miss := has(page, "Fast AES", "1.0.0", "hours busy", "<td class=\"num\">2.00</td>", "USD 3.00", "Preview", "no-print", `href="/my/invoices.csv?month=`+name+`"`); resp.StatusCode != http.StatusOK || len(miss) > 0 {
		t.Fatalf("alice's invoice of %s: %d, lacks %q:\n%s", name, resp.StatusCode, miss, page)
	}
	if _, err := r.as("root").CloseMonth(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if _, page = alice.get("/my/invoices?month=" + name); !strings.Contains(page, "Closed ") || strings.Contains(page, "Preview") {
		t.Fatalf("alice's invoice of closed %s:\n%s", name, page)
	}
	resp, body := alice.get("/my/invoices.csv?month=" + name)
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || resp.StatusCode != http.StatusOK || len(rows) != 4 || strings.Join(rows[3], ",") != name+",alice,USD,,,,,total,,3000000" {
		t.Fatalf("alice's CSV: %d %q %v", resp.StatusCode, body, err)
	}

	// The node sends its report again: it is billed once, so the next
	// month's close adds no adjustment for it.
	r.api(f.n1Acct, http.MethodPost, "/usage", report, nil)
	next := month.AddDate(0, 1, 0).Format("2006-01")
	if _, err := r.as("root").CloseMonth(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	invs, err := r.as("alice").Invoices(context.Background(), url.Values{"month": {next}})
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		for _, l := range inv.Lines {
			if l.ForMonth == name {
				t.Errorf("a resent report was billed again in %s: %+v", next, l)
			}
		}
	}

	acme := r.browser()
	acme.signIn("acme")
	_, page = acme.get("/isv/statements?month=" + name)
	if miss := has(page, "Revenue statement · acme", "Gross", "USD 3.00", "Platform fee (20%)", "USD −0.60", "Net", "USD 2.40"); len(miss) > 0 {
		t.Fatalf("acme's statement lacks %q:\n%s", miss, page)
	}
	globex := r.browser()
	globex.signIn("globex")
	if _, page = globex.get("/isv/statements?month=" + name); strings.Contains(page, "Fast AES") || !strings.Contains(page, "Nothing billed") {
		t.Fatalf("globex's statements show acme's:\n%s", page)
	}
	if resp, page = alice.get("/my/invoices?month=last"); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "month: want") {
		t.Fatalf("bad month: %d", resp.StatusCode)
	}
}

// TestListingEditorPrices: the listing editor sets the price per attached
// hour too; a save that changes a price adds it to the listing's history,
// effective now, and one that changes none adds nothing.
func TestListingEditorPrices(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Fast AES", "AES at line rate.", false)
	b := r.browser()
	b.signIn("acme")
	save := func(attached string) {
		t.Helper()
		_, page := b.get("/isv/listings/" + id)
		if !strings.Contains(page, `name="price_per_attached_hour"`) {
			t.Fatalf("the editor has no price per attached hour:\n%s", page)
		}
		resp, page := b.do(http.MethodPost, "/isv/listings/"+id, url.Values{"csrf": {csrf(t, page)}, "name": {"Fast AES"},
			"repository": {"acme/fast-aes"}, "currency": {"USD"}, "price_per_hour": {"1.50"}, "price_per_load": {"0"},
			"price_per_attached_hour": {attached}, "visibility": {"public"}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("save: %d %s", resp.StatusCode, errorOf(page))
		}
	}
	save("2.25")
	save("2.25")
	ps, err := r.as("acme").Prices(context.Background(), id)
	if err != nil || len(ps) != 2 || ps[1].PerAttachedHourMicros != 2_250_000 || ps[1].PerHourMicros != 1_500_000 || ps[0].PerAttachedHourMicros != 0 {
		t.Fatalf("prices after two saves: %+v, %v", ps, err)
	}
}
