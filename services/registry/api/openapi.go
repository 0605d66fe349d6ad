package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

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

var listingProps = props("name", tStr, "summary", tStr, "description", tStr, "category", enum(registryapi.Categories...), "board_model", tStr,
	"currency", obj{"type": "string", "pattern": "^[A-Z]{3}$"}, "price_per_hour_micros", tPrice, "price_per_load_micros", tPrice,
	"price_per_attached_hour_micros", tPrice, "visibility", enum("private", "shared", "public"),
	"trial_hours", obj{"type": "integer", "minimum": 0, "maximum": registryapi.MaxTrialHours,
		"description": "each tenant's first hours of loaded and attached time, in total, are free (a trial_hour line of amount 0)"})

// tSpend is a spend limit or alert, micro-units; null: none.
var tSpend = obj{"type": []string{"integer", "null"}, "minimum": 0, "maximum": registryapi.MaxSpendMicros}

var spendLimitSchema = schema(nil, props("currency", tStr, "spend_micros", tInt, "alert_micros", tSpend, "limit_micros", tSpend,
	"reached", obj{"type": "boolean", "description": "spend_micros has reached limit_micros: new loads and attachments answer 402 spend_limit"},
	"updated_at", tTime))

// tPrice is an amount of a price, in micro-units of the listing's currency.
var tPrice = obj{"type": "integer", "minimum": 0, "maximum": registryapi.MaxPriceMicros}

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
	for k, v := range props("id", tID, "owner_id", tID, "owner", tStr, "published", tBool, "validated", tBool,
		"logo_digest", obj{"type": "string", "description": "sha256:<hex> of the logo at /listings/{id}/logo; absent without one"},
		"created_at", tTime, "updated_at", tTime) {
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
		"KeyRelease": schema([]string{"node_id", "repository", "digest", "grant"}, props("node_id", tID, "tenant_id", tID, "tenant", tStr,
			"repository", tStr, "digest", tStr, "grant", obj{"type": "string", "description": "the secret of a load grant for this node and image (POST /load-grants)"})),
		"KeyReleaseResult": schema(nil, props("wrapped_keys", obj{"type": "array", "items": schema(nil, props("chip", tStr, "layer", tStr,
			"key_id", tStr, "wrapped_key", obj{"type": "string", "description": "base64 of the data key wrapped to the node's X25519 key"}))})),
		"Listing":       schema(nil, listing),
		"Catalog":       catalogSchema(listing),
		"ListingCreate": schema([]string{"name", "repository"}, lc),
		"ListingUpdate": schema(nil, listingProps),
		"Version": schema(nil, props("version", tStr, "digest", tStr, "state", enum("pending", "validating", "available", "failed"),
			"reasons", obj{"type": "array", "items": tAny}, "attempts", tInt, "created_at", tTime, "validated_at", tTime, "loads_30d", tInt)),
		"Price": schema(nil, props("effective_at", tTime, "per_load_micros", tPrice, "per_hour_micros", tPrice,
			"per_attached_hour_micros", tPrice, "created_at", tTime)),
		"PriceList": schema(nil, props("items", obj{"type": "array", "items": ref("Price")})),
		"PriceCreate": schema(nil, props("effective_at", obj{"type": "string", "format": "date-time", "description": "default now; never in the past"},
			"per_load_micros", tPrice, "per_hour_micros", tPrice, "per_attached_hour_micros", tPrice)),
		"VersionDocs":       schema(nil, props("version", tStr, "markdown", tStr, "updated_at", tTime)),
		"VersionDocsUpdate": schema([]string{"markdown"}, props("markdown", obj{"type": "string", "maxLength": registryapi.MaxDocsBytes})),
		"VersionCreate":     schema([]string{"version", "digest"}, props("version", tStr, "digest", tStr)),
		"TagRule":           schema(nil, props("id", tID, "pattern", tStr, "created_at", tTime)),
		"TagRuleCreate":     schema([]string{"pattern"}, props("pattern", obj{"type": "string", "maxLength": 128, "description": "Go path.Match pattern over tag names: v*, release-*, v[0-9]*"})),
		"TagRuleList":       schema(nil, props("items", obj{"type": "array", "items": ref("TagRule")})),
		"Tag": schema(nil, props("name", tStr, "digest", obj{"type": "string", "description": "the digest the tag names; absent when unset"},
			"immutable", obj{"type": "boolean", "description": "a push of another image, or a delete, would be refused (409)"},
			"reason", obj{"type": "string", "description": "why: the listed version or the rule"})),
		"Entitlement": schema(nil, props("id", tID, "listing_id", tID, "listing_name", tStr, "account_id", tID, "account", tStr,
			"kind", enum("subscription", "purchase", "share"), "granted_by", tID, "created_at", tTime, "expires_at", tTime, "revoked_at", tTime)),
		"ShareCreate": schema([]string{"account"}, props("account", obj{"type": "string", "description": "account name"})),
		"SpendLimit":  spendLimitSchema,
		"SpendLimits": schema(nil, props("tenant", tStr, "month", obj{"type": "string", "description": "YYYY-MM, UTC"},
			"items", obj{"type": "array", "items": spendLimitSchema})),
		"SpendLimitUpdate": schema(nil, props("alert_micros", tSpend, "limit_micros", tSpend)),
	}
}

