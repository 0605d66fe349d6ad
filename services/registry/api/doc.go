// Package api is the registry's marketplace REST API under /api/v1: accounts
// and API tokens, ISV signing keys, listings
// and their versions (with the image validation state) and prices over time,
// entitlements (subscriptions and shares), nodes, usage records with billing
// summaries, monthly invoices and revenue statements, and the audit log. GET /api/v1/openapi.json serves an OpenAPI 3.1 document
// of every route; a test keeps the document and the router in step.
//
// # Authentication
//
// The bearer JWTs of /auth/token are for the OCI side only. The API accepts
//
//   - HTTP Basic with an account name and its password, or with an API token
//     as the password (any user name), checked by auth.Store;
//   - "Authorization: Bearer faas_…" with an API token.
//
// Bad or unusable credentials answer 401 with a WWW-Authenticate challenge
// (Basic realm="faas-registry"). Password checks run under the limits of
// auth.Store (auth.Limits): too many failures for one account or from one
// client address answer 429 rate_limited, too many checks at once for the
// hashing memory budget 503 unavailable, both with Retry-After. Anonymous
// requests may read only
// GET /api/v1/openapi.json, GET /api/v1/listings (published public listings),
// GET /api/v1/listings/{id}, its /prices and /logo (the same listings),
// its /versions and a version's /docs (of the versions that can be
// loaded), and GET /api/v1/catalog; everything else answers 401 without
// credentials.
//
// # Authorization (least privilege)
//
//   - admin: everything, including accounts, nodes, the whole audit log and
//     closing months for billing.
//   - isv: its own signing keys and listings (create, update, publish,
//     versions, prices, shares, the tag rules of their repositories);
//     entitlements to its listings (list, revoke); usage summaries of its
//     listings; its revenue statements;
//     audit entries about its listings.
//   - tenant: browse visible listings, subscribe to published public ones,
//     its own entitlements, usage summary, invoices and spend limits
//     (another tenant's answer 404, as a missing one does).
//   - node: register nodes, heartbeat its own nodes, report usage for them.
//   - everybody authenticated: GET /me and its own API tokens.
//
// A listing is visible to its owner and admins, to everybody when it is
// published with visibility public, and to holders of an active entitlement.
// A resource the caller may not see answers 404 (never 403), so that ids of
// other accounts' objects cannot be probed. A listing's management routes
// (changes, versions, shares, tag rules and tags) answer anyone but its
// owner and admins 404 too, with one message whether the listing is
// published, private or missing, as the portal's /isv pages do: "not yours"
// has one answer. An endpoint the caller's role may never use answers 403.
//
// A version is a tag: adding one whose name is a tag of the repository
// naming another image is refused 409, and once added, its tag never
// moves (distribution, "Immutable tags").
//
// # Conventions
//
// Request bodies are JSON, at most Config.MaxBodyBytes, decoded strictly
// (unknown fields are errors). Errors are {"error":{"code":…,"message":…}}
// (plus "field" for validation errors) with codes unauthenticated (401),
// forbidden (403), not_found (404), conflict (409), invalid (400/422),
// spend_limit (402: the tenant's spend limit of the month is reached; new
// load grants, attachments and renewals are refused, store_spend.go),
// too_large (413), rate_limited (429), unavailable (503: too many password
// checks at once, or the database cannot serve requests for now, whose
// cause the message names, both with Retry-After) and internal (500;
// details are logged, never returned).
// Lists take ?limit= (1…200, default 50) and ?cursor= (opaque, from the
// previous page's next_cursor, absent on the last page).
//
// # Catalog media
//
// A listing's category is one of registryapi.Categories (the database's
// check holds it there; migration 014 moved the free text of earlier
// listings onto the list). Its logo is set by PUT /listings/{id}/logo with
// the image as the raw body (PNG, JPEG or WebP; at most 256 KiB, 1024×1024
// pixels and 8:1): the header is read before any pixel, so that a few
// bytes claiming a huge image are refused undecoded; it is decoded with
// the decoder of the type claimed, never SVG (415), and drawn anew as a
// PNG of at most 256×256, which is what is kept and served (image/png,
// nosniff, a CSP that runs nothing, ETag the PNG's SHA-256, which the
// listing names as logo_digest); the bytes uploaded are never stored
// (logo.go, FuzzLogo). A version's documentation is Markdown of at most
// 64 KiB (PUT and GET /listings/{id}/versions/{version}/docs), stored as
// written and rendered by the portal without raw HTML.
//
// Bodies other than JSON answer unsupported_type (415) when of a type the
// route does not take.
//
// Prices are integer micros of the listing's currency, kept with their
// history (docs/ARCHITECTURE.md, "Money", and pricing.go). Node public keys are
// X25519 keys, given either as base64 (standard or URL alphabet) of the 32
// raw bytes or as a PEM "PUBLIC KEY" (PKIX); they are stored as PEM. Signing
// keys are ECDSA P-256 PEM public keys as cosign writes them; their key_id is
// "sha256:" + hex SHA-256 of the DER (PKIX) encoding.
//
// Every state-changing call writes an audit_log row (actor, action, target,
// request id, remote address, details) in the same transaction as the change.
// The remote address is clientip.FromRequest's: the socket peer, or what a
// trusted proxy reported, never a header from anyone else.
//
// The package logs only through Config.Logger (internal errors).
package api
