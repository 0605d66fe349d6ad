package api

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// catalogQuery is a search of the catalog, checked by the handler.
type catalogQuery struct {
	words                     []string // lower case
	owner                     string   // lower case; "": any
	categories, boards, bands []string
	sort                      string
	offset, limit             int
}

// found is a listing a search found, with its rank.
type found struct {
	*catalogDoc
	rank int
}

// catalog searches the snapshot of catalogIndex: every word found, as a
// substring ignoring case, in the vendor's name, the listing's name or its
// summary; substrings rather than full-text search because vendor and
// product names are what people type, often in part ("acme" for
// "acme-labs"), where neither stemming nor a dictionary helps.
func (s *store) catalog(ctx context.Context, p *principal, q catalogQuery) (registryapi.Catalog, error) {
	out := registryapi.Catalog{Items: []registryapi.CatalogItem{}, Offset: q.offset, Limit: q.limit, Sort: q.sort}
	snap, err := s.catalogIdx.get(ctx)
	if err != nil {
		return out, err
	}
	visible, err := s.catalogVisible(ctx, p)
	if err != nil {
		return out, err
	}
	counts := map[string]map[string]int{"category": {}, "board": {}, "price": {}}
	var hits []found
	for i := range snap.docs {
		d := &snap.docs[i]
		if !visible(d) || q.owner != "" && d.owner != q.owner {
			continue
		}
		rank, ok := relevance(d, q.words)
		if !ok {
			continue
		}
		fc, fb, fp := chosen(q.categories, d.category), chosen(q.boards, d.board), chosen(q.bands, d.band)
		if fb && fp {
			counts["category"][d.category]++
		}
		if fc && fp && d.board != "" {
			counts["board"][d.board]++
		}
		if fc && fb {
			counts["price"][d.band]++
		}
		if fc && fb && fp {
			hits = append(hits, found{d, rank})
		}
	}
	out.Total = len(hits)
	out.Facets = catalogFacets(counts, q)
	slices.SortFunc(hits, catalogOrders[q.sort])
	page := hits[min(q.offset, len(hits)):min(q.offset+q.limit, len(hits))]
	out.Items, err = s.catalogItems(ctx, p, page)
	return out, err
}

// catalogVisible is visibleTo of a snapshot's listings: the entitlements
// are read now, the rest is the snapshot's.
func (s *store) catalogVisible(ctx context.Context, p *principal) (func(*catalogDoc) bool, error) {
	me, admin := who(p)
	if admin {
		return func(*catalogDoc) bool { return true }, nil
	}
	entitled := map[string]bool{}
	if me != "" {
		rows, err := s.db.Query(ctx, `select listing_id::text from entitlements where account_id = $1::uuid
			and revoked_at is null and (expires_at is null or expires_at > now())`, me)
		if err != nil {
			return nil, fmt.Errorf("catalog: entitlements: %w", err)
		}
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { entitled[id] = true; return nil }); err != nil {
			return nil, fmt.Errorf("catalog: entitlements: %w", err)
		}
	}
	return func(d *catalogDoc) bool { return d.public || me != "" && d.ownerID == me || entitled[d.id] }, nil
}

// relevance reports whether d has every word and how well it matches:
// per word, a vendor named exactly so weighs above a listing whose name
// starts with it, above one whose name or vendor holds it, above one
// whose summary does.
func relevance(d *catalogDoc, words []string) (int, bool) {
	rank := 0
	for _, w := range words {
		inName, inOwner, inSummary := strings.Contains(d.name, w), strings.Contains(d.owner, w), strings.Contains(d.summary, w)
		if !inName && !inOwner && !inSummary {
			return 0, false
		}
		rank += b2i(d.owner == w)*4 + b2i(strings.HasPrefix(d.name, w))*3 + b2i(inName)*2 + b2i(inOwner)*2 + b2i(inSummary)
	}
	return rank, true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// chosen is a facet's filter: any of the values chosen, or all when none is.
func chosen(values []string, v string) bool { return len(values) == 0 || slices.Contains(values, v) }

// catalogOrders are the sorts; each ends in the id so that pages never
// overlap.
var catalogOrders = map[string]func(a, b found) int{
	"relevance": func(a, b found) int {
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(b.loads30d, a.loads30d), b.created.Compare(a.created), cmp.Compare(a.id, b.id))
	},
	"popular": func(a, b found) int {
		return cmp.Or(cmp.Compare(b.loads30d, a.loads30d), b.created.Compare(a.created), cmp.Compare(a.id, b.id))
	},
	"newest": func(a, b found) int { return cmp.Or(b.created.Compare(a.created), cmp.Compare(a.id, b.id)) },
	"price": func(a, b found) int {
		return cmp.Or(cmp.Compare(a.perHour, b.perHour), b.created.Compare(a.created), cmp.Compare(a.id, b.id))
	},
}

