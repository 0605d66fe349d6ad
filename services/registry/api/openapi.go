package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

// op documents one operation of the OpenAPI document. The document is
// written by hand here (not derived from the router); a test checks that
// both list the same method+path pairs.
type op struct {
	method, path, summary, tag string
	anonymous                  bool
	body                       string // schema name of the request body, or ""
	resp                       string // schema name of the 2xx response, or ""
	status                     string // 2xx status
	list                       bool   // paginated
	query                      []string
}

var ops = []op{
	{method: "get", path: "/openapi.json", summary: "This OpenAPI document", tag: "meta", anonymous: true, status: "200"},
	{method: "get", path: "/me", summary: "The authenticated account", tag: "accounts", resp: "Account", status: "200"},
	{method: "post", path: "/accounts", summary: "Create an account (admin)", tag: "accounts", body: "AccountCreate", resp: "Account", status: "201"},
	{method: "get", path: "/accounts", summary: "List accounts (admin)", tag: "accounts", resp: "Account", status: "200", list: true, query: []string{"role"}},
	{method: "patch", path: "/accounts/{id}", summary: "Change an account's role or disable/enable it (admin; not your own account; node accounts keep their role; an isv owning listings stays one)", tag: "accounts", body: "AccountUpdate", resp: "Account", status: "200"},
	{method: "post", path: "/tokens", summary: "Create an API token for yourself; the secret is shown once", tag: "tokens", body: "TokenCreate", resp: "Token", status: "201"},
	{method: "get", path: "/tokens", summary: "List your API tokens", tag: "tokens", resp: "Token", status: "200", list: true},
	{method: "delete", path: "/tokens/{id}", summary: "Revoke one of your API tokens", tag: "tokens", status: "204"},
	{method: "post", path: "/keys", summary: "Register an ECDSA P-256 signing key (isv)", tag: "keys", body: "KeyCreate", resp: "SigningKey", status: "201"},
	{method: "get", path: "/keys", summary: "List signing keys (isv: own; admin: all or ?account_id=)", tag: "keys", resp: "SigningKey", status: "200", list: true, query: []string{"account_id"}},
	{method: "get", path: "/signing-keys", summary: "Unrevoked signing keys of the ISV owning a repository (any account; nodes check ISV signatures with them)", tag: "keys", resp: "RepositoryKeys", status: "200", query: []string{"repository"}},
	{method: "post", path: "/keys/{id}/revoke", summary: "Revoke a signing key (isv: own; admin: any)", tag: "keys", resp: "SigningKey", status: "200"},
	{method: "post", path: "/listings", summary: "Create a listing (isv)", tag: "listings", body: "ListingCreate", resp: "Listing", status: "201"},
	{method: "get", path: "/listings", summary: "List visible listings (anonymous: published public ones)", tag: "listings", anonymous: true, resp: "Listing", status: "200", list: true, query: []string{"category", "board", "owner", "q", "published"}},
	{method: "get", path: "/listings/{id}", summary: "Get a visible listing", tag: "listings", anonymous: true, resp: "Listing", status: "200"},
	{method: "patch", path: "/listings/{id}", summary: "Update a listing (owner or admin)", tag: "listings", body: "ListingUpdate", resp: "Listing", status: "200"},
	{method: "post", path: "/listings/{id}/publish", summary: "Publish a listing (owner or admin)", tag: "listings", resp: "Listing", status: "200"},
	{method: "post", path: "/listings/{id}/unpublish", summary: "Unpublish a listing (owner or admin)", tag: "listings", resp: "Listing", status: "200"},
	{method: "post", path: "/listings/{id}/versions", summary: "Add a version pointing at a manifest of the listing's repository", tag: "listings", body: "VersionCreate", resp: "Version", status: "201"},
	{method: "get", path: "/listings/{id}/versions", summary: "List versions with their validation state", tag: "listings", resp: "Version", status: "200", list: true},
	{method: "post", path: "/listings/{id}/subscribe", summary: "Subscribe to a published public listing (tenant); 200 when already subscribed", tag: "entitlements", resp: "Entitlement", status: "201"},
	{method: "post", path: "/listings/{id}/shares", summary: "Share a listing with an account (owner or admin); 200 when already shared", tag: "entitlements", body: "ShareCreate", resp: "Entitlement", status: "201"},
	{method: "get", path: "/entitlements", summary: "List entitlements (own; isv: also to its listings; admin: all)", tag: "entitlements", resp: "Entitlement", status: "200", list: true, query: []string{"listing_id", "active"}},
	{method: "delete", path: "/entitlements/{id}", summary: "Revoke an entitlement (holder, listing owner or admin)", tag: "entitlements", status: "204"},
	{method: "post", path: "/nodes", summary: "Register a node (node role)", tag: "nodes", body: "NodeCreate", resp: "Node", status: "201"},
	{method: "post", path: "/nodes/{id}/heartbeat", summary: "Heartbeat of one of your nodes with its boards and slots", tag: "nodes", body: "Heartbeat", resp: "Node", status: "200"},
	{method: "get", path: "/nodes", summary: "List nodes (admin)", tag: "nodes", resp: "Node", status: "200", list: true},
	{method: "post", path: "/nodes/{id}/approve", summary: "Approve a node: from now on keys may be released to it (admin)", tag: "nodes", resp: "Node", status: "200"},
	{method: "post", path: "/nodes/{id}/repin", summary: "Clear a node's pinned TLS certificate; the next one it reports is pinned (admin)", tag: "nodes", resp: "Node", status: "200"},
	{method: "post", path: "/nodes/{id}/revoke", summary: "Revoke a node for good: no more key releases, heartbeats or usage; its unspent grants expire (admin)", tag: "nodes", resp: "Node", status: "200"},
	{method: "post", path: "/node-enrollments", summary: "Make a one-time enrollment token; a node registering with it is approved at once (admin)", tag: "nodes", body: "EnrollmentCreate", resp: "Enrollment", status: "201"},
	{method: "post", path: "/load-grants", summary: "Grant one approved node the load of one image for you (tenant: entitled images; isv: own repositories; admin); single use for the key release, valid minutes", tag: "nodes", body: "GrantCreate", resp: "Grant", status: "201"},
	{method: "post", path: "/usage", summary: "Report usage records of one of your nodes; idempotent by report_id", tag: "usage", body: "UsageReport", resp: "UsageAccepted", status: "200"},
	{method: "get", path: "/usage/summary", summary: "Usage and cost per listing and tenant (tenant: own; isv: its listings; admin: all)", tag: "usage", resp: "UsageSummaryPage", status: "200", query: []string{"from", "to", "listing_id", "by"}},
	{method: "get", path: "/audit", summary: "Audit log, newest first (admin: all; isv: entries about its listings and signing keys, and its own actions)", tag: "audit", resp: "AuditEntry", status: "200", list: true, query: []string{"action", "target_type", "target_id", "actor"}},
	{method: "post", path: "/attachments", summary: "Attach an accelerator of the pool running a listing's image (tenant, entitled): placed on a node at once, on chips of the part the image was validated for and outside exclude_nodes (409 naming the part when none is free), ready when the node has loaded it; the credential is shown once", tag: "attachments", body: "AttachRequest", resp: "Attachment", status: "201"},
	{method: "get", path: "/attachments", summary: "Your attachments, live and ended within a day, newest first (admin with ?all=true: everyone's)", tag: "attachments", resp: "AttachmentList", status: "200", query: []string{"all"}},
	{method: "get", path: "/attachments/{id}", summary: "One attachment; with ?wait= (at most 60s) and ?since=STATE, answers once its state differs from STATE", tag: "attachments", resp: "Attachment", status: "200", query: []string{"wait", "since"}},
	{method: "post", path: "/attachments/{id}/renew", summary: "Renew a live attachment's lease by its lease_seconds; 410 attachment_ended when it has ended", tag: "attachments", resp: "Attachment", status: "200"},
	{method: "delete", path: "/attachments/{id}", summary: "Detach: end the attachment at once (the node ends its sessions and releases the slot)", tag: "attachments", resp: "Attachment", status: "200"},
	{method: "get", path: "/nodes/{id}/assignments", summary: "One of your node's assignments: its live attachments and the ended ones not yet released; with ?since=REV&wait=, answers once the revision passes REV", tag: "attachments", resp: "Assignments", status: "200", query: []string{"since", "wait"}},
	{method: "post", path: "/nodes/{id}/attachments/{aid}/grant", summary: "A load grant of a live attachment's image for its tenant, to your node (a few per attachment)", tag: "attachments", resp: "Grant", status: "201"},
	{method: "post", path: "/nodes/{id}/attachments/{aid}/state", summary: "Report an attachment of your node: loading, ready (with its slots), failed (with a message for the tenant) or, once ended, released", tag: "attachments", body: "StateReport", status: "204"},
	{method: "get", path: "/validation-jobs", summary: "The validation queue, newest first, with attempts and reasons (admin)", tag: "validation", resp: "ValidationJob", status: "200", list: true, query: []string{"state"}},
	{method: "get", path: "/loads", summary: "Your own current loads: slots whose last heartbeat shows an image loaded for you", tag: "nodes", resp: "LoadPage", status: "200"},
}

