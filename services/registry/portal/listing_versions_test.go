package portal_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// validated waits for the registry's worker to end every validation (the
// rig's versions are no images, so it fails them) and then makes digest's
// available by hand, so that the worker cannot undo it.
func (r *rig) validated(digest string) {
	r.t.Helper()
	ctx := r.t.Context()
	deadline := time.Now().Add(time.Minute)
	for {
		var open int
		if err := r.srv.Pool().QueryRow(ctx, `select count(*) from validation_jobs where state not in ('available', 'failed')`).Scan(&open); err != nil {
			r.t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d validations still running", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := r.srv.Pool().Exec(ctx, `update validation_jobs set state = 'available', reasons = '[]' where manifest_digest = $1`, digest); err != nil {
		r.t.Fatal(err)
	}
}

// TestListingVersionsTable: the owner's listing page lists every version,
// newest first, with the day it was added, its short digest, its
// validation state and its loads of the last 30 days (older loads and
// other versions' not counted).
func TestListingVersionsTable(t *testing.T) {
	r := newRig(t)
	r.user("root", auth.RoleAdmin)
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	id := r.listing("acme", "Edge FFT", "Fast.", true)
	v1 := r.version("acme", id, "acme/edge-fft", "1.0.0")
	v2 := r.version("acme", id, "acme/edge-fft", "2.0.0")
	r.validated(v1)
	_, node := r.node("host1")
	for i, at := range []string{"now()", "now()", "now() - interval '31 days'"} {
		if _, err := r.srv.Pool().Exec(t.Context(), `insert into usage_records (node_id, tenant_id, listing_id, manifest_digest,
			event, report_id, recorded_at) select $1::uuid, id, $2::uuid, $3, 'load', $4, `+at+` from accounts where name = 'alice'`,
			node, id, v1, "r"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}

	b := r.browser()
	b.signIn("acme")
	_, page := b.get("/listings/" + id + "?tab=versions")
	rows := regexp.MustCompile(`(?s)<tr><td>([^<]+)</td><td>([^<]+)</td><td><code class="digest" title="([^"]+)">([^<]+)</code></td><td><span class="state [a-z]+">([a-z]+)</span></td><td class="num">(\d+)</td><td><a href="[^"]+">Read`).FindAllStringSubmatch(page, -1)
	if len(rows) != 2 {
		t.Fatalf("%d version rows, want 2:\n%s", len(rows), page)
	}
	today := time.Now().UTC().Format("2006-01-02")
	for i, want := range [][]string{{"2.0.0", v2, "failed", "0"}, {"1.0.0", v1, "available", "2"}} {
		row := rows[i]
		if row[1] != want[0] || !strings.HasPrefix(row[2], today) || row[3] != want[1] || row[4] != want[1][:19] ||
			row[5] != want[2] || row[6] != want[3] {
			t.Errorf("row %d: %q, want %v", i, row[1:], want)
		}
	}
}

// TestListingFormCategories: the listing form offers the catalog's
// categories, exactly, with the listing's chosen, and a new listing's
// "other".
func TestListingFormCategories(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Edge FFT", "Fast.", true)
	b := r.browser()
	b.signIn("acme")
	for _, c := range []struct{ path, category, want string }{
		{"/isv/listings/" + id, "ml", "ml"}, {"/isv/listings/" + id, "video", "video"}, {"/isv/listings/new", "", "other"},
	} {
		if c.category != "" {
			if _, err := r.srv.Pool().Exec(t.Context(), `update listings set category = $2 where id = $1::uuid`, id, c.category); err != nil {
				t.Fatal(err)
			}
		}
		_, page := b.get(c.path)
		sel := regexp.MustCompile(`(?s)<select id="l-cat".*?</select>`).FindString(page)
		selected := regexp.MustCompile(`<option value="([a-z]*)" selected>`).FindAllStringSubmatch(sel, -1)
		if len(selected) != 1 || selected[0][1] != c.want {
			t.Errorf("%s, category %q: selected %v, want %q", c.path, c.category, selected, c.want)
		}
		var values []string
		for _, m := range regexp.MustCompile(`<option value="([a-z]*)"`).FindAllStringSubmatch(sel, -1) {
			values = append(values, m[1])
		}
		if !slices.Equal(values, registryapi.Categories) {
			t.Errorf("%s: options %v, want registryapi.Categories", c.path, values)
		}
	}
}
