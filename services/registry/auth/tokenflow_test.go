package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePolicy: an account owns the namespace of its name (all actions);
// everyone, anonymous included, may pull "public/..."; tenant1 may pull
// "isv1/shared"; "boom/..." fails.
type fakePolicy struct {
	mu    sync.Mutex
	calls []string
}

func (p *fakePolicy) Allowed(_ context.Context, acct *Account, repo string, actions []string) ([]string, error) {
	who := "<anon>"
	if acct != nil {
		who = acct.Name
	}
	p.mu.Lock()
	p.calls = append(p.calls, who+" "+repo)
	p.mu.Unlock()
	if strings.HasPrefix(repo, "boom/") {
		return nil, errors.New("policy store down")
	}
	var out []string
	for _, a := range actions {
		switch {
		case acct != nil && strings.HasPrefix(repo, acct.Name+"/"):
			out = append(out, a)
		case a == "pull" && strings.HasPrefix(repo, "public/"):
			out = append(out, a)
		case a == "pull" && acct != nil && acct.Name == "tenant1" && repo == "isv1/shared":
			out = append(out, a)
		}
	}
	// A sloppy policy that grants more than asked must not widen the token.
	out = append(out, "delete-everything")
	return out, nil
}

type flow struct {
	srv    *httptest.Server
	k      *Keyring
	store  *Store
	policy *fakePolicy
	token  string // API token of isv1
}

