package portal

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

type marketPage struct {
	Query, Sort string
	Catalog     registryapi.Catalog
	Facets      []facetGroup
	Sorts       []option
	Categories  map[string]string // labels
	// Vendor names the ISV of a vendor page; Verified, whether it is a
	// verified publisher. Action is the page's own address.
	Vendor      string
	Verified    bool
	Action      template.URL
	First, Last int // of the results shown, from 1
	// Prev and Next link the pages around, if any; URLs, since
	// html/template would escape a query string as one value.
	Prev, Next template.URL
}

// facetGroup is one facet of the marketplace's filters, a fieldset of
// checkboxes named after its query parameter.
type facetGroup struct {
	Param, Legend string
	Values        []facetOption
}

type facetOption struct {
	registryapi.FacetValue
	Label string
}

type option struct{ Value, Label string }

func (m marketPage) title() string {
	if m.Vendor != "" {
		return m.Vendor
	}
	return "Marketplace"
}
func (marketPage) nav() string { return "market" }

func accountOf(r *http.Request) *auth.Account {
	if se := sessionOf(r); se != nil {
		return &se.account
	}
	return nil
}

// marketPageSize is a page of cards: a whole number of rows at two, three
// and four columns.
const marketPageSize = 24

var categoryLabels = map[string]string{"ml": "Machine learning", "vision": "Vision", "video": "Video", "audio": "Audio",
	"networking": "Networking", "storage": "Storage", "database": "Databases", "compression": "Compression",
	"crypto": "Cryptography", "genomics": "Genomics", "finance": "Finance", "hpc": "HPC", "other": "Other"}

// CategoryOptions are the choices of a listing's category, the catalog's
// fixed list, with the listing's selected (a new listing's: "other").
func (f listingForm) CategoryOptions() []selectOption {
	c := f.Category
	if c == "" {
		c = "other"
	}
	var out []selectOption
	for _, v := range registryapi.Categories {
		out = append(out, selectOption{option{v, categoryLabels[v]}, v == c})
	}
	return out
}

type selectOption struct {
	option
	Selected bool
}

// priceLabels name the price bands in whole units of a listing's own
// currency, which differs between listings.
var priceLabels = map[string]string{"free": "Free", "under-1": "Under 1 per hour", "1-10": "1 to 10 per hour",
	"10-100": "10 to 100 per hour", "over-100": "100 or more per hour"}

var sortLabels = map[string]string{"relevance": "Best match", "popular": "Most loaded (30 days)", "newest": "Newest",
	"price": "Price per hour, lowest first"}

// market searches what the caller may see (published public listings, and
// for a signed-in account also its own and those shared with it) through
// GET /api/v1/catalog, in one form that works without JavaScript.
func (p *Portal) market(w http.ResponseWriter, r *http.Request) { p.catalogPage(w, r, "") }

// vendor is the marketplace of one ISV: its listings the caller may see,
// under its name and, if it has earned it, the verified-publisher badge.
func (p *Portal) vendor(w http.ResponseWriter, r *http.Request) {
	p.catalogPage(w, r, r.PathValue("name"))
}

