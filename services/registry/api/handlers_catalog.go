package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

func (a *API) catalog(c echo.Context, p *principal) error {
	q, err := parseCatalogQuery(c)
	if err != nil {
		return err
	}
	out, err := a.st.catalog(c.Request().Context(), p, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// parseCatalogQuery checks a catalog search against the bounds of
// registryapi.Catalog, so that no search costs more than they allow.
func parseCatalogQuery(c echo.Context) (catalogQuery, error) {
	in := c.QueryParams()
	q := catalogQuery{limit: DefaultLimit, sort: in.Get("sort")}
	text := in.Get("q")
	if len(text) > registryapi.MaxCatalogQuery || !utf8.ValidString(text) {
		return q, fieldErr("q", "at most %d bytes of UTF-8", registryapi.MaxCatalogQuery)
	}
	words := strings.Fields(text)
	if len(words) > registryapi.MaxCatalogWords {
		return q, fieldErr("q", "at most %d words", registryapi.MaxCatalogWords)
	}
	for _, w := range words {
		q.words = append(q.words, strings.ToLower(w))
	}
	q.owner = strings.ToLower(in.Get("owner"))
	if len(q.owner) > 64 {
		return q, fieldErr("owner", "at most 64 bytes")
	}
	var err error
	if q.categories, err = facetParam(in["category"], "category", registryapi.Categories); err != nil {
		return q, err
	}
	if q.boards, err = facetParam(in["board"], "board", nil); err != nil {
		return q, err
	}
	var bands []string
	for _, b := range registryapi.PriceBands {
		bands = append(bands, b.ID)
	}
	if q.bands, err = facetParam(in["price"], "price", bands); err != nil {
		return q, err
	}
	switch {
	case q.sort == "" && len(words) > 0:
		q.sort = "relevance"
	case q.sort == "":
		q.sort = "popular"
	case !slices.Contains(registryapi.CatalogSorts, q.sort):
		return q, fieldErr("sort", "want one of %s", strings.Join(registryapi.CatalogSorts, ", "))
	}
	if q.offset, err = intParam(in.Get("offset"), "offset", 0, registryapi.MaxCatalogOffset, 0); err != nil {
		return q, err
	}
	if q.limit, err = intParam(in.Get("limit"), "limit", 1, MaxLimit, DefaultLimit); err != nil {
		return q, err
	}
	return q, nil
}

// facetParam returns a facet's chosen values, without empty ones; allowed,
// unless nil, is the facet's fixed list, matched ignoring case.
func facetParam(vs []string, name string, allowed []string) ([]string, error) {
	out := []string{}
	for _, v := range vs {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if allowed != nil {
			v = strings.ToLower(v)
			if !slices.Contains(allowed, v) {
				return nil, fieldErr(name, "want one of %s", strings.Join(allowed, ", "))
			}
		}
		if len(v) > 64 {
			return nil, fieldErr(name, "at most 64 bytes")
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > registryapi.MaxFacetValues {
		return nil, fieldErr(name, "at most %d values", registryapi.MaxFacetValues)
	}
	return out, nil
}

func intParam(s, name string, lo, hi, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fieldErr(name, "want an integer in [%d, %d]", lo, hi)
	}
	return n, nil
}
