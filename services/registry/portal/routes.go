package portal

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/web"
)

// Access is who may use a route: everyone, signed in or not (Anonymous),
// or else signed-in accounts of Roles (none: any role).
type Access struct {
	Anonymous bool
	Roles     []auth.Role
}

var (
	anyone   = Access{Anonymous: true}
	signedIn = Access{}
	tenants  = Access{Roles: []auth.Role{auth.RoleTenant}}
	isvs     = Access{Roles: []auth.Role{auth.RoleISV}}
	admins   = Access{Roles: []auth.Role{auth.RoleAdmin}}
)

// Route is a pattern of the portal ("GET /isv/keys") and who may use it.
type Route struct {
	Pattern string
	Access  Access
}

// route is an entry of routeTable.
type route struct {
	pattern string
	access  Access
	handler http.HandlerFunc
}

// routeTable is every page and form of the portal and who may use it, in
// one place: routes registers these and no others, each behind its access
// check. The API checks its own roles again on every call a page makes,
// and withSession wants a session for every form but sign-in whatever its
// entry says (TestAuthorizationMatrix holds both to its policy).
func (p *Portal) routeTable() []route {
	return []route{
		{"GET /static/", anyone, staticHandler().ServeHTTP},
		{"/", anyone, p.notFound},

		// Signing in and out, and API tokens.
		{"GET /signin", anyone, p.signinForm},
		{"POST /signin", anyone, p.signin},
		{"POST /signout", signedIn, p.signout},
		{"GET /tokens", signedIn, p.tokens},
		{"POST /tokens", signedIn, p.createToken},
		{"POST /tokens/{id}/revoke", signedIn, p.revokeToken},

		// Notifications, and the webhooks that receive them.
		{"GET /notifications", signedIn, p.notifications},
		{"POST /notifications/{id}/read", signedIn, p.readNotification},
		{"GET /webhooks", signedIn, p.webhooks},
		{"POST /webhooks", signedIn, p.createWebhook},
		{"GET /webhooks/{id}", signedIn, p.webhook},
		{"POST /webhooks/{id}/delete", signedIn, p.deleteWebhook},
		{"POST /webhooks/{id}/deliveries/{delivery}/redeliver", signedIn, p.redeliverWebhook},

		// The marketplace.
		{"GET /{$}", anyone, p.market},
		{"GET /listings/{id}", anyone, p.listing},
		{"GET /listings/{id}/logo", anyone, p.listingLogo},
		{"GET /vendors/{name}", anyone, p.vendor},
		{"GET /codes", anyone, p.codesPage},
		{"POST /listings/{id}/subscribe", tenants, p.subscribe},

		// The tenant's accelerators.
		{"GET /my", tenants, p.myAccelerators},
		{"GET /my/subscriptions/{id}/end", tenants, p.confirmUnsubscribe},
		{"POST /my/subscriptions/{id}/end", tenants, p.unsubscribe},
		{"GET /my/spend-limit", tenants, p.spendLimitForm},
		{"POST /my/spend-limit", tenants, p.setSpendLimit},
		{"GET /my/invoices", tenants, p.statements(invoicesKind)},
		{"GET /my/invoices.csv", tenants, p.statementsCSV(invoicesKind)},

		// The ISV's listings, versions, keys and publishing.
		{"GET /isv", isvs, p.dashboard},
		{"GET /isv/keys", isvs, p.keys},
		{"POST /isv/keys", isvs, p.addKey},
		{"POST /isv/keys/{id}/revoke", isvs, p.revokeKey},
		{"GET /isv/listings/new", isvs, p.newListing},
		{"POST /isv/listings", isvs, p.createListing},
		{"GET /isv/listings/{id}", isvs, p.editListing},
		{"POST /isv/listings/{id}", isvs, p.saveListing},
		{"POST /isv/listings/{id}/publish", isvs, p.publishListing(true)},
		{"POST /isv/listings/{id}/unpublish", isvs, p.publishListing(false)},
		{"POST /isv/listings/{id}/shares", isvs, p.shareListing},
		{"POST /isv/listings/{id}/versions", isvs, p.attachVersion},
		{"POST /isv/listings/{id}/tag-rules", isvs, p.addTagRule},
		{"POST /isv/listings/{id}/tag-rules/{rule}/delete", isvs, p.deleteTagRule},
		{"GET /isv/listings/{id}/versions/{version}", isvs, p.versionPage},
		{"POST /isv/listings/{id}/versions/{version}/docs", isvs, p.saveDocs},
		{"POST /isv/listings/{id}/logo", isvs, p.uploadLogo},
		{"POST /isv/listings/{id}/logo/delete", isvs, p.deleteLogo},
		{"GET /isv/publish", isvs, p.publishForm},
		{"POST /isv/publish", isvs, p.publishUpload},

		// The ISV's subscribers, usage and revenue, and its audit.
		{"GET /isv/usage", isvs, p.isvUsage},
		{"GET /isv/usage.csv", isvs, p.isvUsageCSV},
		{"GET /isv/statements", isvs, p.statements(revenueKind)},
		{"GET /isv/statements.csv", isvs, p.statementsCSV(revenueKind)},
		{"GET /isv/audit", isvs, p.audit(isvAudit)},

		// The operator's view.
		{"GET /admin", admins, http.RedirectHandler("/admin/nodes", http.StatusSeeOther).ServeHTTP},
		{"GET /admin/accounts", admins, p.adminAccounts},
		{"POST /admin/accounts", admins, p.adminCreateAccount},
		{"POST /admin/accounts/{id}", admins, p.adminUpdateAccount},
		{"GET /admin/nodes", admins, p.adminNodes},
		{"POST /admin/nodes/{id}/approve", admins, p.adminNodeTrust(true)},
		{"POST /admin/nodes/{id}/revoke", admins, p.adminNodeTrust(false)},
		{"GET /admin/validation", admins, p.adminValidation},
		{"GET /admin/invoices", admins, p.statements(adminInvoicesKind)},
		{"GET /admin/invoices.csv", admins, p.statementsCSV(adminInvoicesKind)},
		{"GET /admin/statements", admins, p.statements(adminRevenueKind)},
		{"GET /admin/statements.csv", admins, p.statementsCSV(adminRevenueKind)},
		{"POST /admin/months/{month}/close", admins, p.closeMonth},
		{"GET /admin/audit", admins, p.audit(adminAudit)},
	}
}

