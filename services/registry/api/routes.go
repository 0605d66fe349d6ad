package api

import (
	"net/http"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// The roles, as route access names them.
const (
	isv    = auth.RoleISV
	tenant = auth.RoleTenant
	admin  = auth.RoleAdmin
	node   = auth.RoleNode
)

// resource is the routes of one resource of the API; its tag groups them
// in the OpenAPI document.
type resource struct {
	tag    string
	routes []route
}

// route is one operation of the API. The route table below is the one
// place that says where an operation is, who may call it, what serves it
// and how the OpenAPI document describes it: the router and the document
// are both made from it.
type route struct {
	method string // http.Method*
	path   string // under registryapi.Prefix; "{id}" parameters, as in OpenAPI
	who    access
	serve  handler
	doc    opDoc
}

// opDoc describes an operation in the OpenAPI document.
type opDoc struct {
	summary string
	body    string   // schema name of the request body, or ""
	resp    string   // schema name of the 2xx response, or ""
	status  string   // 2xx status
	list    bool     // paginated (limit, cursor)
	raw     []string // Content-Types of a body that is not JSON
	rawResp string   // Content-Type of a 2xx answer that is not JSON
	query   []string
	spend   bool // may answer 402 spend_limit (store_spend.go)
}

// resources is the API's route table, by resource.
func (a *API) resources() []resource {
	return []resource{
		{"meta", a.metaRoutes()},
		{"accounts", a.accountsRoutes()},
		{"tokens", a.tokensRoutes()},
		{"keys", a.keysRoutes()},
		{"listings", a.listingsRoutes()},
		{"tags", a.tagsRoutes()},
		{"entitlements", a.entitlementsRoutes()},
		{"nodes", a.nodesRoutes()},
		{"usage", a.usageRoutes()},
		{"statements", a.statementsRoutes()},
		{"audit", a.auditRoutes()},
		{"attachments", a.attachmentsRoutes()},
		{"validation", a.validationRoutes()},
		{"webhooks", a.webhooksRoutes()},
		{"notifications", a.notificationsRoutes()},
	}
}

// metaRoutes: the API itself.
func (a *API) metaRoutes() []route {
	return []route{
		{http.MethodGet, "/openapi.json", anyone(), a.openAPI,
			opDoc{summary: "This OpenAPI document", status: "200"}},
	}
}

// accountsRoutes: accounts, and the caller's own.
func (a *API) accountsRoutes() []route {
	return []route{
		{http.MethodGet, "/me", authed(), a.me,
			opDoc{summary: "The authenticated account", resp: "Account", status: "200"}},
		{http.MethodPost, "/accounts", roles(admin), a.createAccount,
			opDoc{summary: "Create an account (admin)", body: "AccountCreate", resp: "Account", status: "201"}},
		{http.MethodGet, "/accounts", roles(admin), a.listAccounts,
			opDoc{summary: "List accounts (admin)", resp: "Account", status: "200", list: true, query: []string{"role"}}},
		{http.MethodPatch, "/accounts/{id}", roles(admin), a.updateAccount,
			opDoc{summary: "Change an account's role or disable/enable it (admin; not your own account; node accounts keep their role; an isv owning listings stays one)", body: "AccountUpdate", resp: "Account", status: "200"}},
		{http.MethodGet, "/accounts/{name}/spend-limits", roles(tenant, admin), a.getSpendLimits,
			opDoc{summary: "A tenant's spend this month (UTC), per currency, against its alert threshold and hard limit (the tenant itself or admin; anyone else 404)", resp: "SpendLimits", status: "200"}},
		{http.MethodPut, "/accounts/{name}/spend-limits/{currency}", roles(tenant, admin), a.putSpendLimit,
			opDoc{summary: "Set a tenant's alert threshold and hard limit in a currency, micro-units, null for none (both null: remove). At the alert one spend.threshold_reached event per month; at the limit new load grants, new attachments and attachment renewals of that currency's listings answer 402 spend_limit, while what runs finishes its lease (the tenant itself or admin; anyone else 404)", body: "SpendLimitUpdate", resp: "SpendLimit", status: "200"}},
	}
}

// tokensRoutes: API tokens.
func (a *API) tokensRoutes() []route {
	return []route{
		{http.MethodPost, "/tokens", authed(), a.createToken,
			opDoc{summary: "Create an API token for yourself; the secret is shown once", body: "TokenCreate", resp: "Token", status: "201"}},
		{http.MethodGet, "/tokens", authed(), a.listTokens,
			opDoc{summary: "List your API tokens", resp: "Token", status: "200", list: true}},
		{http.MethodDelete, "/tokens/{id}", authed(), a.revokeToken,
			opDoc{summary: "Revoke one of your API tokens", status: "204"}},
	}
}

// keysRoutes: ISVs' signing keys and the release of sealed images' data keys.
func (a *API) keysRoutes() []route {
	return []route{
		{http.MethodPost, "/keys", roles(isv), a.createKey,
			opDoc{summary: "Register an ECDSA P-256 signing key (isv)", body: "KeyCreate", resp: "SigningKey", status: "201"}},
		{http.MethodGet, "/keys", roles(isv, admin), a.listKeys,
			opDoc{summary: "List signing keys (isv: own; admin: all or ?account_id=)", resp: "SigningKey", status: "200", list: true, query: []string{"account_id"}}},
		{http.MethodGet, "/signing-keys", authed(), a.repositoryKeys,
			opDoc{summary: "Unrevoked signing keys of the ISV owning a repository (any account; nodes check ISV signatures with them)", resp: "RepositoryKeys", status: "200", query: []string{"repository"}}},
		{http.MethodPost, "/keys/{id}/revoke", roles(isv, admin), a.revokeKey,
			opDoc{summary: "Revoke a signing key (isv: own; admin: any)", resp: "SigningKey", status: "200"}},
		{http.MethodPost, "/keys/release", roles(node).audited(a.keyReleaseRefused), a.releaseKeys,
			opDoc{summary: "Release the data keys of a sealed image to one of your nodes, wrapped to its key, against a tenant's load grant (node); spends the grant; every attempt is audited", body: "KeyRelease", resp: "KeyReleaseResult", status: "200"}},
	}
}

// listingsRoutes: listings of the marketplace and their versions.
func (a *API) listingsRoutes() []route {
	return []route{
		{http.MethodPost, "/listings", roles(isv), a.createListing,
			opDoc{summary: "Create a listing (isv)", body: "ListingCreate", resp: "Listing", status: "201"}},
		{http.MethodGet, "/listings", anonymousOr(isv, tenant, admin), a.listListings,
			opDoc{summary: "List visible listings (anonymous: published public ones)", resp: "Listing", status: "200", list: true, query: []string{"category", "board", "owner", "q", "published"}}},
		{http.MethodGet, "/catalog", anonymousOr(isv, tenant, admin), a.catalog,
			opDoc{summary: "Search the visible listings by words of the vendor's name, the listing's name or summary, ranked; filter by category, board and price band per hour, each with counts, and by vendor; sort by relevance, popular (loads in the last 30 days), newest or price; pages by offset (see sdk/registryapi Catalog)",
				resp: "Catalog", status: "200", query: []string{"q", "category", "board", "owner", "price", "sort", "offset", "limit"}}},
		{http.MethodGet, "/listings/{id}", anonymousOr(isv, tenant, admin), a.getListing,
			opDoc{summary: "Get a visible listing", resp: "Listing", status: "200"}},
		{http.MethodPatch, "/listings/{id}", roles(isv, admin), a.updateListing,
			opDoc{summary: "Update a listing (owner or admin)", body: "ListingUpdate", resp: "Listing", status: "200"}},
		{http.MethodPost, "/listings/{id}/publish", roles(isv, admin), a.publish(true),
			opDoc{summary: "Publish a listing (owner or admin)", resp: "Listing", status: "200"}},
		{http.MethodPost, "/listings/{id}/unpublish", roles(isv, admin), a.publish(false),
			opDoc{summary: "Unpublish a listing (owner or admin)", resp: "Listing", status: "200"}},
		{http.MethodPost, "/listings/{id}/versions", roles(isv, admin), a.addVersion,
			opDoc{summary: "Add a version pointing at a manifest of the listing's repository", body: "VersionCreate", resp: "Version", status: "201"}},
		{http.MethodGet, "/listings/{id}/versions", anonymousOr(isv, tenant, admin), a.listVersions,
			opDoc{summary: "List versions with their validation state (anonymous: the available versions of a published public listing, without findings)", resp: "Version", status: "200", list: true}},
		{http.MethodPut, "/listings/{id}/versions/{version}/docs", roles(isv, admin), a.putDocs,
			opDoc{summary: "Set a version's documentation, Markdown of at most 64 KiB (owner or admin); \"\" removes it", body: "VersionDocsUpdate", resp: "VersionDocs", status: "200"}},
		{http.MethodGet, "/listings/{id}/versions/{version}/docs", anonymousOr(isv, tenant, admin), a.getDocs,
			opDoc{summary: "A version's documentation, Markdown (anonymous: of an available version of a published public listing)", resp: "VersionDocs", status: "200"}},
		{http.MethodPut, "/listings/{id}/logo", roles(isv, admin), a.putLogo,
			opDoc{summary: "Set a listing's logo from the raw body (owner or admin): PNG, JPEG or WebP, at most 256 KiB and 1024x1024 pixels, at most 8 times wider than high or higher than wide; kept as a PNG made anew, scaled to fit 256x256 (never SVG: 415)",
				raw: registryapi.LogoTypes, resp: "Listing", status: "200"}},
		{http.MethodGet, "/listings/{id}/logo", anonymousOr(isv, tenant, admin), a.getLogo,
			opDoc{summary: "A visible listing's logo, the PNG the registry made (ETag: its digest; If-None-Match answers 304)", rawResp: "image/png", status: "200"}},
		{http.MethodDelete, "/listings/{id}/logo", roles(isv, admin), a.deleteLogo,
			opDoc{summary: "Remove a listing's logo (owner or admin)", status: "204"}},
		{http.MethodGet, "/listings/{id}/prices", anonymousOr(isv, tenant, admin), a.listPrices,
			opDoc{summary: "A visible listing's prices, oldest first: its history and the prices scheduled for later, each in force until the next", resp: "PriceList", status: "200"}},
		{http.MethodPost, "/listings/{id}/prices", roles(isv, admin), a.schedulePrice,
			opDoc{summary: "Set a listing's prices from now or a later time, never an earlier one (owner or admin); omitted prices stay as they would be then; replaces a price scheduled for the same time", body: "PriceCreate", resp: "Price", status: "201"}},
	}
}

// tagsRoutes: the tags of a listing's repository and the rules that make
// them immutable (a tag naming a listed version is, without a rule).
func (a *API) tagsRoutes() []route {
	return []route{
		{http.MethodGet, "/listings/{id}/tag-rules", roles(isv, admin), a.listTagRules,
			opDoc{summary: "The tag immutability rules of a listing's repository (owner or admin)", resp: "TagRuleList", status: "200"}},
		{http.MethodPost, "/listings/{id}/tag-rules", roles(isv, admin), a.addTagRule,
			opDoc{summary: "Make the repository's tags matching a pattern (Go path.Match: v*, release-*) immutable once set: pushed again only with the digest they name, never moved or deleted (owner or admin; at most 32 rules)", body: "TagRuleCreate", resp: "TagRule", status: "201"}},
		{http.MethodDelete, "/listings/{id}/tag-rules/{rule}", roles(isv, admin), a.deleteTagRule,
			opDoc{summary: "Remove a tag rule (owner or admin); tags naming listed versions stay immutable", status: "204"}},
		{http.MethodGet, "/listings/{id}/tags/{tag}", roles(isv, admin), a.getTag,
			opDoc{summary: "A tag of the listing's repository: the digest it names and whether it may still move (owner or admin)", resp: "Tag", status: "200"}},
	}
}

// entitlementsRoutes: who may run a listing.
func (a *API) entitlementsRoutes() []route {
	return []route{
		{http.MethodPost, "/listings/{id}/subscribe", roles(tenant), a.subscribe,
			opDoc{summary: "Subscribe to a published public listing (tenant); 200 when already subscribed", resp: "Entitlement", status: "201"}},
		{http.MethodPost, "/listings/{id}/shares", roles(isv, admin), a.share,
			opDoc{summary: "Share a listing with an account (owner or admin); 200 when already shared", body: "ShareCreate", resp: "Entitlement", status: "201"}},
		{http.MethodGet, "/entitlements", roles(isv, tenant, admin), a.listEntitlements,
			opDoc{summary: "List entitlements (own; isv: also to its listings; admin: all)", resp: "Entitlement", status: "200", list: true, query: []string{"listing_id", "active"}}},
		{http.MethodDelete, "/entitlements/{id}", roles(isv, tenant, admin), a.revokeEntitlement,
			opDoc{summary: "Revoke an entitlement (holder, listing owner or admin)", status: "204"}},
	}
}

// nodesRoutes: FPGA hosts, their trust and their load grants.
func (a *API) nodesRoutes() []route {
	return []route{
		{http.MethodPost, "/nodes", roles(node), a.registerNode,
			opDoc{summary: "Register a node (node role)", body: "NodeCreate", resp: "Node", status: "201"}},
		{http.MethodPost, "/nodes/{id}/heartbeat", roles(node), a.heartbeat,
			opDoc{summary: "Heartbeat of one of your nodes with its boards and slots", body: "Heartbeat", resp: "Node", status: "200"}},
		{http.MethodGet, "/nodes", roles(admin), a.listNodes,
			opDoc{summary: "List nodes (admin)", resp: "Node", status: "200", list: true}},
		{http.MethodPost, "/nodes/{id}/approve", roles(admin), a.setNodeTrust(true),
			opDoc{summary: "Approve a node: from now on keys may be released to it (admin)", resp: "Node", status: "200"}},
		{http.MethodPost, "/nodes/{id}/repin", roles(admin), a.repinNode,
			opDoc{summary: "Clear a node's pinned TLS certificate; the next one it reports is pinned (admin)", resp: "Node", status: "200"}},
		{http.MethodPost, "/nodes/{id}/revoke", roles(admin), a.setNodeTrust(false),
			opDoc{summary: "Revoke a node for good: no more key releases, heartbeats or usage; its unspent grants expire (admin)", resp: "Node", status: "200"}},
		{http.MethodPost, "/node-enrollments", roles(admin), a.createEnrollment,
			opDoc{summary: "Make a one-time enrollment token; a node registering with it is approved at once (admin)", body: "EnrollmentCreate", resp: "Enrollment", status: "201"}},
		{http.MethodPost, "/load-grants", roles(tenant, isv, admin), a.issueGrant,
			opDoc{summary: "Grant one approved node the load of one image for you (tenant: entitled images; isv: own repositories; admin); single use for the key release, valid minutes; 402 spend_limit once the tenant's spend this month has reached its limit in the listing's currency", body: "GrantCreate", resp: "Grant", status: "201", spend: true}},
		{http.MethodGet, "/loads", roles(tenant, isv, admin), a.listLoads,
			opDoc{summary: "Your own current loads: slots whose last heartbeat shows an image loaded for you", resp: "LoadPage", status: "200"}},
	}
}

// usageRoutes: what nodes ran, and its cost.
func (a *API) usageRoutes() []route {
	return []route{
		{http.MethodPost, "/usage", roles(node), a.reportUsage,
			opDoc{summary: "Report usage records of one of your nodes; idempotent by report_id", body: "UsageReport", resp: "UsageAccepted", status: "200"}},
		{http.MethodGet, "/usage/summary", roles(isv, tenant, admin), a.usageSummary,
			opDoc{summary: "Usage and cost per listing and tenant, at the prices in force when it happened (tenant: own; isv: its listings; admin: all)", resp: "UsageSummaryPage", status: "200", query: []string{"from", "to", "listing_id", "by"}}},
	}
}

// statementsRoutes: monthly invoices and revenue statements.
func (a *API) statementsRoutes() []route {
	return []route{
		{http.MethodGet, "/invoices", roles(tenant, admin), a.invoices,
			opDoc{summary: "Invoices of a month (default the month running), one per tenant and currency (tenant: own; admin: all or ?tenant_id=); stored lines once the month is closed, else a preview of its close; CSV with ?format=csv or Accept: text/csv", resp: "InvoiceList", status: "200", query: []string{"month", "tenant_id", "format"}}},
		{http.MethodGet, "/revenue-statements", roles(isv, admin), a.revenueStatements,
			opDoc{summary: "ISVs' revenue statements of a month, one per ISV and currency: gross, platform fee, net (isv: own; admin: all or ?isv_id=); CSV with ?format=csv or Accept: text/csv", resp: "RevenueStatementList", status: "200", query: []string{"month", "isv_id", "format"}}},
		{http.MethodPost, "/months/{month}/close", roles(admin), a.closeMonth,
			opDoc{summary: "Close a month that has ended, after the one before it (admin): its invoice lines, and adjustments for usage of earlier months reported since, are stored for good", resp: "MonthClosed", status: "200"}},
	}
}

// auditRoutes: the audit log.
func (a *API) auditRoutes() []route {
	return []route{
		{http.MethodGet, "/audit", roles(isv, admin), a.listAudit,
			opDoc{summary: "Audit log, newest first (admin: all; isv: entries about its listings and signing keys, and its own actions)", resp: "AuditEntry", status: "200", list: true, query: []string{"action", "target_type", "target_id", "actor"}}},
	}
}

// attachmentsRoutes: the accelerator pool (sdk/poolapi).
func (a *API) attachmentsRoutes() []route {
	return []route{
		{http.MethodPost, "/attachments", roles(tenant), a.createAttachment,
			opDoc{summary: "Attach an accelerator of the pool running a listing's image (tenant, entitled): placed on a node at once, on chips of the part the image was validated for and outside exclude_nodes (409 naming the part when none is free), ready when the node has loaded it; the credential is shown once; 402 spend_limit once your spend this month has reached your limit in the listing's currency", body: "AttachRequest", resp: "Attachment", status: "201", spend: true}},
		{http.MethodGet, "/attachments", roles(tenant, admin), a.listAttachments,
			opDoc{summary: "Your attachments, live and ended within a day, newest first (admin with ?all=true: everyone's)", resp: "AttachmentList", status: "200", query: []string{"all"}}},
		{http.MethodGet, "/attachments/{id}", roles(tenant, admin), a.getAttachment,
			opDoc{summary: "One attachment; with ?wait= (at most 60s) and ?since=STATE, answers once its state differs from STATE", resp: "Attachment", status: "200", query: []string{"wait", "since"}}},
		{http.MethodPost, "/attachments/{id}/renew", roles(tenant), a.renewAttachment,
			opDoc{summary: "Renew a live attachment's lease by its lease_seconds; 410 attachment_ended when it has ended; 402 spend_limit once your spend this month has reached your limit in the listing's currency (the attachment then runs until its lease ends)", resp: "Attachment", status: "200", spend: true}},
		{http.MethodDelete, "/attachments/{id}", roles(tenant, admin), a.detachAttachment,
			opDoc{summary: "Detach: end the attachment at once (the node ends its sessions and releases the slot)", resp: "Attachment", status: "200"}},
		{http.MethodGet, "/nodes/{id}/assignments", roles(node), a.assignments,
			opDoc{summary: "One of your node's assignments: its live attachments and the ended ones not yet released; with ?since=REV&wait=, answers once the revision passes REV", resp: "Assignments", status: "200", query: []string{"since", "wait"}}},
		{http.MethodPost, "/nodes/{id}/attachments/{aid}/grant", roles(node), a.attachmentGrant,
			opDoc{summary: "A load grant of a live attachment's image for its tenant, to your node (a few per attachment)", resp: "Grant", status: "201"}},
		{http.MethodPost, "/nodes/{id}/attachments/{aid}/state", roles(node), a.reportAttachment,
			opDoc{summary: "Report an attachment of your node: loading, ready (with its slots), failed (with a message for the tenant) or, once ended, released", body: "StateReport", status: "204"}},
	}
}

// validationRoutes: the validation queue.
func (a *API) validationRoutes() []route {
	return []route{
		{http.MethodGet, "/validation-jobs", roles(admin), a.listValidationJobs,
			opDoc{summary: "The validation queue, newest first, with attempts and reasons (admin)", resp: "ValidationJob", status: "200", list: true, query: []string{"state"}}},
	}
}

// webhooksRoutes: the caller's webhooks and their delivery logs (package
// webhooks delivers).
func (a *API) webhooksRoutes() []route {
	own := roles(isv, tenant, admin)
	return []route{
		{http.MethodPost, "/webhooks", own, a.createWebhook,
			opDoc{summary: "Register a webhook for your account's events (https; at most 10 per account); the signing secret is shown once", body: "WebhookCreate", resp: "Webhook", status: "201"}},
		{http.MethodGet, "/webhooks", own, a.listWebhooks,
			opDoc{summary: "Your webhooks", resp: "Webhook", status: "200", list: true}},
		{http.MethodGet, "/webhooks/{id}", own, a.getWebhook,
			opDoc{summary: "One of your webhooks", resp: "Webhook", status: "200"}},
		{http.MethodPatch, "/webhooks/{id}", own, a.updateWebhook,
			opDoc{summary: "Change one of your webhooks: URL, description, events, active", body: "WebhookUpdate", resp: "Webhook", status: "200"}},
		{http.MethodDelete, "/webhooks/{id}", own, a.deleteWebhook,
			opDoc{summary: "Delete one of your webhooks with its delivery log", status: "204"}},
		{http.MethodGet, "/webhooks/{id}/deliveries", own, a.listDeliveries,
			opDoc{summary: "A webhook's deliveries, newest first, with their last attempt", resp: "WebhookDelivery", status: "200", list: true}},
		{http.MethodPost, "/webhooks/{id}/deliveries/{delivery}/redeliver", own, a.redeliver,
			opDoc{summary: "Send a delivery's event again, as a new delivery (409 while one of that event is queued)", resp: "WebhookDelivery", status: "202"}},
	}
}

// notificationsRoutes: the caller's events, as the portal lists them.
func (a *API) notificationsRoutes() []route {
	own := roles(isv, tenant, admin)
	return []route{
		{http.MethodGet, "/notifications", own, a.listNotifications,
			opDoc{summary: "Your account's events, newest first (?unread=true: only those not marked read)", resp: "Notification", status: "200", list: true, query: []string{"unread"}}},
		{http.MethodPost, "/notifications/{id}/read", own, a.markNotificationRead,
			opDoc{summary: "Mark one of your notifications read", status: "204"}},
	}
}
