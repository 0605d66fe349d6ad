package portal_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/portal"
)

// policy says who may use each pattern of the portal, written apart from
// the route table so that the two check each other. A route missing here
// fails the matrix: whoever adds one decides who may use it.
func policy(pattern string) (portal.Access, bool) {
	_, path, _ := strings.Cut(pattern, " ")
	switch {
	case pattern == "/" || pattern == "GET /static/" || pattern == "GET /{$}" || pattern == "GET /listings/{id}" || pattern == "GET /listings/{id}/logo" || pattern == "GET /vendors/{name}" ||
		pattern == "GET /codes" || path == "/signin":
		return portal.Access{Anonymous: true}, true
	case pattern == "POST /listings/{id}/subscribe" || strings.HasPrefix(path, "/my"):
		return portal.Access{Roles: []auth.Role{auth.RoleTenant}}, true
	case strings.HasPrefix(path, "/isv"):
		return portal.Access{Roles: []auth.Role{auth.RoleISV}}, true
	case strings.HasPrefix(path, "/admin"):
		return portal.Access{Roles: []auth.Role{auth.RoleAdmin}}, true
	case strings.HasPrefix(path, "/tokens") || pattern == "POST /signout" || strings.HasPrefix(path, "/notifications") ||
		strings.HasPrefix(path, "/webhooks"):
		return portal.Access{}, true
	}
	return portal.Access{}, false
}

func sameAccess(a, b portal.Access) bool {
	if a.Anonymous || b.Anonymous {
		return a.Anonymous == b.Anonymous
	}
	return len(a.Roles) == len(b.Roles) && !slices.ContainsFunc(a.Roles, func(r auth.Role) bool { return !slices.Contains(b.Roles, r) })
}

// TestAuthorizationMatrix checks every route's declared access against
// the policy, then sends the route as a visitor and as each role: routes
// not public send visitors to sign in, and the portal itself refuses
// (403) the roles they are not for. That the refusal is the portal's,
// not the API's behind it, shows that the route's access is applied.
func TestAuthorizationMatrix(t *testing.T) {
	r := newRig(t)
	browsers := map[auth.Role]*browser{}
	for _, role := range []auth.Role{auth.RoleTenant, auth.RoleISV, auth.RoleAdmin} {
		r.user("u-"+string(role), role)
		b := r.browser()
		b.signIn("u-" + string(role))
		browsers[role] = b
	}
	tokens := map[auth.Role]string{}
	for role, b := range browsers {
		_, page := b.get("/tokens")
		tokens[role] = csrf(t, page)
	}
	const id = "00000000-0000-0000-0000-000000000000"
	routes := r.srv.Portal().Routes()
	if len(routes) < 30 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	for _, route := range routes {
		pattern, want := route.Pattern, route.Access
		if rule, ok := policy(pattern); !ok {
			t.Errorf("%s: not in the matrix; say who may use it in policy()", pattern)
		} else if !sameAccess(want, rule) {
			t.Errorf("%s: declared %+v, the policy says %+v", pattern, want, rule)
		}
		method, path, found := strings.Cut(pattern, " ")
		if !found {
			method, path = http.MethodGet, pattern+"nowhere"
		}
		path = strings.NewReplacer("{id}", id, "{version}", "1.0.0", "{rule}", id, "{delivery}", id, "{$}", "").Replace(path)
		if strings.HasSuffix(path, "/") && path != "/" {
			path += "portal.css"
		}
		// A visitor.
		resp, _ := r.browser().do(method, path, url.Values{}, nil)
		redirected := resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin")
		if want.Anonymous && redirected {
			t.Errorf("%s: a visitor is sent to sign in; the route is public", pattern)
		}
		if !want.Anonymous && !redirected {
			t.Errorf("%s: a visitor gets %d, want 303 to /signin", pattern, resp.StatusCode)
		}
		if want.Anonymous || pattern == "POST /signout" { // signing out would end the roles' sessions
			continue
		}
		for role, b := range browsers {
			allowed := len(want.Roles) == 0 || slices.Contains(want.Roles, role)
			form := url.Values{"csrf": {tokens[role]}}
			resp, page := b.do(method, path, form, nil)
			switch {
			case allowed && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin")):
				t.Errorf("%s as %s: %d, want it let through", pattern, role, resp.StatusCode)
			case !allowed && (resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "Not for this account")):
				t.Errorf("%s as %s: %d %s, want the portal's 403", pattern, role, resp.StatusCode, errorOf(page))
			}
		}
	}
}
