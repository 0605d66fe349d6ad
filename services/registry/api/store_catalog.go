package api

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// catalogQuery is a search of the catalog, checked by the handler.
type catalogQuery struct {
	words                     []string // LIKE-escaped
	categories, boards, bands []string
	sort                      string
	offset, limit             int
}

// catalogJoins and catalogWhere are what a search looks through: the listings the caller may
// see ($1, $2 as in visibleTo) that have every word of $7 in the vendor's
// name, the listing's name or its summary, with k.cat, the listing's
// category in the fixed list $3 (else 'other'), and k.band, the id of its
// price band per hour ($4-$6: ids, lower and upper bounds, 0 unbounded).
//
// Substring matching rather than full-text search because vendor and
// product names are what people type, often in part ("acme" for
// "acme-labs"), and neither stemming nor a dictionary helps there; the
// ILIKE predicates are the ones a pg_trgm GIN index serves, once a
// migration can add one.
const catalogJoins = ` from listings l join accounts a on a.id = l.owner_id left join repositories r on r.id = l.repository_id ` +
	currentPrices + `
	cross join lateral (select
		case when lower(btrim(l.category)) = any($3::text[]) then lower(btrim(l.category)) else 'other' end as cat,
		(select b.id from unnest($4::text[], $5::bigint[], $6::bigint[]) b(id, lo, hi)
		 where coalesce(cp.per_hour_micros, 0) >= b.lo and (b.hi = 0 or coalesce(cp.per_hour_micros, 0) < b.hi)) as band) k `

const catalogWhere = ` where ` + visibleTo + `
	and not exists (select 1 from unnest($7::text[]) w
		where not (a.name ilike '%' || w || '%' or l.name ilike '%' || w || '%' or l.summary ilike '%' || w || '%'))`

// The facets' filters: any of the values chosen ($8-$10), or all when none is.
const (
	inCategories = `(cardinality($8::text[]) = 0 or k.cat = any($8::text[]))`
	inBoards     = `(cardinality($9::text[]) = 0 or l.board_model = any($9::text[]))`
	inBands      = `(cardinality($10::text[]) = 0 or k.band = any($10::text[]))`
)

// relevance weighs, per word, a vendor named exactly so above a listing
// whose name starts with it, above one whose name or vendor holds it,
// above one whose summary does.
const relevance = `(select coalesce(sum((a.name ilike w)::int * 4 + (l.name ilike w || '%')::int * 3
	+ (l.name ilike '%' || w || '%')::int * 2 + (a.name ilike '%' || w || '%')::int * 2
	+ (l.summary ilike '%' || w || '%')::int), 0) from unnest($7::text[]) w)`

// loads30d joins, as u, the loads of listing l in the last 30 days.
const loads30d = ` left join lateral (select count(*) as n from usage_records ur
	where ur.listing_id = l.id and ur.event = 'load' and ur.recorded_at > now() - interval '30 days') u on true `

// catalogOrders are the sorts' ORDER BY clauses; each ends in the id so
// that pages never overlap.
var catalogOrders = map[string]string{
	"relevance": relevance + ` desc, u.n desc, l.created_at desc, l.id`,
	"popular":   `u.n desc, l.created_at desc, l.id`,
	"newest":    `l.created_at desc, l.id`,
	"price":     `coalesce(cp.per_hour_micros, 0), l.created_at desc, l.id`,
}

func (q catalogQuery) args(p *principal) []any {
	me, admin := who(p)
	var ids []string
	var lo, hi []int64
	for _, b := range registryapi.PriceBands {
		ids, lo, hi = append(ids, b.ID), append(lo, b.MinMicros), append(hi, b.MaxMicros)
	}
	return []any{me, admin, registryapi.Categories, ids, lo, hi, q.words, q.categories, q.boards, q.bands}
}

func (s *store) catalog(ctx context.Context, p *principal, q catalogQuery) (registryapi.Catalog, error) {
	out := registryapi.Catalog{Items: []registryapi.CatalogItem{}, Offset: q.offset, Limit: q.limit, Sort: q.sort}
	args := append(q.args(p), q.limit, q.offset)
	rows, err := s.db.Query(ctx, `select `+listingCols+`, k.cat, u.n`+catalogJoins+loads30d+catalogWhere+`
		and `+inCategories+` and `+inBoards+` and `+inBands+`
		order by `+catalogOrders[q.sort]+` limit $11 offset $12`, args...)
	if err != nil {
		return out, fmt.Errorf("catalog: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.CatalogItem, error) {
		var it registryapi.CatalogItem
		l := &it.Listing
		err := r.Scan(&l.ID, &l.OwnerID, &l.Owner, &l.Repository, &l.Name, &l.Summary, &l.Description,
			&l.Category, &l.BoardModel, &l.Currency, &l.PricePerHourMicros, &l.PricePerLoadMicros, &l.PricePerAttachedHourMicros, &l.Visibility,
			&l.Published, &l.Validated, &l.CreatedAt, &l.UpdatedAt, &l.Category, &it.Loads30d)
		return it, err
	})
	if err != nil {
		return out, fmt.Errorf("catalog: %w", err)
	}
	out.Items = append(out.Items, items...)
	out.Total, out.Facets, err = s.catalogFacets(ctx, q.args(p), q)
	return out, err
}

// catalogFacets counts the listings found in total and per facet value.
func (s *store) catalogFacets(ctx context.Context, args []any, q catalogQuery) (int, registryapi.CatalogFacets, error) {
	var f registryapi.CatalogFacets
	rows, err := s.db.Query(ctx, `with m as (select k.cat, l.board_model as board, k.band,
			`+inCategories+` as fc, `+inBoards+` as fb, `+inBands+` as fp`+catalogJoins+catalogWhere+`)
		select 'total', '', count(*) from m where fc and fb and fp
		union all (select 'category', cat, count(*) from m where fb and fp group by cat)
		union all (select 'board', board, count(*) from m where fc and fp and board <> ''
			group by board order by count(*) desc, board limit $11)
		union all (select 'price', band, count(*) from m where fc and fb group by band)`,
		append(args, registryapi.MaxFacetValues)...)
	if err != nil {
		return 0, f, fmt.Errorf("catalog facets: %w", err)
	}
	defer rows.Close()
	var total int
	counts := map[string]map[string]int{"category": {}, "board": {}, "price": {}}
	var boards []string // by count, as counted
	for rows.Next() {
		var facet, value string
		var n int
		if err := rows.Scan(&facet, &value, &n); err != nil {
			return 0, f, fmt.Errorf("catalog facets: %w", err)
		}
		switch facet {
		case "total":
			total = n
		case "board":
			boards = append(boards, value)
			fallthrough
		default:
			counts[facet][value] = n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, f, fmt.Errorf("catalog facets: %w", err)
	}
	var bands []string
	for _, b := range registryapi.PriceBands {
		bands = append(bands, b.ID)
	}
	f.Category = facetValues(registryapi.Categories, counts["category"], q.categories)
	f.Board = facetValues(append(boards, q.boards...), counts["board"], q.boards)
	f.Price = facetValues(bands, counts["price"], q.bands)
	return total, f, nil
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
