package portal

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
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
	var res struct {
		Items      []registryapi.Listing `json:"items"`
		NextCursor string                `json:"next_cursor"`
	}
	if err := p.call(r.Context(), accountOf(r), http.MethodGet, "/listings", q, nil, &res); err != nil {
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
	id := r.PathValue("id")
	var pg listingPage
	if err := p.call(ctx, acct, http.MethodGet, "/listings/"+url.PathEscape(id), nil, nil, &pg.Listing); err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Description = markdown(pg.Listing.Description)
	if acct != nil {
		var vs struct {
			Items []registryapi.Version `json:"items"`
		}
		err := p.call(ctx, acct, http.MethodGet, "/listings/"+url.PathEscape(id)+"/versions", url.Values{"limit": {"50"}}, nil, &vs)
		var ae *apiError
		if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusForbidden) {
			p.fail(w, r, err)
			return
		}
		pg.Versions = vs.Items
		if acct.Role == auth.RoleTenant {
			var ents struct {
				Items []registryapi.Entitlement `json:"items"`
			}
			if err := p.call(ctx, acct, http.MethodGet, "/entitlements", url.Values{"listing_id": {id}, "active": {"true"}}, nil, &ents); err != nil {
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
	if err := p.call(r.Context(), accountOf(r), http.MethodPost, "/listings/"+url.PathEscape(id)+"/subscribe", nil, nil, nil); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/listings/"+url.PathEscape(id), "subscribed")
}
