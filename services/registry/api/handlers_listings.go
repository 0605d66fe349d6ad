package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

func checkLen(field string, v *string, min, max int) error {
	if v != nil && (len(*v) < min || len(*v) > max) {
		return fieldErr(field, "length must be in [%d, %d]", min, max)
	}
	return nil
}

func validateListing(f *registryapi.ListingFields) error {
	for _, c := range []struct {
		field    string
		v        *string
		min, max int
	}{{"name", f.Name, 1, 128}, {"summary", f.Summary, 0, 512}, {"description", f.Description, 0, 65536},
		{"category", f.Category, 0, 64}, {"board_model", f.BoardModel, 0, 64}} {
		if err := checkLen(c.field, c.v, c.min, c.max); err != nil {
			return err
		}
	}
	if f.Category != nil {
		// Categories are the catalog's fixed list, whatever the case; ""
		// is "other", as forms without a choice send it.
		c := strings.ToLower(strings.TrimSpace(*f.Category))
		if c == "" {
			c = "other"
		}
		if !slices.Contains(registryapi.Categories, c) {
			return fieldErr("category", "want one of %s", strings.Join(registryapi.Categories, ", "))
		}
		f.Category = &c
	}
	if f.Currency != nil && !currencyRE.MatchString(*f.Currency) {
		return fieldErr("currency", "want an ISO 4217 code such as USD")
	}
	if f.TrialHours != nil && (*f.TrialHours < 0 || *f.TrialHours > registryapi.MaxTrialHours) {
		return fieldErr("trial_hours", "want 0 to %d hours", registryapi.MaxTrialHours)
	}
	if err := checkPrices("price_", newPrice(*f)); err != nil {
		return err
	}
	if f.Visibility != nil {
		switch *f.Visibility {
		case "private", "shared", "public":
		default:
			return fieldErr("visibility", "want private, shared or public")
		}
	}
	return nil
}

func (a *API) createListing(c echo.Context, p *principal) error {
	var req registryapi.NewListing
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return fieldErr("name", "required")
	}
	if err := validateListing(&req.ListingFields); err != nil {
		return err
	}
	if len(req.Repository) > 255 || !repoRE.MatchString(req.Repository) || !strings.HasPrefix(req.Repository, p.Name+"/") {
		return fieldErr("repository", "want a repository name under your namespace %q, e.g. %s/NAME", p.Name, p.Name)
	}
	l, err := a.st.createListing(c.Request().Context(), p, req.Repository, req.ListingFields)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, l)
}

func (a *API) listListings(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	f := listingFilter{category: c.QueryParam("category"), board: c.QueryParam("board"),
		owner: c.QueryParam("owner"), q: c.QueryParam("q")}
	if len(f.q) > 128 {
		return fieldErr("q", "at most 128 bytes")
	}
	switch c.QueryParam("published") {
	case "":
	case "true":
		t := true
		f.published = &t
	case "false":
		t := false
		f.published = &t
	default:
		return fieldErr("published", "want true or false")
	}
	rows, err := a.st.listListings(c.Request().Context(), p, f, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Listing) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) getListing(c echo.Context, p *principal) error {
	l, err := a.st.getListing(c.Request().Context(), a.st.db, p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (a *API) updateListing(c echo.Context, p *principal) error {
	var f registryapi.ListingFields
	if err := a.decode(c, &f); err != nil {
		return err
	}
	if err := validateListing(&f); err != nil {
		return err
	}
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	l, err := a.st.updateListing(c.Request().Context(), p, c.Param("id"), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (a *API) publish(pub bool) handler {
	return func(c echo.Context, p *principal) error {
		if !isUUID(c.Param("id")) {
			return notYours()
		}
		l, err := a.st.setPublished(c.Request().Context(), p, c.Param("id"), pub)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, l)
	}
}

func (a *API) addVersion(c echo.Context, p *principal) error {
	var req registryapi.NewVersion
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if !versionRE.MatchString(req.Version) {
		return fieldErr("version", "want 1-128 characters of [A-Za-z0-9._+-], starting alphanumeric")
	}
	if !digestRE.MatchString(req.Digest) {
		return fieldErr("digest", "want sha256:<64 hex> or sha512:<128 hex>")
	}
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	v, err := a.st.addVersion(c.Request().Context(), p, c.Param("id"), req.Version, req.Digest)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

func (a *API) listVersions(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listVersions(c.Request().Context(), p, c.Param("id"), pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Version) cursor { return cursor{x.CreatedAt, x.Version} }))
}

func created(ok bool) int {
	if ok {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (a *API) subscribe(c echo.Context, p *principal) error {
	e, ok, err := a.st.subscribe(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(created(ok), e)
}

func (a *API) share(c echo.Context, p *principal) error {
	var req registryapi.NewShare
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if req.Account == "" || len(req.Account) > 64 {
		return fieldErr("account", "required: the account name to share with")
	}
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	e, ok, err := a.st.share(c.Request().Context(), p, c.Param("id"), req.Account)
	if err != nil {
		return err
	}
	return c.JSON(created(ok), e)
}

func (a *API) listEntitlements(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	f := entFilter{listing: c.QueryParam("listing_id"), active: c.QueryParam("active") == "true"}
	rows, err := a.st.listEntitlements(c.Request().Context(), p, f, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Entitlement) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) revokeEntitlement(c echo.Context, p *principal) error {
	if _, err := a.st.revokeEntitlement(c.Request().Context(), p, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// checkPrices checks a price change's amounts; prefix is what the fields'
// names start with in the body ("price_" in a listing's fields).
func checkPrices(prefix string, np registryapi.NewPrice) error {
	for _, c := range []struct {
		field string
		v     *int64
	}{{"per_load_micros", np.PerLoadMicros}, {"per_hour_micros", np.PerHourMicros}, {"per_attached_hour_micros", np.PerAttachedHourMicros}} {
		if c.v != nil && (*c.v < 0 || *c.v > registryapi.MaxPriceMicros) {
			return fieldErr(prefix+c.field, "want 0 to %d micro-units", int64(registryapi.MaxPriceMicros))
		}
	}
	return nil
}

func (a *API) listPrices(c echo.Context, p *principal) error {
	rows, err := a.st.listPrices(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, registryapi.Items[registryapi.Price]{Items: rows})
}

func (a *API) schedulePrice(c echo.Context, p *principal) error {
	var req registryapi.NewPrice
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if err := checkPrices("", req); err != nil {
		return err
	}
	if !isUUID(c.Param("id")) {
		return fmt.Errorf("%w: listing", ErrNotFound)
	}
	pr, err := a.st.schedulePrice(c.Request().Context(), p, c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, pr)
}
