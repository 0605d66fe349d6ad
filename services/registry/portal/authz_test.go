package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// access is who may use a route: nil roles with public set is everyone,
// signed in or not; empty roles is any signed-in account.
type access struct {
	public bool
	roles  []auth.Role
}

// expected says who may use each pattern of the portal. A route missing
// here fails the matrix: whoever adds one decides who may use it.
func expected(pattern string) (access, bool) {
	_, path, _ := strings.Cut(pattern, " ")
	switch {
	case pattern == "/" || pattern == "GET /static/" || pattern == "GET /{$}" || pattern == "GET /listings/{id}" ||
		pattern == "GET /codes" || path == "/signin":
		return access{public: true}, true
	case pattern == "POST /listings/{id}/subscribe" || strings.HasPrefix(path, "/my"):
		return access{roles: []auth.Role{auth.RoleTenant}}, true
	case strings.HasPrefix(path, "/isv"):
		return access{roles: []auth.Role{auth.RoleISV}}, true
	case strings.HasPrefix(path, "/admin"):
		return access{roles: []auth.Role{auth.RoleAdmin}}, true
	case strings.HasPrefix(path, "/tokens") || pattern == "POST /signout":
		return access{}, true
	}
	return access{}, false
}

// TestAuthorizationMatrix sends every route of the portal as a visitor
// and as each role: routes not public send visitors to sign in, and
// answer 403 to the roles they are not for.
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
		pattern := route.Pattern
		want, ok := expected(pattern)
		if !ok {
			t.Errorf("%s: not in the matrix; say who may use it in expected()", pattern)
			continue
		}
		method, path, found := strings.Cut(pattern, " ")
		if !found {
			method, path = http.MethodGet, pattern+"nowhere"
		}
		path = strings.NewReplacer("{id}", id, "{version}", "1.0.0", "{$}", "").Replace(path)
		if strings.HasSuffix(path, "/") && path != "/" {
			path += "portal.css"
		}
		// A visitor.
		resp, _ := r.browser().do(method, path, url.Values{}, nil)
		redirected := resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin")
		if want.public && redirected {
			t.Errorf("%s: a visitor is sent to sign in; the route is public", pattern)
		}
		if !want.public && !redirected {
			t.Errorf("%s: a visitor gets %d, want 303 to /signin", pattern, resp.StatusCode)
		}
		if want.public || pattern == "POST /signout" { // signing out would end the roles' sessions
			continue
		}
		for role, b := range browsers {
			allowed := len(want.roles) == 0
			for _, w := range want.roles {
				allowed = allowed || w == role
			}
			form := url.Values{"csrf": {tokens[role]}}
			resp, _ := b.do(method, path, form, nil)
			switch {
			case allowed && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin")):
				t.Errorf("%s as %s: %d, want it let through", pattern, role, resp.StatusCode)
			case !allowed && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s as %s: %d, want 403", pattern, role, resp.StatusCode)
			}
		}
	}
}
