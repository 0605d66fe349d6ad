package portal

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

type marketPage struct {
	Query, Category string
	Listings        []registryapi.Listing
	Next            string // query of the next page
}

func (marketPage) title() string { return "Marketplace" }
func (marketPage) nav() string   { return "market" }

func accountOf(r *http.Request) *auth.Account {
	if se := sessionOf(r); se != nil {
		return &se.account
	}
	return nil
}

// market lists what the caller may see: published public listings, and
// for a signed-in account also its own and those shared with it.
func (p *Portal) market(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	q := url.Values{"limit": {"24"}}
	for _, k := range []string{"q", "category", "board", "cursor"} {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			q.Set(k, v)
		}
	}
	res, err := p.apiAs(accountOf(r)).Listings(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := marketPage{Query: in.Get("q"), Category: in.Get("category"), Listings: res.Items}
	if res.NextCursor != "" {
		q.Set("cursor", res.NextCursor)
		q.Del("limit")
		pg.Next = q.Encode()
	}
	p.render(w, r, http.StatusOK, pageMarket, pg)
}

type listingPage struct {
	Listing      registryapi.Listing
	Description  template.HTML
	Versions     []registryapi.Version
	LoadLine     string
	CanSubscribe bool
	Subscribed   bool
}

func (l listingPage) title() string { return l.Listing.Name }
func (listingPage) nav() string     { return "market" }

func (p *Portal) listing(w http.ResponseWriter, r *http.Request) {
	ctx, acct := r.Context(), accountOf(r)
	api := p.apiAs(acct)
	id := r.PathValue("id")
	l, err := api.Listing(ctx, id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := listingPage{Listing: l, Description: markdown(l.Description)}
	// Everyone sees the versions: a visitor, those that can be loaded.
	vs, err := api.Versions(ctx, id, url.Values{"limit": {"50"}})
	if err != nil && !errors.Is(err, registryclient.ErrDenied) {
		p.fail(w, r, err)
		return
	}
	pg.Versions = vs.Items
	if acct != nil {
		if acct.Role == auth.RoleTenant {
			ents, err := api.Entitlements(ctx, url.Values{"listing_id": {id}, "active": {"true"}})
			if err != nil {
				p.fail(w, r, err)
				return
			}
			for _, e := range ents.Items {
				pg.Subscribed = pg.Subscribed || (e.ListingID == id && e.RevokedAt == nil)
			}
			pg.CanSubscribe = !pg.Subscribed && pg.Listing.Published
		}
	}
	for _, v := range pg.Versions {
		if v.State == "available" {
			pg.LoadLine = "faas load " + r.Host + "/" + pg.Listing.Repository + ":" + v.Version
		}
	}
	p.render(w, r, http.StatusOK, pageListing, pg)
}

func (p *Portal) subscribe(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := p.apiAs(accountOf(r)).Subscribe(r.Context(), id); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/listings/"+url.PathEscape(id), "subscribed")
}
