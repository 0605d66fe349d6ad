// Package portal is the registry's web portal: ISVs publish and sell their
// accelerators, tenants find and subscribe to them, operators watch the
// fleet. It is served by the registry binary, on the paths no other
// endpoint claims.
//
// # One source of truth
//
// Pages hold no data of their own. A page calls the marketplace API
// (/api/v1) with the same client as scripts (sdk/registryclient), served in
// process as the signed-in account (api.API.ServeAs), so the API's role
// rules, validation and audit log apply to a click exactly as to a script;
// and a browser upload is pushed through the registry's own /v2
// handler with a token its policy grants the account (hdk/publish, as
// `hdk push` does), then validated like any push.
//
// An ISV's pages and forms (/isv/…) that name a listing answer another
// ISV 404, as the API's management routes do, whether the marketplace
// shows that listing or not. A browser upload is refused before its image
// is read when its version's tag may no longer move (the version exists,
// or a tag rule holds the tag): 409, naming the listing and version; and
// an image is accepted only into the listing whose repository's last part
// is its own name (image.yaml's).
//
// # Forms
//
// A form that changes state answers a success with a redirect (303) to a
// page showing the result, so that reloading that page repeats nothing.
// A new API token's secret crosses that redirect in a cookie sealed under
// a key derived from the session's, read once and never in a URL. A
// refusal shows the form again with what was typed, and a refusal of one
// field (the API's names one) marks that field, with its message beside
// it and the focus on it.
//
// # Safety
//
// Sessions live in PostgreSQL (so any replica serves any browser), keyed
// by the SHA-256 of an HttpOnly, SameSite=Lax cookie (Secure and __Host-
// under TLS), with an absolute and an idle expiry. Every state-changing
// request carries the session's CSRF token and passes Go's cross-origin
// protection; sign-in uses a double-submit token and the registry's login
// limits. The Content-Security-Policy forbids inline script and style:
// htmx runs with eval, script tags and its inline indicator styles off,
// and listing descriptions and versions' documentation are Markdown
// rendered without raw HTML or dangerous URLs, their headings a level
// down so that a page keeps its one h1.
//
// # Listings
//
// A listing's page has three tabs, each a whole page without script:
// Overview, Documentation (the latest version's, or the one ?version=
// names) and Versions. Logos are served by the portal at
// /listings/{id}/logo, relayed from the API as the caller (the API does
// not know the portal's session, and an ISV sees its draft's logo), with
// the logo's digest in the pages' addresses; the listing editor uploads
// one with a multipart form within the registry's body limit, and the
// version page edits a version's documentation.
package portal