// catalogItems reads the page's listings fresh, in the page's order, and
// leaves out any the caller may no longer see.
func (s *store) catalogItems(ctx context.Context, p *principal, page []found) ([]registryapi.CatalogItem, error) {
	ids := make([]string, len(page))
	for i, f := range page {
		ids[i] = f.id
	}
	me, admin := who(p)
	rows, err := s.db.Query(ctx, `select `+listingCols+listingFrom+` where l.id = any($3::uuid[]) and `+visibleTo, me, admin, ids)
	if err != nil {
		return nil, fmt.Errorf("catalog: page: %w", err)
	}
	ls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Listing, error) { return scanListing(r) })
	if err != nil {
		return nil, fmt.Errorf("catalog: page: %w", err)
	}
	byID := map[string]registryapi.Listing{}
	for _, l := range ls {
		byID[l.ID] = l
	}
	verified, err := s.verifiedVendors(ctx, ls)
	if err != nil {
		return nil, err
	}
	out := []registryapi.CatalogItem{}
	for _, f := range page {
		if l, ok := byID[f.id]; ok {
			out = append(out, registryapi.CatalogItem{Listing: l, Loads30d: f.loads30d, VendorVerified: verified[l.OwnerID]})
		}
	}
	return out, nil
}

// verifiedVendors are the owners of ls that are verified publishers
// (registryapi.CatalogItem's VendorVerified), read fresh: a key revoked a
// moment ago takes the badge away.
func (s *store) verifiedVendors(ctx context.Context, ls []registryapi.Listing) (map[string]bool, error) {
	var owners []string
	for _, l := range ls {
		owners = append(owners, l.OwnerID)
	}
	rows, err := s.db.Query(ctx, `select distinct k.account_id::text from signing_keys k
		where k.account_id = any($1::uuid[]) and k.revoked_at is null
		and exists (select 1 from listings l join listing_versions v on v.listing_id = l.id
			join validation_jobs j on j.repository_id = l.repository_id and j.manifest_digest = v.manifest_digest
			where l.owner_id = k.account_id and j.state = 'available')`, owners)
	if err != nil {
		return nil, fmt.Errorf("catalog: verified vendors: %w", err)
	}
	out := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { out[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("catalog: verified vendors: %w", err)
	}
	return out, nil
}

// catalogFacets lists each facet's values with their counts: categories
// and price bands in their fixed order, boards by count (at most
// registryapi.MaxFacetValues of them).
func catalogFacets(counts map[string]map[string]int, q catalogQuery) registryapi.CatalogFacets {
	var boards []string
	for b := range counts["board"] {
		boards = append(boards, b)
	}
	slices.SortFunc(boards, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts["board"][b], counts["board"][a]), cmp.Compare(a, b))
	})
	boards = boards[:min(len(boards), registryapi.MaxFacetValues)]
	var bands []string
	for _, b := range registryapi.PriceBands {
		bands = append(bands, b.ID)
	}
	return registryapi.CatalogFacets{
		Category: facetValues(registryapi.Categories, counts["category"], q.categories),
		Board:    facetValues(append(boards, q.boards...), counts["board"], q.boards),
		Price:    facetValues(bands, counts["price"], q.bands),
	}
}

// facetValues lists, in the order of values and once each, those that some
// listing has or that were chosen, so that a chosen value stays there to
// be unchosen even when nothing has it.
func facetValues(values []string, counts map[string]int, chosen []string) []registryapi.FacetValue {
	out := []registryapi.FacetValue{}
	seen := map[string]bool{}
	for _, v := range values {
		sel := slices.Contains(chosen, v)
		if seen[v] || counts[v] == 0 && !sel {
			continue
		}
		seen[v] = true
		out = append(out, registryapi.FacetValue{Value: v, Count: counts[v], Selected: sel})
	}
	return out
}