// Routes lists the portal's routes and who may use each, for the
// authorization matrix of its tests. The roles are copies: the live
// checks share the table's.
func (p *Portal) Routes() []Route {
	out := make([]Route, len(p.table))
	for i, rt := range p.table {
		out[i] = Route{Pattern: rt.pattern, Access: Access{Anonymous: rt.access.Anonymous, Roles: slices.Clone(rt.access.Roles)}}
	}
	return out
}

func (p *Portal) routes() http.Handler {
	mux := http.NewServeMux()
	p.table = p.routeTable()
	for _, rt := range p.table {
		h := rt.handler
		if !rt.access.Anonymous {
			h = p.requireRole(h, rt.access.Roles...)
		}
		mux.HandleFunc(rt.pattern, h)
	}
	// Cross-origin state changes are refused before any handler runs
	// (Sec-Fetch-Site and Origin), in addition to the CSRF tokens.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.render(w, r, http.StatusForbidden, pageError, errorPage{Title: "Request refused",
			Message: "This request came from another site. Use the portal's own pages."})
	}))
	return secure(cop.Handler(p.withSession(mux)))
}

func (p *Portal) notFound(w http.ResponseWriter, r *http.Request) {
	p.render(w, r, http.StatusNotFound, pageError, errorPage{Title: "Not found", Message: "There is no page at this address."})
}

// asset is a static file with its validator.
type asset struct {
	data  []byte
	ctype string
	etag  string
}

// staticHandler serves web.Static from memory with strong ETags.
func staticHandler() http.Handler {
	assets := map[string]asset{}
	_ = fs.WalkDir(web.Static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.Static, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" || strings.HasSuffix(name, ".LICENSE") {
			ct = "text/plain; charset=utf-8"
		}
		assets["/"+name] = asset{data: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "public, max-age=300")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(a.data)
	})
}