type obj = map[string]any

func props(kv ...any) obj {
	p := obj{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

var (
	tStr  = obj{"type": "string"}
	tInt  = obj{"type": "integer", "format": "int64"}
	tBool = obj{"type": "boolean"}
	tTime = obj{"type": "string", "format": "date-time"}
	tID   = obj{"type": "string", "format": "uuid"}
	tAny  = obj{}
)

func schema(required []string, p obj) obj {
	s := obj{"type": "object", "properties": p, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func enum(v ...string) obj { return obj{"type": "string", "enum": v} }

var listingProps = props("name", tStr, "summary", tStr, "description", tStr, "category", tStr, "board_model", tStr,
	"currency", obj{"type": "string", "pattern": "^[A-Z]{3}$"}, "price_per_hour_micros", tInt, "price_per_load_micros", tInt,
	"visibility", enum("private", "shared", "public"))

func schemas() obj {
	lc := obj{}
	for k, v := range listingProps {
		lc[k] = v
	}
	lc["repository"] = obj{"type": "string", "description": "repository under the ISV's namespace: NAME/..."}
	listing := obj{}
	for k, v := range lc {
		listing[k] = v
	}
	for k, v := range props("id", tID, "owner_id", tID, "owner", tStr, "published", tBool, "validated", tBool, "created_at", tTime, "updated_at", tTime) {
		listing[k] = v
	}
	return obj{
		"Error": schema([]string{"error"}, props("error", schema([]string{"code", "message"},
			props("code", tStr, "message", tStr, "field", tStr)))),
		"Account":       schema(nil, props("id", tID, "name", tStr, "role", enum("isv", "tenant", "admin", "node"), "disabled", tBool, "created_at", tTime)),
		"AccountCreate": schema([]string{"name", "role"}, props("name", tStr, "role", enum("isv", "tenant", "admin", "node"), "password", tStr)),
		"AccountUpdate": schema(nil, props("role", enum("isv", "tenant", "admin"), "disabled", tBool)),
		"ValidationJob": schema(nil, props("id", tID, "repository", tStr, "digest", tStr, "listing_id", tID, "listing_name", tStr,
			"state", enum("pending", "validating", "available", "failed"), "attempts", tInt, "max_attempts", tInt,
			"reasons", obj{"type": "array", "items": tAny}, "run_after", tTime, "lease_until", tTime, "created_at", tTime,
			"updated_at", tTime, "finished_at", tTime)),
		"LoadPage": schema(nil, props("items", obj{"type": "array", "items": schema(nil, props("node_id", tID, "hostname", tStr,
			"board", tStr, "slot", tInt, "state", enum("loading", "loaded", "busy"), "digest", tStr, "listing_id", tID,
			"listing_name", tStr, "loaded_at", tTime, "last_heartbeat_at", tTime))})),
		"Token":          schema(nil, props("id", tID, "name", tStr, "secret", tStr, "created_at", tTime, "expires_at", tTime, "last_used_at", tTime, "revoked_at", tTime)),
		"TokenCreate":    schema(nil, props("name", tStr, "expires_at", tTime)),
		"RepositoryKeys": schema(nil, props("repository", tStr, "isv", tStr, "keys", obj{"type": "array", "items": ref("SigningKey")})),
		"SigningKey":     schema(nil, props("id", tID, "account_id", tID, "key_id", tStr, "algorithm", tStr, "public_key", tStr, "created_at", tTime, "revoked_at", tTime)),
		"KeyCreate":      schema([]string{"public_key"}, props("public_key", obj{"type": "string", "description": "PEM PUBLIC KEY, ECDSA P-256"})),
		"Listing":        schema(nil, listing),
		"ListingCreate":  schema([]string{"name", "repository"}, lc),
		"ListingUpdate":  schema(nil, listingProps),
		"Version": schema(nil, props("version", tStr, "digest", tStr, "state", enum("pending", "validating", "available", "failed"),
			"reasons", obj{"type": "array", "items": tAny}, "attempts", tInt, "created_at", tTime, "validated_at", tTime)),
		"VersionCreate": schema([]string{"version", "digest"}, props("version", tStr, "digest", tStr)),
		"Entitlement": schema(nil, props("id", tID, "listing_id", tID, "listing_name", tStr, "account_id", tID, "account", tStr,
			"kind", enum("subscription", "purchase", "share"), "granted_by", tID, "created_at", tTime, "expires_at", tTime, "revoked_at", tTime)),
		"ShareCreate": schema([]string{"account"}, props("account", obj{"type": "string", "description": "account name"})),
		"Node": schema(nil, props("id", tID, "account_id", tID, "hostname", tStr, "public_key", tStr,
			"boards", obj{"type": "array", "items": obj{"$ref": "#/components/schemas/Board"}}, "registered_at", tTime, "last_heartbeat_at", tTime,
			"approved_at", tTime, "approved_by", tStr, "revoked_at", tTime, "endpoint", tStr, "tls_certificate", tStr, "server_name", tStr)),
		"NodeCreate": schema([]string{"hostname", "public_key"}, props("hostname", tStr,
			"public_key", obj{"type": "string", "description": "X25519 public key: base64 of 32 bytes, or PEM PUBLIC KEY"},
			"enrollment_token", obj{"type": "string", "description": "one-time token from POST /node-enrollments; approves the node at once"})),
		"EnrollmentCreate": schema(nil, props("ttl_seconds", tInt)),
		"Enrollment":       schema(nil, props("id", tID, "token", obj{"type": "string", "description": "shown once"}, "expires_at", tTime)),
		"GrantCreate":      schema([]string{"node_id", "repository", "digest"}, props("node_id", tID, "repository", tStr, "digest", tStr)),
		"Grant": schema(nil, props("id", tID, "grant", obj{"type": "string", "description": "the secret the node presents to /keys/release; shown once"},
			"tenant_id", tID, "node_id", tID, "repository", tStr, "digest", tStr, "listing_id", tID, "expires_at", tTime)),
		"Board": schema([]string{"model"}, props("model", tStr, "slots", obj{"type": "array", "items": schema([]string{"index", "state"},
			props("index", tInt, "state", enum("cleared", "loading", "loaded", "busy", "failed"), "digest", tStr, "reason", tStr,
				"part", obj{"type": "string", "maxLength": 64, "description": "the chip's FPGA part; default the part the board model of shell v1 has there. Placement puts an image only on chips of the part it was validated for"}))})),
		"Heartbeat": schema(nil, props("boards", obj{"type": "array", "items": obj{"$ref": "#/components/schemas/Board"}},
			"endpoint", tStr, "tls_certificate", tStr)),
		"UsageReport": schema([]string{"node_id", "records"}, props("node_id", tID, "records", obj{"type": "array", "items": schema(
			[]string{"report_id", "tenant_id", "grant_id", "event"}, props("report_id", tStr, "tenant_id", tID, "grant_id", tID, "listing_id", tID, "digest", tStr,
				"board", tStr, "slot", tInt, "event", enum("load", "clear", "busy"), "busy_ns", tInt, "started_at", tTime, "ended_at", tTime))})),
		"UsageAccepted": schema(nil, props("accepted", tInt, "duplicates", tInt)),
		"UsageSummaryPage": schema(nil, props("total_micros", tInt, "items", obj{"type": "array", "items": schema(nil, props(
			"day", obj{"type": "string", "format": "date", "description": "with ?by=day"}, "listing_id", tID, "listing_name", tStr, "tenant_id", tID, "tenant", tStr, "currency", tStr, "loads", tInt, "clears", tInt,
			"busy_ns", tInt, "attachments", tInt, "attached_ns", tInt, "price_per_hour_micros", tInt, "price_per_load_micros", tInt, "load_cost_micros", tInt,
			"time_cost_micros", tInt, "total_micros", tInt))})),
		"AttachRequest": schema([]string{"listing"}, props("listing", obj{"type": "string", "description": "listing id or its repository"},
			"version", obj{"type": "string", "description": "a version of the listing; default the newest"}, "share", tBool,
			"lease_seconds", obj{"type": "integer", "minimum": 2, "maximum": 600, "description": "default 30"},
			"exclude_nodes", obj{"type": "array", "maxItems": 32, "items": tID, "description": "node ids not to place on (where an earlier attempt failed)"})),
		"Attachment": schema(nil, props("id", tID, "tenant", tStr, "listing_id", tID, "listing", tStr, "version", tStr, "repository", tStr,
			"digest", tStr, "share", tBool, "state", enum("pending", "loading", "ready", "failed", "detached", "expired", "lost"), "error", tStr,
			"warm", tBool, "node_id", tID, "node", tStr, "endpoint", tStr, "server_name", tStr, "tls_certificate", tStr, "slot", tInt,
			"credential", obj{"type": "string", "description": "faasa_…; only in the answer that creates the attachment"},
			"lease_seconds", tInt, "lease_expires_at", tTime, "created_at", tTime, "ready_at", tTime, "ended_at", tTime)),
		"AttachmentList": schema(nil, props("attachments", obj{"type": "array", "items": ref("Attachment")})),
		"Assignments": schema(nil, props("revision", tInt, "assignments", obj{"type": "array", "items": schema(nil, props(
			"id", tID, "tenant_id", tID, "tenant", tStr, "repository", tStr, "digest", tStr, "slot", tInt, "chips", tInt, "share", tBool,
			"credential_sha256", tStr, "state", enum("pending", "loading", "ready", "failed", "detached", "expired", "lost"), "keep_warm", tBool))})),
		"StateReport": schema([]string{"state"}, props("state", enum("loading", "ready", "failed", "released"),
			"slots", obj{"type": "array", "items": tInt}, "error", tStr, "scrubbed", tBool)),
		"AuditEntry": schema(nil, props("id", tInt, "at", tTime, "actor_id", tID, "actor", tStr, "action", tStr, "target_type", tStr,
			"target_id", tStr, "outcome", tStr, "request_id", tStr, "remote_addr", tStr, "details", obj{"type": "object"})),
	}
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func errResp(desc string) obj {
	return obj{"description": desc, "content": obj{"application/json": obj{"schema": ref("Error")}}}
}

// unavailableResp documents the 503 every operation may answer, code
// "unavailable": too many password checks at once, or the database cannot
// serve requests for now (out of disk space, read-only, unreachable, …;
// the message names the cause). Either way the remedy is to retry after
// Retry-After seconds.
func unavailableResp() obj {
	r := errResp("temporarily unavailable (code \"unavailable\"): too many password checks at once, or the database " +
		"cannot serve requests for now; the message names the cause (\"the database is out of disk space\", " +
		"\"the database is read-only\", \"the database is unreachable\", …). Retry after Retry-After seconds.")
	r["headers"] = obj{"Retry-After": obj{"description": "seconds to wait before retrying",
		"schema": obj{"type": "integer", "minimum": 1}}}
	return r
}

// Document returns the OpenAPI 3.1 document of the API.
func Document() []byte {
	docOnce.Do(func() {
		paths := obj{}
		for _, o := range ops {
			item, _ := paths[o.path].(obj)
			if item == nil {
				item = obj{}
				paths[o.path] = item
			}
			var params []any
			if strings.Contains(o.path, "{id}") {
				params = append(params, obj{"name": "id", "in": "path", "required": true, "schema": tID})
			}
			for _, q := range o.query {
				params = append(params, obj{"name": q, "in": "query", "schema": tStr})
			}
			if o.list {
				params = append(params, obj{"name": "limit", "in": "query", "schema": obj{"type": "integer", "minimum": 1, "maximum": MaxLimit}},
					obj{"name": "cursor", "in": "query", "schema": tStr})
			}
			ok := obj{"description": "success"}
			if o.resp != "" {
				s := ref(o.resp)
				if o.list {
					s = schema(nil, props("items", obj{"type": "array", "items": ref(o.resp)}, "next_cursor", tStr))
				}
				ok["content"] = obj{"application/json": obj{"schema": s}}
			}
			responses := obj{o.status: ok, "400": errResp("malformed request"), "422": errResp("invalid field"),
				"404": errResp("not found or not visible"), "500": errResp("internal error"),
				// Any request may carry a password, anonymous routes too.
				"429": errResp("too many failed password checks for this account or address; see Retry-After"),
				"503": unavailableResp()}
			if !o.anonymous {
				responses["401"] = errResp("no or invalid credentials")
				responses["403"] = errResp("forbidden for this role or account")
			}
			operation := obj{"summary": o.summary, "tags": []string{o.tag}, "responses": responses,
				"operationId": o.method + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(o.path)}
			if params != nil {
				operation["parameters"] = params
			}
			if o.body != "" {
				operation["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref(o.body)}}}
			}
			if o.anonymous {
				operation["security"] = []any{obj{}, obj{"basic": []string{}}, obj{"token": []string{}}}
			}
			item[o.method] = operation
		}
		doc := obj{
			"openapi": "3.1.0",
			"info": obj{"title": "faas registry marketplace API", "version": "1",
				"description": "Marketplace control plane of the faas registry. Authenticate with HTTP Basic (name and password, or an API token as password) or Authorization: Bearer faas_… (API token). Errors are {\"error\":{\"code\",\"message\",\"field\"}}."},
			"servers":  []any{obj{"url": registryapi.Prefix}},
			"paths":    paths,
			"security": []any{obj{"basic": []string{}}, obj{"token": []string{}}},
			"components": obj{
				"schemas": schemas(),
				"securitySchemes": obj{
					"basic": obj{"type": "http", "scheme": "basic"},
					"token": obj{"type": "http", "scheme": "bearer", "description": "API token faas_…"},
				},
			},
		}
		docBytes, _ = json.Marshal(doc)
	})
	return docBytes
}

var (
	docOnce  sync.Once
	docBytes []byte
)

func (a *API) openAPI(c echo.Context, _ *principal) error {
	return c.Blob(http.StatusOK, "application/json", Document())
}