func (p *Portal) catalogPage(w http.ResponseWriter, r *http.Request, vendor string) {
	in := r.URL.Query()
	q := url.Values{"limit": {strconv.Itoa(marketPageSize)}}
	for _, k := range []string{"q", "category", "board", "price", "sort", "offset"} {
		for _, v := range in[k] {
			if v = strings.TrimSpace(v); v != "" {
				q.Add(k, v)
			}
		}
	}
	filtered := len(q) > 1
	if vendor != "" {
		q.Set("owner", vendor)
	}
	c, err := p.apiAs(accountOf(r)).Catalog(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	if vendor != "" && c.Total == 0 && !filtered {
		p.notFound(w, r) // no such vendor, or none of its listings for this caller
		return
	}
	pg := marketPage{Query: q.Get("q"), Sort: c.Sort, Catalog: c, First: c.Offset + 1, Last: c.Offset + len(c.Items),
		Categories: categoryLabels, Vendor: vendor, Action: "/"}
	if vendor != "" {
		pg.Action = template.URL("/vendors/" + url.PathEscape(vendor))
		pg.Verified = len(c.Items) > 0 && c.Items[0].VendorVerified
	}
	pg.Facets = []facetGroup{
		facetOf("category", "Category", c.Facets.Category, categoryLabels),
		facetOf("board", "Board", c.Facets.Board, nil),
		facetOf("price", "Price", c.Facets.Price, priceLabels),
	}
	// Best match stays chosen while the visitor has not chosen another, so
	// that words typed on the unsearched page are searched by relevance
	// (without words it is the popular order).
	if q.Get("sort") == "" {
		pg.Sort = "relevance"
	}
	for _, s := range registryapi.CatalogSorts {
		pg.Sorts = append(pg.Sorts, option{s, sortLabels[s]})
	}
	q.Del("limit")
	q.Del("owner")
	if c.Offset > 0 {
		q.Set("offset", strconv.Itoa(max(0, c.Offset-c.Limit)))
		pg.Prev = pg.Action + template.URL("?"+q.Encode())
	}
	if next := c.Offset + c.Limit; next < c.Total && next <= registryapi.MaxCatalogOffset {
		q.Set("offset", strconv.Itoa(next))
		pg.Next = pg.Action + template.URL("?"+q.Encode())
	}
	p.render(w, r, http.StatusOK, pageMarket, pg)
}

func facetOf(param, legend string, values []registryapi.FacetValue, labels map[string]string) facetGroup {
	g := facetGroup{Param: param, Legend: legend}
	for _, v := range values {
		label := v.Value
		if l, ok := labels[v.Value]; ok {
			label = l
		}
		g.Values = append(g.Values, facetOption{v, label})
	}
	return g
}

type listingPage struct {
	Listing     registryapi.Listing
	Tab         string // "" (overview), "docs" or "versions"
	Description template.HTML
	Versions    []registryapi.Version // newest first
	// DocsVersion is the version whose documentation the Documentation
	// tab shows (the latest, or the one its link names); Docs, that
	// documentation rendered.
	DocsVersion  string
	Docs         template.HTML
	LoadLine     string
	CanSubscribe bool
	Subscribed   bool
}

func (l listingPage) title() string {
	switch l.Tab {
	case "docs":
		return l.Listing.Name + " · Documentation"
	case "versions":
		return l.Listing.Name + " · Versions"
	}
	return l.Listing.Name
}
func (listingPage) nav() string { return "market" }

// listingTabs are the listing page's tabs by their ?tab= value; the page
// is whole on each, without script.
var listingTabs = []string{"", "docs", "versions"}

func (p *Portal) listing(w http.ResponseWriter, r *http.Request) {
	ctx, acct := r.Context(), accountOf(r)
	api := p.apiAs(acct)
	id := r.PathValue("id")
	l, err := api.Listing(ctx, id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := listingPage{Listing: l, Tab: r.URL.Query().Get("tab")}
	if !slices.Contains(listingTabs, pg.Tab) {
		pg.Tab = ""
	}
	// Everyone sees the versions: a visitor, those that can be loaded.
	vs, err := api.Versions(ctx, id, url.Values{"limit": {"50"}})
	if err != nil && !errors.Is(err, registryclient.ErrDenied) {
		p.fail(w, r, err)
		return
	}
	pg.Versions = vs.Items
	slices.Reverse(pg.Versions) // newest first
	for _, v := range slices.Backward(pg.Versions) {
		if v.State == "available" {
			pg.LoadLine = "faas load " + r.Host + "/" + pg.Listing.Repository + ":" + v.Version
		}
	}
	switch pg.Tab {
	case "":
		pg.Description = markdown(l.Description)
		if acct != nil && acct.Role == auth.RoleTenant {
			if err := p.subscription(r, &pg); err != nil {
				p.fail(w, r, err)
				return
			}
		}
	case "docs":
		if err := p.versionDocs(r, &pg); err != nil {
			p.fail(w, r, err)
			return
		}
	}
	p.render(w, r, http.StatusOK, pageListing, pg)
}

// subscription says whether the tenant signed in is subscribed to the
// listing, or may subscribe.
func (p *Portal) subscription(r *http.Request, pg *listingPage) error {
	id := pg.Listing.ID
	ents, err := p.apiAs(accountOf(r)).Entitlements(r.Context(), url.Values{"listing_id": {id}, "active": {"true"}})
	if err != nil {
		return err
	}
	for _, e := range ents.Items {
		pg.Subscribed = pg.Subscribed || (e.ListingID == id && e.RevokedAt == nil)
	}
	pg.CanSubscribe = !pg.Subscribed && pg.Listing.Published
	return nil
}

// versionDocs reads the documentation of the version ?version= names, by
// default the latest one the caller sees; none when there is no version.
func (p *Portal) versionDocs(r *http.Request, pg *listingPage) error {
	want := r.URL.Query().Get("version")
	for _, v := range pg.Versions {
		if want == "" || v.Version == want {
			pg.DocsVersion = v.Version
			break
		}
	}
	if pg.DocsVersion == "" {
		if want != "" {
			return &registryclient.Error{Status: http.StatusNotFound, Code: registryapi.CodeNotFound, Message: "no version " + want + " of this listing"}
		}
		return nil
	}
	d, err := p.apiAs(accountOf(r)).VersionDocs(r.Context(), pg.Listing.ID, pg.DocsVersion)
	if err != nil {
		return err
	}
	pg.Docs = markdown(d.Markdown)
	return nil
}

func (p *Portal) subscribe(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := p.apiAs(accountOf(r)).Subscribe(r.Context(), id); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/listings/"+url.PathEscape(id), "subscribed")
}
