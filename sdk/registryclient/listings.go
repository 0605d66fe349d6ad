package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

func listingPath(id string) string { return "/listings/" + url.PathEscape(id) }

// CreateListing creates a listing of the calling ISV, unpublished.
func (c *Client) CreateListing(ctx context.Context, in registryapi.NewListing) (registryapi.Listing, error) {
	var l registryapi.Listing
	return l, c.Do(ctx, http.MethodPost, "/listings", in, &l)
}

// Listing returns one listing the caller may see.
func (c *Client) Listing(ctx context.Context, id string) (registryapi.Listing, error) {
	var l registryapi.Listing
	return l, c.Do(ctx, http.MethodGet, listingPath(id), nil, &l)
}

// Listings lists a page of the listings the caller may see; q may hold
// "q", "category", "board", "owner" and "published".
func (c *Client) Listings(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Listing], error) {
	return List[registryapi.Listing](ctx, c, "/listings", q)
}

// Catalog searches the listings the caller may see; q holds the
// parameters of registryapi.Catalog.
func (c *Client) Catalog(ctx context.Context, q url.Values) (registryapi.Catalog, error) {
	var out registryapi.Catalog
	path := "/catalog"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out, c.Do(ctx, http.MethodGet, path, nil, &out)
}

// UpdateListing changes the non-nil fields of a listing.
func (c *Client) UpdateListing(ctx context.Context, id string, in registryapi.ListingFields) (registryapi.Listing, error) {
	var l registryapi.Listing
	return l, c.Do(ctx, http.MethodPatch, listingPath(id), in, &l)
}

// Publish publishes a listing (publish) or withdraws it from the
// marketplace.
func (c *Client) Publish(ctx context.Context, id string, publish bool) (registryapi.Listing, error) {
	op := "/publish"
	if !publish {
		op = "/unpublish"
	}
	var l registryapi.Listing
	return l, c.Do(ctx, http.MethodPost, listingPath(id)+op, nil, &l)
}

// AddVersion adds a version (an image digest of the listing's repository)
// to a listing; the registry then validates it.
func (c *Client) AddVersion(ctx context.Context, listing string, in registryapi.NewVersion) (registryapi.Version, error) {
	var v registryapi.Version
	return v, c.Do(ctx, http.MethodPost, listingPath(listing)+"/versions", in, &v)
}

// Versions lists a page of a listing's versions with their validation
// state.
func (c *Client) Versions(ctx context.Context, listing string, q url.Values) (registryapi.Page[registryapi.Version], error) {
	return List[registryapi.Version](ctx, c, listingPath(listing)+"/versions", q)
}

// Prices returns a listing's prices, oldest first: its history and the
// prices scheduled for later, each in force until the next.
func (c *Client) Prices(ctx context.Context, listing string) ([]registryapi.Price, error) {
	var l registryapi.Items[registryapi.Price]
	return l.Items, c.Do(ctx, http.MethodGet, listingPath(listing)+"/prices", nil, &l)
}

// SetPrice sets a listing's prices from in.EffectiveAt (nil: now), which
// must not be in the past.
func (c *Client) SetPrice(ctx context.Context, listing string, in registryapi.NewPrice) (registryapi.Price, error) {
	var p registryapi.Price
	return p, c.Do(ctx, http.MethodPost, listingPath(listing)+"/prices", in, &p)
}

// Subscribe subscribes the caller, a tenant, to a listing.
func (c *Client) Subscribe(ctx context.Context, listing string) (registryapi.Entitlement, error) {
	var e registryapi.Entitlement
	return e, c.Do(ctx, http.MethodPost, listingPath(listing)+"/subscribe", nil, &e)
}

// Share shares a listing of the calling ISV with a tenant account.
func (c *Client) Share(ctx context.Context, listing, account string) (registryapi.Entitlement, error) {
	var e registryapi.Entitlement
	return e, c.Do(ctx, http.MethodPost, listingPath(listing)+"/shares", registryapi.NewShare{Account: account}, &e)
}

// Entitlements lists a page of the entitlements the caller may see; q may
// hold "listing_id" and "active" ("true").
func (c *Client) Entitlements(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Entitlement], error) {
	return List[registryapi.Entitlement](ctx, c, "/entitlements", q)
}

// RevokeEntitlement ends an entitlement (a tenant's own subscription, or
// a share or subscription of an ISV's listing).
func (c *Client) RevokeEntitlement(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/entitlements/"+url.PathEscape(id), nil, nil)
}

// SetLogo sets a listing's logo from an image of Content-Type ctype (one
// of registryapi.LogoTypes); the registry keeps a PNG it makes of it.
func (c *Client) SetLogo(ctx context.Context, listing, ctype string, image []byte) (registryapi.Listing, error) {
	var l registryapi.Listing
	return l, c.DoRaw(ctx, http.MethodPut, listingPath(listing)+"/logo", ctype, image, &l)
}

// DeleteLogo removes a listing's logo.
func (c *Client) DeleteLogo(ctx context.Context, listing string) error {
	return c.Do(ctx, http.MethodDelete, listingPath(listing)+"/logo", nil, nil)
}

// Logo returns a listing's logo, a PNG.
func (c *Client) Logo(ctx context.Context, listing string) ([]byte, error) {
	var b []byte
	return b, c.Do(ctx, http.MethodGet, listingPath(listing)+"/logo", nil, &b)
}

func docsPath(listing, version string) string {
	return listingPath(listing) + "/versions/" + url.PathEscape(version) + "/docs"
}

// VersionDocs returns a version's documentation, Markdown.
func (c *Client) VersionDocs(ctx context.Context, listing, version string) (registryapi.VersionDocs, error) {
	var d registryapi.VersionDocs
	return d, c.Do(ctx, http.MethodGet, docsPath(listing, version), nil, &d)
}

// SetVersionDocs sets a version's documentation ("" removes it).
func (c *Client) SetVersionDocs(ctx context.Context, listing, version, markdown string) (registryapi.VersionDocs, error) {
	var d registryapi.VersionDocs
	return d, c.Do(ctx, http.MethodPut, docsPath(listing, version), registryapi.NewVersionDocs{Markdown: markdown}, &d)
}