// allSchemas is every schema of the document.
func allSchemas() obj {
	s := schemas()
	maps.Copy(s, nodeSchemas())
	maps.Copy(s, webhookSchemas())
	return s
}

// nodeSchemas are the schemas of nodes, grants, usage and money, the
// pool's attachments and the audit log.
func nodeSchemas() obj {
	return obj{
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
			"busy_ns", tInt, "attachments", tInt, "attached_ns", tInt, "price_per_hour_micros", tPrice, "price_per_load_micros", tPrice,
			"price_per_attached_hour_micros", tPrice, "load_cost_micros", tInt, "time_cost_micros", tInt, "attached_cost_micros", tInt, "total_micros", tInt))})),
		"StatementLine": schema(nil, props("for_month", obj{"type": "string", "description": "YYYY-MM of the usage; before the statement's month on an adjustment"},
			"listing_id", tID, "listing", tStr, "version", tStr, "unit", enum(registryapi.UnitLoad, registryapi.UnitLoadedHour, registryapi.UnitAttachedHour, registryapi.UnitTrialHour),
			"quantity", obj{"type": "integer", "description": "loads, or nanoseconds for the hourly units"}, "amount_micros", tInt)),
		"InvoiceList": schema(nil, props("items", obj{"type": "array", "items": schema(nil, props("month", tStr, "tenant_id", tID, "tenant", tStr,
			"currency", tStr, "closed", tBool, "closed_at", tTime, "lines", obj{"type": "array", "items": ref("StatementLine")}, "total_micros", tInt))})),
		"RevenueStatementList": schema(nil, props("items", obj{"type": "array", "items": schema(nil, props("month", tStr, "isv_id", tID, "isv", tStr,
			"currency", tStr, "closed", tBool, "closed_at", tTime, "lines", obj{"type": "array", "items": ref("StatementLine")},
			"gross_micros", tInt, "fee_basis_points", tInt, "fee_micros", tInt, "net_micros", tInt))})),
		"MonthClosed": schema(nil, props("month", tStr, "closed_at", tTime, "fee_basis_points", tInt, "lines", tInt)),
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

// webhookSchemas are the schemas of webhooks and notifications.
func webhookSchemas() obj {
	events := obj{"type": "array", "minItems": 1, "items": enum(registryapi.EventTypes...)}
	url := obj{"type": "string", "maxLength": registryapi.MaxWebhookURLLength, "description": "https (http only to loopback where the registry allows it); private, loopback and link-local addresses are refused"}
	desc := obj{"type": "string", "maxLength": registryapi.MaxWebhookDescription}
	return obj{
		"Webhook": schema(nil, props("id", tID, "url", tStr, "description", tStr, "events", events, "active", tBool,
			"secret", obj{"type": "string", "description": "whsec_…, signs deliveries (Faas-Signature); only in the answer that creates the webhook"},
			"created_at", tTime, "updated_at", tTime)),
		"WebhookCreate": schema([]string{"url", "events"}, props("url", url, "description", desc, "events", events)),
		"WebhookUpdate": schema(nil, props("url", url, "description", desc, "events", events, "active", tBool)),
		"WebhookDelivery": schema(nil, props("id", tID, "webhook_id", tID, "event_id", tID, "event_type", tStr, "redelivery_of", tID,
			"state", enum("pending", "delivering", "succeeded", "failed"), "attempts", tInt, "next_attempt_at", tTime,
			"status_code", tInt, "duration_ms", tInt, "error", tStr, "created_at", tTime, "updated_at", tTime)),
		"Notification": schema(nil, props("id", tID, "type", enum(registryapi.EventTypes...), "data", obj{"type": "object"},
			"created_at", tTime, "read_at", tTime)),
	}
}

