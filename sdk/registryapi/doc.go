// Package registryapi is the wire contract of the registry's REST API
// (/api/v1): the JSON bodies of requests and answers, the error envelope,
// the list envelope and the paths. The registry's server and every client
// of it (the SDK, the node agent, the CLIs, the portal) share these types,
// the way agentapi and poolapi are shared for their surfaces; the
// accelerator pool's part of the API (/attachments) is in poolapi.
//
// # Resources
//
//	GET    /me                                   → Account
//	POST   /accounts                 admin       NewAccount → 201 Account
//	GET    /accounts?role=           admin       → Page[Account]
//	PATCH  /accounts/{id}            admin       AccountUpdate → Account
//	GET    /accounts/{name}/spend-limits tenant (own), admin → SpendLimits
//	PUT    /accounts/{name}/spend-limits/{currency} tenant (own), admin SpendLimitUpdate → SpendLimit
//	POST   /tokens                               NewToken → 201 Token (with Secret, once)
//	GET    /tokens                               → Page[Token]
//	DELETE /tokens/{id}                          → 204
//	POST   /keys                     isv         NewSigningKey → 201 SigningKey
//	GET    /keys                     isv, admin  → Page[SigningKey]
//	POST   /keys/{id}/revoke         isv, admin  → SigningKey
//	GET    /signing-keys?repository=             → RepositoryKeys
//	POST   /keys/release             node        KeyRelease → KeyReleaseResult
//	POST   /listings                 isv         NewListing → 201 Listing
//	GET    /listings?q=&category=&board=&owner=&published=
//	                                             → Page[Listing] (anonymous: the public ones)
//	GET    /catalog?q=&category=&board=&owner=&price=&sort=&offset=&limit=
//	                                             → Catalog (ranked search with facets)
//	GET    /listings/{id}                        → Listing
//	PATCH  /listings/{id}            isv, admin  ListingFields → Listing
//	POST   /listings/{id}/publish    isv, admin  → Listing (and /unpublish)
//	POST   /listings/{id}/versions   isv, admin  NewVersion → 201 Version
//	GET    /listings/{id}/versions               → Page[Version]
//	GET    /listings/{id}/tag-rules  isv, admin  → Items[TagRule]
//	POST   /listings/{id}/tag-rules  isv, admin  NewTagRule → 201 TagRule
//	DELETE /listings/{id}/tag-rules/{rule} isv, admin → 204
//	GET    /listings/{id}/tags/{tag} isv, admin  → Tag
//	GET    /listings/{id}/prices                 → Items[Price]
//	POST   /listings/{id}/prices     isv, admin  NewPrice → 201 Price
//	POST   /listings/{id}/subscribe  tenant      → 201 Entitlement
//	POST   /listings/{id}/shares     isv, admin  NewShare → 201 Entitlement
//	GET    /entitlements?listing_id=&active=     → Page[Entitlement]
//	DELETE /entitlements/{id}                    → 204
//	POST   /nodes                    node        NodeRegistration → 201 Node
//	POST   /nodes/{id}/heartbeat     node        Heartbeat → 204
//	GET    /nodes                    admin       → Page[Node]
//	POST   /nodes/{id}/approve       admin       → Node (and /revoke, /repin)
//	POST   /node-enrollments         admin       NewEnrollment → 201 Enrollment
//	POST   /load-grants                          GrantRequest → 201 Grant (with Secret, once); 402 spend_limit
//	POST   /usage                    node        UsageReport → 200 UsageAccepted
//	GET    /usage/summary?listing_id=&by=day      → UsageSummaries
//	GET    /invoices?month=&tenant_id=&format=   tenant, admin → Items[Invoice] (or CSV)
//	GET    /revenue-statements?month=&isv_id=&format= isv, admin → Items[RevenueStatement] (or CSV)
//	POST   /months/{month}/close     admin       → MonthClosed
//	GET    /audit?action=&target_type=&target_id=&actor= → Page[AuditEntry]
//	GET    /validation-jobs?state=   admin       → Page[ValidationJob]
//	GET    /loads                                → Items[Load]
//	POST   /webhooks                 isv, tenant, admin NewWebhook → 201 Webhook (with Secret, once)
//	GET    /webhooks                 isv, tenant, admin → Page[Webhook]
//	GET    /webhooks/{id}            isv, tenant, admin → Webhook (and PATCH WebhookUpdate, DELETE → 204)
//	GET    /webhooks/{id}/deliveries isv, tenant, admin → Page[WebhookDelivery]
//	POST   /webhooks/{id}/deliveries/{delivery}/redeliver → 202 WebhookDelivery
//	GET    /notifications?unread=    isv, tenant, admin → Page[Notification]
//	POST   /notifications/{id}/read  isv, tenant, admin → 204
//	GET    /openapi.json                         → the OpenAPI 3.1 document
//
// Every error answer is an ErrorBody. Lists are pages of at most ?limit=
// items (default 50, at most 200), continued with ?cursor= set to the
// previous page's NextCursor.
package registryapi

// Prefix is where the API is mounted on the registry.
const Prefix = "/api/v1"

// KeyReleasePath is the path of key release under Prefix.
const KeyReleasePath = "/keys/release"
