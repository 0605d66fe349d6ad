package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestSignInLandsHome: each role lands on its own home page after sign-in,
// unless the form carries a page of ours to return to.
func TestSignInLandsHome(t *testing.T) {
	r := newRig(t)
	for user, home := range map[string]string{"acme": "/isv", "alice": "/my", "root": "/admin"} {
		r.user(user, map[string]auth.Role{"acme": auth.RoleISV, "alice": auth.RoleTenant, "root": auth.RoleAdmin}[user])
		b := r.browser()
		_, page := b.get("/signin")
		resp, _ := b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {user}, "password": {password}}, nil)
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != home {
			t.Errorf("%s signs in: %d to %q, want 303 to %s", user, resp.StatusCode, got, home)
		}
		// Already signed in, the sign-in page sends it home too.
		if resp, _ := b.get("/signin"); resp.Header.Get("Location") != home {
			t.Errorf("%s on /signin signed in: to %q, want %s", user, resp.Header.Get("Location"), home)
		}
		b = r.browser()
		_, page = b.get("/signin")
		resp, _ = b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {user}, "password": {password}, "next": {"/codes"}}, nil)
		if got := resp.Header.Get("Location"); got != "/codes" {
			t.Errorf("%s signs in with next=/codes: to %q", user, got)
		}
	}
}

var waitRE = regexp.MustCompile(`Try again in (\d+) seconds?\.`)

// TestLockoutSaysTheWait: once failures lock an account, even the right
// password answers 429 with the lock's real wait, in the header and in
// words; after that wait the right password signs in.
func TestLockoutSaysTheWait(t *testing.T) {
	r := newRig(t)
	r.user("alice", auth.RoleTenant)
	b := r.browser()
	signin := func(pass string) (*http.Response, string) {
		_, page := b.get("/signin")
		return b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(t, page)}, "name": {"alice"}, "password": {pass}}, nil)
	}
	for range auth.DefaultAccountBackoff.Free + 1 {
		signin("guess")
	}
	resp, page := signin(password)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password while locked: %d, want 429", resp.StatusCode)
	}
	m := waitRE.FindStringSubmatch(errorOf(page))
	if m == nil || resp.Header.Get("Retry-After") != m[1] {
		t.Fatalf("locked: Retry-After %q, message %q: want the same wait in both", resp.Header.Get("Retry-After"), errorOf(page))
	}
	if strings.Contains(page, "few minutes") {
		t.Errorf("a lock of %s s called a few minutes", m[1])
	}
	s, _ := strconv.Atoi(m[1])
	time.Sleep(time.Duration(s)*time.Second + 100*time.Millisecond)
	if resp, page := signin(password); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the wait: %d %s", resp.StatusCode, errorOf(page))
	}
}