func newFlow(t *testing.T, opts ...Option) *flow {
	t.Helper()
	ctx := context.Background()
	s := newStore(t, opts...)
	isv, err := s.Create(ctx, "isv1", RoleISV, "isvpw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "tenant1", RoleTenant, "tenantpw"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.IssueToken(ctx, isv.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	k := newTestKeyring(t)
	p := &fakePolicy{}
	h := &TokenHandler{Keyring: k, Accounts: s, Policy: p, Service: testService, TTL: 2 * time.Minute}
	mux := http.NewServeMux()
	mux.Handle("/auth/token", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &flow{srv: srv, k: k, store: s, policy: p, token: tok}
}

// get requests a token; user "" sends no credentials.
func (f *flow) get(t *testing.T, user, pass string, q url.Values) (int, *http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/auth/token?"+q.Encode(), nil)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp, body
}

func scopes(s ...string) url.Values {
	return url.Values{"service": {testService}, "scope": s}
}

// grant requests a token and returns its verified claims.
func (f *flow) grant(t *testing.T, user, pass string, q url.Values) *Claims {
	t.Helper()
	code, resp, body := f.get(t, user, pass, q)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	if resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("headers %v", resp.Header)
	}
	var tr struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		IssuedAt    string `json:"issued_at"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Token == "" || tr.Token != tr.AccessToken || tr.ExpiresIn != 120 {
		t.Fatalf("response %s", body)
	}
	if _, err := time.Parse(time.RFC3339, tr.IssuedAt); err != nil {
		t.Fatalf("issued_at: %v", err)
	}
	c, err := f.k.Verify(tr.Token, testService)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func accessOf(c *Claims) map[string][]string {
	m := map[string][]string{}
	for _, a := range c.Access {
		m[a.Type+":"+a.Name] = a.Actions
	}
	return m
}

func TestTokenHandler(t *testing.T) {
	f := newFlow(t)

	t.Run("password, owner gets push", func(t *testing.T) {
		c := f.grant(t, "isv1", "isvpw", scopes("repository:isv1/img:pull,push", "repository:public/x:pull,push"))
		got := accessOf(c)
		if c.Subject != "isv1" || !slices.Equal(got["repository:isv1/img"], []string{"pull", "push"}) ||
			!slices.Equal(got["repository:public/x"], []string{"pull"}) || len(got) != 2 {
			t.Fatalf("access %v sub %q", got, c.Subject)
		}
	})
	t.Run("api token as password", func(t *testing.T) {
		c := f.grant(t, "isv1", f.token, scopes("repository:isv1/img:push"))
		if c.Subject != "isv1" || !slices.Equal(accessOf(c)["repository:isv1/img"], []string{"push"}) {
			t.Fatalf("claims %+v", c)
		}
	})
	t.Run("scope filtering", func(t *testing.T) {
		// One parameter with two space-separated scopes, plus a duplicate action.
		c := f.grant(t, "tenant1", "tenantpw", url.Values{"service": {testService}, "account": {"tenant1"},
			"scope": {"repository:isv1/img:pull,push repository:isv1/shared:pull,push,pull", "registry:catalog:*"}})
		got := accessOf(c)
		if len(got) != 1 || !slices.Equal(got["repository:isv1/shared"], []string{"pull"}) {
			t.Fatalf("tenant access %v", got)
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		c := f.grant(t, "", "", scopes("repository:public/x:pull,push", "repository:isv1/img:pull"))
		got := accessOf(c)
		if c.Subject != "" || len(got) != 1 || !slices.Equal(got["repository:public/x"], []string{"pull"}) {
			t.Fatalf("anonymous access %v", got)
		}
	})
	t.Run("no scope", func(t *testing.T) {
		c := f.grant(t, "isv1", "isvpw", url.Values{"service": {testService}})
		if len(c.Access) != 0 || c.Subject != "isv1" {
			t.Fatalf("claims %+v", c)
		}
	})

	for _, bad := range []struct{ name, user, pass string }{
		{"wrong password", "isv1", "nope"},
		{"unknown user", "ghost", "isvpw"},
		{"token of another user name", "tenant1", ""},
		{"revoked-looking token", "isv1", TokenPrefix + strings.Repeat("A", 43)},
		{"empty password", "isv1", ""},
	} {
		t.Run("401 "+bad.name, func(t *testing.T) {
			pass := bad.pass
			if bad.name == "token of another user name" {
				pass = f.token
			}
			code, resp, body := f.get(t, bad.user, pass, scopes("repository:isv1/img:pull"))
			if code != http.StatusUnauthorized {
				t.Fatalf("status %d", code)
			}
			var eb ErrorBody
			if err := json.Unmarshal(body, &eb); err != nil || len(eb.Errors) != 1 || eb.Errors[0].Code != "UNAUTHORIZED" {
				t.Fatalf("body %s", body)
			}
			if strings.Contains(string(body), pass) && pass != "" {
				t.Fatal("secret echoed")
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Fatalf("challenge %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("bearer header is not credentials", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/auth/token?"+scopes("repository:public/x:pull").Encode(), nil)
		req.Header.Set("Authorization", "Bearer abc")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("account mismatch", func(t *testing.T) {
		q := scopes("repository:isv1/img:pull")
		q.Set("account", "tenant1")
		if code, _, _ := f.get(t, "isv1", "isvpw", q); code != http.StatusUnauthorized {
			t.Fatalf("status %d", code)
		}
	})
	for name, q := range map[string]url.Values{
		"wrong service":   {"service": {"other"}},
		"malformed scope": scopes("repository:isv1/img"),
		"bad repo name":   scopes("repository:ISV1/../img:pull"),
		"bad action":      scopes("repository:isv1/img:pu ll"),
		"too many scopes": scopes(strings.Repeat("repository:public/x:pull ", maxScopes+1)),
	} {
		t.Run("400 "+name, func(t *testing.T) {
			if code, _, body := f.get(t, "isv1", "isvpw", q); code != http.StatusBadRequest {
				t.Fatalf("status %d %s", code, body)
			}
		})
	}
	t.Run("policy error", func(t *testing.T) {
		if code, _, _ := f.get(t, "isv1", "isvpw", scopes("repository:boom/x:pull")); code != http.StatusInternalServerError {
			t.Fatalf("status %d", code)
		}
	})
	t.Run("POST refused", func(t *testing.T) {
		resp, err := http.PostForm(f.srv.URL+"/auth/token", url.Values{"grant_type": {"password"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("deny anonymous", func(t *testing.T) {
		h := &TokenHandler{Keyring: f.k, Accounts: f.store, Policy: f.policy, Service: testService, DenyAnonymous: true}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/token?scope=repository:public/x:pull", nil))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

// TestTokenHandlerLimits: the token endpoint answers 429 with Retry-After
// once an account is locked out, even to its right password, and 503 with
// Retry-After when the hashing memory stays taken.
func TestTokenHandlerLimits(t *testing.T) {
	clock := newClock()
	hold := make(chan struct{})
	var blocking atomic.Bool
	f := newFlow(t, WithLimits(Limits{Now: clock.Now, HashMemory: 1, MaxWait: time.Millisecond, OnHash: func(int, int64) {
		if blocking.Load() {
			<-hold
		}
	}}))
	q := scopes("repository:isv1/app:pull")
	for i := 1; i <= 30; i++ {
		code, resp, body := f.get(t, "isv1", fmt.Sprintf("guess-%d", i), q)
		want := http.StatusUnauthorized
		if i > DefaultAccountBackoff.Free+1 {
			want = http.StatusTooManyRequests
		}
		if code != want {
			t.Fatalf("guess %d: %d %s, want %d", i, code, body, want)
		}
		if want == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "TOOMANYREQUESTS")) {
			t.Fatalf("guess %d: Retry-After %q, body %s", i, resp.Header.Get("Retry-After"), body)
		}
	}
	if code, _, body := f.get(t, "isv1", "isvpw", q); code != http.StatusTooManyRequests {
		t.Fatalf("right password while locked: %d %s", code, body)
	}
	// API tokens are no passwords: they still work.
	if code, _, body := f.get(t, "isv1", f.token, q); code != http.StatusOK {
		t.Fatalf("API token while the password is locked: %d %s", code, body)
	}
	clock.Advance(time.Second)
	if code, _, body := f.get(t, "isv1", "isvpw", q); code != http.StatusOK {
		t.Fatalf("right password after the lockout: %d %s", code, body)
	}

	blocking.Store(true)
	done := make(chan struct{})
	go func() { defer close(done); f.get(t, "tenant1", "tenantpw", q) }()
	for {
		f.store.guard.mu.Lock()
		n := f.store.guard.running
		f.store.guard.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	code, resp, body := f.get(t, "isv1", "isvpw", q)
	if code != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("hashing memory taken: %d Retry-After %q %s", code, resp.Header.Get("Retry-After"), body)
	}
	close(hold)
	<-done
}

func TestChallenge(t *testing.T) {
	got := Challenge("https://reg.example/auth/token", "reg.example", "repository:isv1/img:pull,push")
	want := `Bearer realm="https://reg.example/auth/token",service="reg.example",scope="repository:isv1/img:pull,push"`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := Challenge(`r"x`, "s", ""); got != `Bearer realm="r\"x",service="s"` {
		t.Fatalf("escaping/no scope: %s", got)
	}
	a := BearerAuthorizer{Audience: "reg.example"}
	r := httptest.NewRequest(http.MethodGet, "http://reg.example:5000/v2/", nil)
	if got := a.Challenge(r, "isv1/img", []string{"pull"}); got !=
		`Bearer realm="http://reg.example:5000/auth/token",service="reg.example",scope="repository:isv1/img:pull"` {
		t.Fatalf("derived: %s", got)
	}
}

func TestBearerAuthorizer(t *testing.T) {
	k := newTestKeyring(t)
	a := BearerAuthorizer{Keyring: k, Audience: testService, Realm: "https://r/auth/token"}
	tok, _, err := k.Issue("tenant1", testService, []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"pull"}}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	star, _, _ := k.Issue("admin", testService, []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"*"}}}, time.Minute)
	other := newTestKeyring(t)
	foreign, _, _ := other.Issue("tenant1", testService, []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"pull"}}}, time.Minute)
	wrongAud, _, _ := k.Issue("tenant1", "elsewhere", []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"pull"}}}, time.Minute)

	req := func(h string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/v2/isv1/img/manifests/latest", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	if c, err := a.Authorize(req("Bearer "+tok), "isv1/img", "pull"); err != nil || c.Subject != "tenant1" {
		t.Fatalf("pull: %v", err)
	}
	if _, err := a.Authorize(req("bearer "+tok), ""); err != nil {
		t.Fatalf("base check: %v", err)
	}
	if _, err := a.Authorize(req("Bearer "+star), "isv1/img", "pull", "push", "delete"); err != nil {
		t.Fatalf("wildcard: %v", err)
	}
	for name, c := range map[string]struct {
		h       string
		repo    string
		actions []string
		want    error
	}{
		"no header":        {"", "isv1/img", []string{"pull"}, ErrUnauthorized},
		"basic":            {"Basic aXN2MTpwdw==", "isv1/img", []string{"pull"}, ErrUnauthorized},
		"empty bearer":     {"Bearer ", "isv1/img", []string{"pull"}, ErrUnauthorized},
		"foreign key":      {"Bearer " + foreign, "isv1/img", []string{"pull"}, ErrUnauthorized},
		"wrong audience":   {"Bearer " + wrongAud, "isv1/img", []string{"pull"}, ErrUnauthorized},
		"push not granted": {"Bearer " + tok, "isv1/img", []string{"pull", "push"}, ErrDenied},
		"other repo":       {"Bearer " + tok, "isv1/other", []string{"pull"}, ErrDenied},
	} {
		_, err := a.Authorize(req(c.h), c.repo, c.actions...)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