// catalogSchema is registryapi.Catalog's: listings as found, with their
// loads, and the facets' counts.
func catalogSchema(listing obj) obj {
	item := obj{"loads_30d": tInt, "vendor_verified": tBool}
	for k, v := range listing {
		item[k] = v
	}
	facet := obj{"type": "array", "items": schema(nil, props("value", tStr, "count", tInt, "selected", tBool))}
	return schema(nil, props("items", obj{"type": "array", "items": schema(nil, item)}, "total", tInt, "offset", tInt,
		"limit", tInt, "sort", enum(registryapi.CatalogSorts...),
		"facets", schema(nil, props("category", facet, "board", facet, "price", facet))))
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
		for _, res := range (&API{}).resources() {
			for _, rt := range res.routes {
				addOperation(paths, res.tag, rt)
			}
		}
		doc := obj{
			"openapi": "3.1.0",
			"info": obj{"title": "faas registry marketplace API", "version": "1",
				"description": "Marketplace control plane of the faas registry. Authenticate with HTTP Basic (name and password, or an API token as password) or Authorization: Bearer faas_… (API token). Errors are {\"error\":{\"code\",\"message\",\"field\"}}."},
			"servers":  []any{obj{"url": registryapi.Prefix}},
			"paths":    paths,
			"security": []any{obj{"basic": []string{}}, obj{"token": []string{}}},
			"components": obj{
				"schemas": allSchemas(),
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

// addOperation adds rt to the document's paths, under tag.
func addOperation(paths obj, tag string, rt route) {
	method := strings.ToLower(rt.method)
	item, _ := paths[rt.path].(obj)
	if item == nil {
		item = obj{}
		paths[rt.path] = item
	}
	var params []any
	for _, m := range paramRE.FindAllStringSubmatch(rt.path, -1) {
		s := tStr
		if m[1] == "id" || m[1] == "rule" {
			s = tID
		}
		params = append(params, obj{"name": m[1], "in": "path", "required": true, "schema": s})
	}
	if strings.Contains(rt.path, "{month}") {
		params = append(params, obj{"name": "month", "in": "path", "required": true, "schema": obj{"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}})
	}
	for _, q := range rt.doc.query {
		params = append(params, obj{"name": q, "in": "query", "schema": tStr})
	}
	if rt.doc.list {
		params = append(params, obj{"name": "limit", "in": "query", "schema": obj{"type": "integer", "minimum": 1, "maximum": MaxLimit}},
			obj{"name": "cursor", "in": "query", "schema": tStr})
	}
	ok := obj{"description": "success"}
	if rt.doc.resp != "" {
		s := ref(rt.doc.resp)
		if rt.doc.list {
			s = schema(nil, props("items", obj{"type": "array", "items": ref(rt.doc.resp)}, "next_cursor", tStr))
		}
		ok["content"] = obj{"application/json": obj{"schema": s}}
		if slices.Contains(rt.doc.query, "format") {
			ok["content"].(obj)["text/csv"] = obj{"schema": tStr}
		}
	}
	responses := obj{rt.doc.status: ok, "400": errResp("malformed request"), "422": errResp("invalid field"),
		"404": errResp("not found or not visible"), "500": errResp("internal error"),
		// Any request may carry a password, anonymous routes too.
		"429": errResp("too many failed password checks for this account or address; see Retry-After"),
		"503": unavailableResp()}
	if rt.doc.spend {
		responses["402"] = errResp("spend_limit: the tenant's spend this month, in the listing's currency, has reached its hard limit")
	}
	if !rt.who.anonymous {
		responses["401"] = errResp("no or invalid credentials")
		responses["403"] = errResp("forbidden for this role or account")
	}
	operation := obj{"summary": rt.doc.summary, "tags": []string{tag}, "responses": responses,
		"operationId": method + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(rt.path)}
	if params != nil {
		operation["parameters"] = params
	}
	if rt.doc.raw != nil {
		content := obj{}
		for _, t := range rt.doc.raw {
			content[t] = obj{"schema": obj{"type": "string", "format": "binary"}}
		}
		operation["requestBody"] = obj{"required": true, "content": content}
		responses["413"] = errResp("body too large")
		responses["415"] = errResp("Content-Type not accepted")
	}
	if rt.doc.rawResp != "" {
		ok["content"] = obj{rt.doc.rawResp: obj{"schema": obj{"type": "string", "format": "binary"}}}
		ok["headers"] = obj{"ETag": obj{"schema": tStr}}
		responses["304"] = obj{"description": "not modified (If-None-Match)"}
	}
	if rt.doc.body != "" {
		operation["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": ref(rt.doc.body)}}}
	}
	if rt.who.anonymous {
		operation["security"] = []any{obj{}, obj{"basic": []string{}}, obj{"token": []string{}}}
	}
	item[method] = operation
}
