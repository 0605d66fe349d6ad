package auth

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestAuthenticateRequest is the one rule of a request's credentials, as
// every surface applies it.
func TestAuthenticateRequest(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	alice, err := s.Create(ctx, "alice", RoleTenant, "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "bob", RoleTenant, "bob-pw"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.IssueToken(ctx, alice.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	req := func(h string) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	basic := func(user, pass string) string {
		r := req("")
		r.SetBasicAuth(user, pass)
		return r.Header.Get("Authorization")
	}
	for _, c := range []struct {
		name, header string
		want         string // account name; "" anonymous
		reason       string // refused: Reason
	}{
		{"none", "", "", ""},
		{"bearer token", "Bearer " + tok, "alice", ""},
		{"basic password", basic("alice", "alice-pw"), "alice", ""},
		{"basic token of that name", basic("alice", tok), "alice", ""},
		{"basic token under another name", basic("bob", tok), "", "the token belongs to another account than the user name"},
		{"wrong password", basic("alice", "bob-pw"), "", "invalid credentials"},
		{"wrong token", "Bearer " + TokenPrefix + "AAAA", "", "invalid credentials"},
		{"empty user", basic("", "alice-pw"), "", "malformed credentials"},
		{"no colon", "Basic YWxpY2U=", "", "malformed credentials"},
		{"not base64", "Basic !!!", "", "malformed credentials"},
		{"other scheme", "Digest x", "", "unsupported authorization scheme: want Bearer or Basic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := s.AuthenticateRequest(req(c.header))
			switch {
			case c.reason != "":
				if !errors.Is(err, ErrUnauthenticated) || Reason(err) != c.reason || a != nil {
					t.Fatalf("got %v, %v (reason %q); want refused: %s", a, err, Reason(err), c.reason)
				}
			case err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && a != nil, c.want != "" && (a == nil || a.Name != c.want):
				t.Fatalf("account %+v, want %q", a, c.want)
			}
		})
	}
	// A disabled account is refused with every kind of credentials.
	if _, err := s.pool.Exec(ctx, `update accounts set disabled = true where id = $1::uuid`, alice.ID); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Bearer " + tok, basic("alice", "alice-pw"), basic("alice", tok)} {
		if a, err := s.AuthenticateRequest(req(h)); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("disabled account: %v, %v", a, err)
		}
	}
}
