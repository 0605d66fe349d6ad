package api_test

import (
	"context"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// catalogRig publishes listings of three vendors, acme among them, and one
// unpublished listing that must never be found by anyone else.
type catalogRig struct {
	*env
	conv, scaler, hash, odd, secret string // listing ids
}

func newCatalogRig(t *testing.T) catalogRig {
	e := newEnv(t)
	e.addUser("acme", "isv")
	r := catalogRig{env: e}
	add := func(who, name, summary, category, board string, hour int64, publish bool) string {
		var l registryapi.Listing
		e.must(201, who, "POST", "/listings", item{"name": name, "summary": summary, "category": category,
			"board_model": board, "price_per_hour_micros": hour, "visibility": "public",
			"repository": who + "/" + strings.ReplaceAll(strings.ToLower(name), " ", "-")}).decode(t, &l)
		if publish {
			e.must(200, who, "POST", "/listings/"+l.ID+"/publish", nil)
		}
		return l.ID
	}
	r.conv = add("acme", "Conv2D", "fast convolution", " ML ", "u250", 2_000_000, true)
	r.scaler = add("acme", "Scaler", "video scaler", "Video", "u280", 0, true)
	r.hash = add("isv1", "Hash", "sha256 at line rate for acme-grade workloads", "crypto", "u250", 500_000, true)
	r.odd = add("isv2", "Oddity", "something else", "", "u250", 50_000_000, true)
	r.secret = add("isv2", "Acme secret", "not yet", "ml", "u250", 0, false)
	return r
}

func (r catalogRig) search(who string, q url.Values) registryapi.Catalog {
	r.t.Helper()
	var c registryapi.Catalog
	r.must(200, who, "GET", "/catalog?"+q.Encode(), nil).decode(r.t, &c)
	return c
}

func ids(c registryapi.Catalog) []string {
	var out []string
	for _, it := range c.Items {
		out = append(out, it.ID)
	}
	return out
}

// TestCatalogSearchFindsVendors: a vendor's name finds its listings, above
// listings that only mention it, and never what the caller may not see.
func TestCatalogSearchFindsVendors(t *testing.T) {
	r := newCatalogRig(t)
	c := r.search("", url.Values{"q": {"ACME"}})
	got := ids(c)
	if c.Total != 3 || len(got) != 3 || !slices.Contains(got[:2], r.conv) || !slices.Contains(got[:2], r.scaler) || got[2] != r.hash {
		t.Fatalf("q=ACME: total %d, %v; want conv and scaler (vendor) before hash (summary)", c.Total, got)
	}
	if c.Sort != "relevance" {
		t.Fatalf("sort %q, want relevance by default with q", c.Sort)
	}
	if got := ids(r.search("", url.Values{"q": {"acme conv"}})); !slices.Equal(got, []string{r.conv}) {
		t.Fatalf("q=acme conv: %v, want conv alone (every word must match)", got)
	}
	if got := ids(r.search("isv2", url.Values{"q": {"secret"}})); !slices.Equal(got, []string{r.secret}) {
		t.Fatalf("owner's own unpublished listing: %v", got)
	}
	if c := r.search("tenant1", url.Values{"q": {"secret"}}); c.Total != 0 || len(c.Items) != 0 {
		t.Fatalf("another's unpublished listing found: %+v", c)
	}
	if got := ids(r.search("", url.Values{"q": {"100%"}})); len(got) != 0 {
		t.Fatalf("q=100%%: %v; LIKE wildcards must match themselves", got)
	}
}

// TestCatalogCategories: categories are a fixed list matched ignoring case
// and space, none given is "other", and a listing's category must be one
// of the list: the API refuses another, and so does the database.
func TestCatalogCategories(t *testing.T) {
	r := newCatalogRig(t)
	for _, cat := range []string{"ml", "ML", " Ml"} {
		c := r.search("", url.Values{"category": {cat}})
		if !slices.Equal(ids(c), []string{r.conv}) || c.Items[0].Category != "ml" {
			t.Fatalf("category=%q: %+v", cat, c.Items)
		}
	}
	if got := ids(r.search("", url.Values{"category": {"other"}})); !slices.Equal(got, []string{r.odd}) {
		t.Fatalf("category=other: %v, want the listing created without a category", got)
	}
	got := ids(r.search("", url.Values{"category": {"ml", "video"}, "sort": {"newest"}}))
	if !slices.Equal(got, []string{r.scaler, r.conv}) {
		t.Fatalf("category=ml&category=video: %v", got)
	}
	r.must(422, "", "GET", "/catalog?category=weird", nil)

	var list struct{ Items []registryapi.Listing }
	r.must(200, "", "GET", "/listings?category=Ml", nil).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != r.conv {
		t.Fatalf("GET /listings?category=Ml: %+v", list.Items)
	}
	r.must(422, "isv1", "PATCH", "/listings/"+r.hash, item{"category": "weird stuff"})
	var l registryapi.Listing
	r.must(200, "isv1", "PATCH", "/listings/"+r.hash, item{"category": " Video "}).decode(t, &l)
	if l.Category != "video" {
		t.Fatalf("category written as %q, want video", l.Category)
	}
	if _, err := r.pool.Exec(context.Background(), `update listings set category = 'Video' where id = $1::uuid`, r.hash); err == nil {
		t.Fatal("the database took a category off the list")
	}
	// The database's list is registryapi.Categories.
	var def string
	if err := r.pool.QueryRow(context.Background(),
		`select pg_get_constraintdef(oid) from pg_constraint where conname = 'listings_category'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	var inDB []string
	for _, m := range regexp.MustCompile(`'([a-z]+)'`).FindAllStringSubmatch(def, -1) {
		inDB = append(inDB, m[1])
	}
	if !slices.Equal(inDB, registryapi.Categories) {
		t.Fatalf("the database's categories %v (%s), registryapi.Categories %v", inDB, def, registryapi.Categories)
	}
}

// TestCatalogFacetCounts: every facet value's count is the number of
// listings SQL counts with the other facets' filters.
func TestCatalogFacetCounts(t *testing.T) {
	r := newCatalogRig(t)
	c := r.search("", url.Values{"board": {"u250"}, "price": {"free", "under-1", "1-10", "10-100"}})
	count := func(where string, args ...any) int {
		var n int
		if err := r.pool.QueryRow(context.Background(), `select count(*) from listings l
			join listing_prices p on p.listing_id = l.id
			where l.published and l.visibility = 'public' and `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const priced = `p.per_hour_micros < 100000000`
	if want := count(`l.board_model = 'u250' and ` + priced); c.Total != want || want != 3 {
		t.Fatalf("total %d, SQL %d (want 3)", c.Total, want)
	}
	for _, f := range c.Facets.Category {
		if want := count(`l.board_model = 'u250' and `+priced+` and l.category = $1`, f.Value); f.Count != want {
			t.Errorf("category %s: %d, SQL %d", f.Value, f.Count, want)
		}
	}
	for _, f := range c.Facets.Board {
		if want := count(`l.board_model = $1 and `+priced, f.Value); f.Count != want || f.Selected != (f.Value == "u250") {
			t.Errorf("board %+v, SQL %d", f, want)
		}
	}
	if len(c.Facets.Board) != 2 {
		t.Errorf("boards %+v, want u250 and u280 (counted without the board filter)", c.Facets.Board)
	}
	bands := map[string]int{}
	for _, f := range c.Facets.Price {
		bands[f.Value] = f.Count
	}
	// Free stays listed, being chosen, though u250's free listing is unpublished.
	if want := map[string]int{"free": 0, "under-1": 1, "1-10": 1, "10-100": 1}; !maps.Equal(bands, want) {
		t.Errorf("price facet %v, want %v", bands, want)
	}
}

// TestCatalogSorts: popular counts loads of the last 30 days only.
func TestCatalogSorts(t *testing.T) {
	r := newCatalogRig(t)
	now := time.Now()
	for range 3 {
		r.usage(t, r.hash, "load", now, time.Time{}, 0)
	}
	r.usage(t, r.scaler, "load", now, time.Time{}, 0)
	for range 5 {
		r.usage(t, r.odd, "load", now, time.Time{}, 0)
	}
	if _, err := r.pool.Exec(context.Background(), `update usage_records set recorded_at = now() - interval '31 days'
		where listing_id = $1::uuid`, r.odd); err != nil {
		t.Fatal(err)
	}
	// Loads show in the catalog within catalogMaxAge, a listing's change at once.
	r.must(200, "isv1", "PATCH", "/listings/"+r.hash, item{"description": "loaded"})
	for sort, want := range map[string][]string{
		"popular": {r.hash, r.scaler, r.odd, r.conv}, // then newest first
		"newest":  {r.odd, r.hash, r.scaler, r.conv},
		"price":   {r.scaler, r.hash, r.conv, r.odd},
	} {
		c := r.search("", url.Values{"sort": {sort}})
		if !slices.Equal(ids(c), want) {
			t.Errorf("sort=%s: %v, want %v", sort, ids(c), want)
		}
		if sort == "popular" && (c.Items[0].Loads30d != 3 || c.Items[2].Loads30d != 0) {
			t.Errorf("loads: %+v", c.Items)
		}
	}
	r.must(422, "", "GET", "/catalog?sort=cheapest", nil)
}

// TestCatalogPages: offset pages cover the results once each; the bounds
// of registryapi.Catalog hold.
func TestCatalogPages(t *testing.T) {
	r := newCatalogRig(t)
	var seen []string
	for off := 0; off < 6; off += 2 {
		c := r.search("", url.Values{"sort": {"price"}, "limit": {"2"}, "offset": {strconv.Itoa(off)}})
		if c.Total != 4 || c.Offset != off || c.Limit != 2 {
			t.Fatalf("page at %d: %+v", off, c)
		}
		seen = append(seen, ids(c)...)
	}
	if all := ids(r.search("", url.Values{"sort": {"price"}})); !slices.Equal(seen, all) {
		t.Fatalf("pages %v, one page %v", seen, all)
	}
	for _, q := range []string{"offset=1001", "offset=-1", "limit=0", "limit=1001", "q=" + strings.Repeat("a", 129),
		"q=" + url.QueryEscape(strings.Repeat("a ", 9)), "price=cheap", "board=" + strings.Repeat("b", 65)} {
		r.must(422, "", "GET", "/catalog?"+q, nil)
	}
}

// TestCatalogSnapshotHidesNothing: a listing withdrawn behind the
// snapshot's back (by another replica) leaves the page at once.
func TestCatalogSnapshotHidesNothing(t *testing.T) {
	r := newCatalogRig(t)
	if got := ids(r.search("", url.Values{"q": {"hash"}})); !slices.Equal(got, []string{r.hash}) {
		t.Fatalf("q=hash: %v", got)
	}
	if _, err := r.pool.Exec(context.Background(), `update listings set published = false where id = $1::uuid`, r.hash); err != nil {
		t.Fatal(err)
	}
	if got := ids(r.search("tenant1", url.Values{"q": {"hash"}})); len(got) != 0 {
		t.Fatalf("withdrawn listing still on the page: %v", got)
	}
}

// TestCatalogVerifiedPublisher: the badge goes to an ISV with a signing key
// and a validated version, to neither an ISV with a key alone nor one with
// a validated version but only a revoked key, and leaves with the key.
func TestCatalogVerifiedPublisher(t *testing.T) {
	r := newCatalogRig(t)
	validate := func(who, listing, repo string) {
		d := r.pushManifest(repo, "v1")
		r.must(201, who, "POST", "/listings/"+listing+"/versions", item{"version": "v1", "digest": d})
		if _, err := r.pool.Exec(context.Background(), `update validation_jobs set state = 'available' where manifest_digest = $1`, d); err != nil {
			t.Fatal(err)
		}
	}
	validate("acme", r.conv, "acme/conv2d")
	validate("isv2", r.odd, "isv2/oddity")
	var acmeKey, isv2Key registryapi.SigningKey
	r.must(201, "acme", "POST", "/keys", item{"public_key": ecKeyPEM(t)}).decode(t, &acmeKey)
	r.must(201, "isv1", "POST", "/keys", item{"public_key": ecKeyPEM(t)})
	r.must(201, "isv2", "POST", "/keys", item{"public_key": ecKeyPEM(t)}).decode(t, &isv2Key)
	r.must(200, "isv2", "POST", "/keys/"+isv2Key.ID+"/revoke", nil)

	verified := func() map[string]bool {
		out := map[string]bool{}
		for _, it := range r.search("", url.Values{}).Items {
			out[it.Owner] = it.VendorVerified
		}
		return out
	}
	if got, want := verified(), map[string]bool{"acme": true, "isv1": false, "isv2": false}; !maps.Equal(got, want) {
		t.Fatalf("verified %v, want %v", got, want)
	}
	r.must(200, "acme", "POST", "/keys/"+acmeKey.ID+"/revoke", nil)
	if verified()["acme"] {
		t.Fatal("acme still verified with its key revoked")
	}

	c := r.search("", url.Values{"owner": {"ACME"}, "sort": {"newest"}})
	if !slices.Equal(ids(c), []string{r.scaler, r.conv}) || c.Total != 2 {
		t.Fatalf("owner=ACME: %v", ids(c))
	}
}
