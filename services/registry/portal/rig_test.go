package portal_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// rig is a registry (real PostgreSQL, directory blob store) serving the
// portal over HTTP.
type rig struct {
	t   testing.TB
	srv *server.Server
	url string
}

var testParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

const password = "correct horse battery"

func newRig(t testing.TB) *rig { return newRigWith(t, nil) }

// newRigWith is newRig with the server's configuration changed by set.
func newRigWith(t testing.TB, set func(*server.Config)) *rig {
	t.Helper()
	cfg := server.Config{DatabaseURL: testenv.Postgres(t).URL, DataDir: t.TempDir(), PasswordParams: testParams,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if set != nil {
		set(&cfg)
	}
	srv, err := server.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Serve, not just the handler: the validation worker runs with it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		srv.Close()
	})
	return &rig{t: t, srv: srv, url: "http://" + ln.Addr().String()}
}

func (r *rig) user(name string, role auth.Role) {
	r.t.Helper()
	if _, err := r.srv.CreateUser(context.Background(), name, role, password); err != nil {
		r.t.Fatal(err)
	}
}

// as is a client of the registry's API as user, with its password.
func (r *rig) as(user string) *registryclient.Client {
	r.t.Helper()
	c, err := registryclient.New(r.url, registryclient.WithBasicAuth(user, password))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// api calls /api/v1 as user and decodes the answer, for calls the rig
// makes as nodes and users around the pages under test.
func (r *rig) api(user, method, path string, in, out any) {
	r.t.Helper()
	if err := r.as(user).Do(context.Background(), method, path, in, out); err != nil {
		r.t.Fatalf("as %s: %v", user, err)
	}
}

// listing creates and, when published, publishes a public listing of user
// on the repository user/NAME, NAME its name in lower case with dashes.
func (r *rig) listing(user, name, description string, published bool) string {
	r.t.Helper()
	return r.listingAt(user+"/"+strings.ToLower(strings.ReplaceAll(name, " ", "-")), name, description, published)
}

// listingAt is listing on repository repo, of the user its namespace
// names.
func (r *rig) listingAt(repo, name, description string, published bool) string {
	r.t.Helper()
	user, _, _ := strings.Cut(repo, "/")
	var l struct{ ID string }
	r.api(user, http.MethodPost, "/listings", map[string]any{"name": name, "repository": repo,
		"summary": name + " accelerator", "description": description, "category": "ml", "board_model": "faas-vu9p-2",
		"price_per_hour_micros": 1_500_000, "visibility": "public"}, &l)
	if published {
		r.api(user, http.MethodPost, "/listings/"+l.ID+"/publish", nil, nil)
	}
	return l.ID
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (r *rig) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: r.t, base: r.url, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// send sends body of type ctype.
func (b *browser) send(method, path, ctype string, body io.Reader) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func (b *browser) get(path string) (*http.Response, string) {
	return b.do(http.MethodGet, path, nil, nil)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the first CSRF token of page.
func csrf(t testing.TB, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

// signIn signs b in as name and returns the page it lands on.
func (b *browser) signIn(name string) string {
	b.t.Helper()
	_, page := b.get("/signin")
	resp, _ := b.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf(b.t, page)}, "name": {name}, "password": {password}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign-in of %s: %d", name, resp.StatusCode)
	}
	_, page = b.get(resp.Header.Get("Location"))
	return page
}

var alertRE = regexp.MustCompile(`(?s)role="alert">(.*?)</p>`)

// errorOf returns the alert of a page, for failure messages.
func errorOf(page string) string {
	if m := alertRE.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return "(no alert on the page)"
}
