package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// FuzzHandlers sends arbitrary bodies and path parameters to every route of
// /api/v1 that parses one, as each role that reaches the handler (an admin
// passes every role check; a node and a tenant own what they own). No input
// may cause a 5xx, and every refusal must be a JSON error naming what was
// wrong. The route list comes from the router, so a new route is fuzzed
// without an edit here.
func FuzzHandlers(f *testing.F) {
	a, srv, tokens := fuzzServer(f, map[string]auth.Role{"admin": auth.RoleAdmin, "node1": auth.RoleNode, "tenant1": auth.RoleTenant, "isv1": auth.RoleISV})
	var routes []string
	for _, r := range a.Routes() {
		if r.Method != http.MethodGet && !strings.HasSuffix(r.Path, "/*") {
			routes = append(routes, r.Method+" "+strings.TrimPrefix(r.Path, registryapi.Prefix))
		}
	}

	seeds := []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"name":`, `{"name": "a", "role": "tenant", "password": "p"}`,
		`{"node_id": "00000000-0000-0000-0000-000000000000", "repository": "isv1/x", "digest": "sha256:00"}`,
		`{"node_id": "x", "records": [{"report_id": "r", "tenant_id": "t", "grant_id": "g", "event": "load", "slot": -1}]}`,
		`{"hostname": "h", "public_key": "AAAA", "enrollment_token": "fne_"}`,
		`{"ttl_seconds": -1}`, `{"ttl_seconds": 99999999999999999999}`,
		`{"boards": [{"model": "", "slots": [{"index": 0, "state": "nope"}]}]}`,
		`{"name": "` + strings.Repeat("x", 5000) + `"}`, "{\"name\": \"\xff\xfe\"}", `{"price_per_hour_micros": -5}`,
		`{"boards": [], "endpoint": "https://h:1", "tls_certificate": "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----"}`,
		`{"endpoint": "http://h", "tls_certificate": ""}`, `{"endpoint": "` + strings.Repeat("h", 300) + `", "tls_certificate": "x"}`,
		`{"listing": "isv1/x", "version": "1", "share": true, "lease_seconds": 1}`, `{"listing": "", "lease_seconds": 99999999999}`,
		`{"state": "ready", "slots": [0, 1, 2]}`, `{"state": "released", "scrubbed": true}`, `{"state": "failed", "error": "` + strings.Repeat("e", 3000) + `"}`,
		`{"alert_micros": 5, "limit_micros": 4}`, `{"limit_micros": -1}`, `{"alert_micros": null, "limit_micros": 1e30}`,
		`{"alert_micros": "5"}`, `{"trial_hours": 99999}`, `{"trial_hours": -1, "name": "x"}`,
		`{"visibility": "everyone", "unknown": 1}`, `{"public_key": "-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----"}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), "00000000-0000-0000-0000-000000000000", []byte(s))
		f.Add(uint8(i*7+3), "../../x%00", []byte(s))
	}
	f.Fuzz(func(t *testing.T, pick uint8, param string, body []byte) {
		route := routes[int(pick)%len(routes)]
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, ":id", url.PathEscape(param))
		path = strings.ReplaceAll(path, ":aid", url.PathEscape(param))
		path = strings.ReplaceAll(path, ":name", url.PathEscape(param))
		path = strings.ReplaceAll(path, ":currency", url.PathEscape(param))
		for _, who := range []string{"admin", "node1", "tenant1", "isv1"} {
			req, err := http.NewRequest(method, srv.URL+registryapi.Prefix+path, bytes.NewReader(body))
			if err != nil {
				return // not a URL a client could send
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokens[who])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode >= 500 {
				t.Fatalf("%s as %s with %q: %d %s", route, who, body, res.StatusCode, b)
			}
			if res.StatusCode >= 400 {
				var e struct {
					Error struct{ Code, Message string }
				}
				if json.Unmarshal(b, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
					t.Fatalf("%s as %s with %q: %d without a JSON error: %s", route, who, body, res.StatusCode, b)
				}
			}
		}
	})
}

// FuzzLongPollQuery sends arbitrary ?wait= and ?since= to the long polls of
// the pool (a tenant's attachment, a node's assignments): no input causes a
// 5xx, and a refusal is a JSON error naming what was wrong.
func FuzzLongPollQuery(f *testing.F) {
	_, srv, tokens := fuzzServer(f, map[string]auth.Role{"node1": auth.RoleNode, "tenant1": auth.RoleTenant})
	for _, s := range [][2]string{{"", ""}, {"30s", "pending"}, {"61s", "ready"}, {"-1s", "x"}, {"10", "0"}, {"1e9", "-5"},
		{"999999999999999999999", "99999999999999999999"}, {"1h", "\x00"}, {"0", "%"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, wait, since string) {
		q := url.Values{"wait": {wait}, "since": {since}}.Encode()
		for who, path := range map[string]string{
			"tenant1": "/attachments/00000000-0000-0000-0000-000000000000?" + q,
			"node1":   "/nodes/00000000-0000-0000-0000-000000000000/assignments?" + q,
		} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+registryapi.Prefix+path, nil)
			req.Header.Set("Authorization", "Bearer "+tokens[who])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var e struct {
				Error struct{ Code, Message string }
			}
			if res.StatusCode >= 500 || res.StatusCode < 400 || json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
				t.Fatalf("%s %q: %d %s", who, q, res.StatusCode, b)
			}
		}
	})
}

// fuzzServer serves the API over a fresh database with an account of each
// role named, and returns the accounts' API tokens.
func fuzzServer(f *testing.F, accounts map[string]auth.Role) (*api.API, *httptest.Server, map[string]string) {
	pool := testenv.RegistryDB(f)
	as, err := auth.NewStore(pool, auth.WithParams(testParams))
	if err != nil {
		f.Fatal(err)
	}
	a, err := api.New(api.Config{DB: pool, Accounts: as, Meta: meta.New(pool)})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(a)
	f.Cleanup(srv.Close)
	tokens := map[string]string{}
	for name, role := range accounts {
		acct, err := as.Create(context.Background(), name, role, "pw-"+name)
		if err != nil {
			f.Fatal(err)
		}
		if tokens[name], err = as.IssueToken(context.Background(), acct.ID, "fuzz"); err != nil {
			f.Fatal(err)
		}
	}
	return a, srv, tokens
}
