package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// call sends an /api/v1 request as user (password "pw-"+user) with extra
// headers and returns the status and body.
func apiCall(t *testing.T, r *running, method, path, user, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.url+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, "pw-"+user)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// auditRemote creates an account through /api/v1 with the given headers and
// returns the remote address its audit record holds.
func auditRemote(t *testing.T, r *running, account string, hdr ...string) string {
	t.Helper()
	code, body := apiCall(t, r, http.MethodPost, "/accounts", "admin", fmt.Sprintf(`{"name":%q,"role":"tenant","password":"x"}`, account), hdr...)
	if code != http.StatusCreated {
		t.Fatalf("create account: %d %s", code, body)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	code, body = apiCall(t, r, http.MethodGet, "/audit?action=account.create&target_id="+created.ID, "admin", "")
	var page struct {
		Items []struct {
			RemoteAddr string `json:"remote_addr"`
		}
	}
	if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Items) != 1 {
		t.Fatalf("audit: %d %s %v", code, body, err)
	}
	return page.Items[0].RemoteAddr
}

// TestForwardedHeadersUntrusted: without trusted proxies the audit log
// records the socket peer, whatever X-Forwarded-For or X-Real-IP say, and
// forged headers do not move a guesser to a fresh address.
func TestForwardedHeadersUntrusted(t *testing.T) {
	r := start(t, server.Config{PasswordLimits: auth.Limits{Source: auth.Backoff{Free: 3, Base: time.Hour}}})
	r.user(t, "admin", auth.RoleAdmin, "pw-admin")
	if got := auditRemote(t, r, "t1", "X-Forwarded-For", "203.0.113.66", "X-Real-IP", "203.0.113.77"); got != "127.0.0.1" {
		t.Fatalf("audit remote_addr %q, want the peer 127.0.0.1", got)
	}
	// Wrong passwords for different accounts, each with another forged
	// address: all count against 127.0.0.1.
	for i := range 4 {
		code, _ := apiCall(t, r, http.MethodGet, "/me", fmt.Sprintf("nobody%d", i), "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code, _ := apiCall(t, r, http.MethodGet, "/me", "admin", "", "X-Forwarded-For", "198.51.100.1"); code != http.StatusTooManyRequests {
		t.Fatalf("locked address with a forged X-Forwarded-For: %d, want 429", code)
	}
}

// TestForwardedHeadersTrusted: from a trusted proxy the audit log records
// the client it forwards (the right-most untrusted X-Forwarded-For entry,
// else X-Real-IP), and each forwarded client is limited on its own.
func TestForwardedHeadersTrusted(t *testing.T) {
	r := start(t, server.Config{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")},
		PasswordLimits: auth.Limits{Source: auth.Backoff{Free: 3, Base: time.Hour}},
	})
	r.user(t, "admin", auth.RoleAdmin, "pw-admin")
	if got := auditRemote(t, r, "t1", "X-Forwarded-For", "203.0.113.66, 198.51.100.9, 10.1.2.3"); got != "198.51.100.9" {
		t.Fatalf("audit remote_addr %q, want 198.51.100.9", got)
	}
	if got := auditRemote(t, r, "t2", "X-Real-IP", "198.51.100.10"); got != "198.51.100.10" {
		t.Fatalf("audit remote_addr %q from X-Real-IP, want 198.51.100.10", got)
	}
	if got := auditRemote(t, r, "t3"); got != "127.0.0.1" {
		t.Fatalf("audit remote_addr %q without forwarding headers, want the proxy 127.0.0.1", got)
	}
	for i := range 4 {
		code, _ := apiCall(t, r, http.MethodGet, "/me", fmt.Sprintf("nobody%d", i), "", "X-Forwarded-For", "203.0.113.5")
		if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code, _ := apiCall(t, r, http.MethodGet, "/me", "admin", "", "X-Forwarded-For", "203.0.113.5"); code != http.StatusTooManyRequests {
		t.Fatalf("locked client behind the proxy: %d, want 429", code)
	}
	if code, body := apiCall(t, r, http.MethodGet, "/me", "admin", "", "X-Forwarded-For", "198.51.100.1"); code != http.StatusOK {
		t.Fatalf("another client behind the same proxy: %d %s", code, body)
	}
}
