package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// faultDeadline bounds how long a fault may take to reach the registry
// (a configuration reload, a pool noticing a stopped server) and how long
// the registry may take to recover once it is removed. Generous: the
// assertions poll, and a slow machine only makes them poll longer.
const faultDeadline = time.Minute

// dbFault is a way to break a registry's PostgreSQL for real, and mend it.
type dbFault struct {
	name  string
	cause string // the words the answers must carry
	// prepare runs before the registry starts serving faults (setup the
	// fault needs in the database).
	prepare func(t *testing.T, f *faultRig)
	inject  func(t *testing.T, f *faultRig)
	remove  func(t *testing.T, f *faultRig)
}

// faultRig is a registry on a PostgreSQL cluster of its own, with the
// accounts and credentials the requests of every surface need.
type faultRig struct {
	pg        *testenv.PG
	r         *running
	admin     *pgx.Conn // superuser; immune to default_transaction_read_only
	small     string    // a small tmpfs for the out-of-disk fault
	nodeID    string    // the node account's id
	nodeToken string    // its API token (faasd authenticates with one)
	pushToken string    // isv1's registry token for isv1/img
}

func (f *faultRig) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	if _, err := f.admin.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestDatabaseFaults breaks PostgreSQL under a running registry in three
// ways (a real ENOSPC in a tablespace on a full tmpfs, read-only, the
// server stopped) and checks that every surface (/api/v1, /v2, the portal,
// key release, /auth/token) answers a request that needs the database
// with 503, Retry-After and a message naming the cause, never a 500 and
// never SQL; that a full or read-only database still serves password
// logins and the marketplace; that /readyz names an unreachable database;
// and that the same requests succeed once the fault is gone.
func TestDatabaseFaults(t *testing.T) {
	faults := []dbFault{
		{
			name:  "out of disk",
			cause: "the database is out of disk space",
			prepare: func(t *testing.T, f *faultRig) {
				// The tables the requests below write into move to a
				// tablespace on the small tmpfs. upload_sessions and
				// portal_sessions are empty, so a write must extend them;
				// api_tokens holds the node's token, and its page is
				// filled first, so that using the token (which records
				// last_used_at) must extend it too.
				f.exec(t, `vacuum api_tokens`)
				f.exec(t, fmt.Sprintf(`do $$ declare pages bigint := pg_relation_size('api_tokens') / 8192; n int := 0; begin
					loop
						insert into api_tokens (account_id, token_hash) values ('%s', sha256(('pad' || n)::bytea));
						n := n + 1;
						exit when pg_relation_size('api_tokens') / 8192 > pages;
					end loop;
					delete from api_tokens where (ctid::text::point)[0] >= pages;
				end $$`, f.nodeID))
				f.exec(t, `vacuum api_tokens`) // drops the emptied last page
				f.exec(t, fmt.Sprintf(`create tablespace small location '%s'`, f.small))
				for _, table := range []string{"api_tokens", "upload_sessions", "portal_sessions"} {
					f.exec(t, `alter table `+table+` set tablespace small`)
				}
			},
			inject: func(t *testing.T, f *faultRig) {
				// Fill the tmpfs until PostgreSQL itself says 53100.
				f.exec(t, `create table filler (b text) tablespace small`)
				f.exec(t, `do $$ begin
					loop
						begin
							insert into filler select repeat('x', 1000) from generate_series(1, 64);
						exception when disk_full then exit;
						end;
					end loop;
					loop
						begin
							insert into filler values (repeat('x', 100));
						exception when disk_full then exit;
						end;
					end loop;
				end $$`)
			},
			remove: func(t *testing.T, f *faultRig) { f.exec(t, `drop table filler`) },
		},
		{
			name:  "read-only",
			cause: "the database is read-only",
			inject: func(t *testing.T, f *faultRig) {
				// As an operator would: every new transaction of every
				// session is read-only after the reload.
				f.exec(t, `alter system set default_transaction_read_only = on`)
				f.exec(t, `select pg_reload_conf()`)
			},
			remove: func(t *testing.T, f *faultRig) {
				f.exec(t, `alter system reset default_transaction_read_only`)
				f.exec(t, `select pg_reload_conf()`)
			},
		},
		{
			name:   "unreachable",
			cause:  "the database is unreachable",
			inject: func(t *testing.T, f *faultRig) { f.pg.Stop(t) },
			remove: func(t *testing.T, f *faultRig) { f.pg.Start(t) },
		},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) { testDatabaseFault(t, fault) })
	}
}

func testDatabaseFault(t *testing.T, fault dbFault) {
	f := &faultRig{}
	if fault.prepare != nil {
		f.small = testenv.Tmpfs(t, 1<<20) // before the cluster, so that it is unmounted after the cluster stopped
	}
	f.pg = testenv.Postgres(t)
	if f.small != "" {
		f.pg.Own(t, f.small)
	}
	f.r = start(t, server.Config{DatabaseURL: f.pg.URL, GCInterval: -1})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, f.pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	f.admin = admin
	f.exec(t, `set default_transaction_read_only = off`) // this session stays writable whatever the fault

	const nodePW = "node-password-1"
	f.r.user(t, "isv1", auth.RoleISV, isvPW)
	node, err := f.r.srv.CreateUser(ctx, "node1", auth.RoleNode, nodePW)
	if err != nil {
		t.Fatal(err)
	}
	f.nodeID = node.ID
	f.pushToken = bearerToken(t, f.r.url, "isv1", isvPW, "repository:isv1/img:push,pull")
	{
		code, body, _ := f.do(t, "api", http.MethodPost, registryapi.Prefix+"/tokens", `{"name":"faasd"}`, func(r *http.Request) {
			r.SetBasicAuth("node1", nodePW)
		})
		var tok struct{ Secret string }
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Secret == "" {
			t.Fatalf("node token: %d %s", code, body)
		}
		f.nodeToken = tok.Secret
	}
	if fault.prepare != nil {
		fault.prepare(t, f)
	}

	// One request per surface, each of which needs the database to write
	// (a read-only or full database serves reads), and what it answers
	// when the database is well.
	surfaces := []struct {
		name string
		ok   int
		send func() (int, string, http.Header)
	}{
		{"api", http.StatusCreated, func() (int, string, http.Header) {
			return f.do(t, "api", http.MethodPost, registryapi.Prefix+"/tokens", `{"name":"ci"}`, func(r *http.Request) {
				r.SetBasicAuth("isv1", isvPW)
			})
		}},
		{"v2", http.StatusAccepted, func() (int, string, http.Header) {
			return f.do(t, "v2", http.MethodPost, "/v2/isv1/img/blobs/uploads/", "", func(r *http.Request) {
				r.Header.Set("Authorization", "Bearer "+f.pushToken)
			})
		}},
		{"portal", http.StatusSeeOther, func() (int, string, http.Header) {
			// The sign-in form's double submit: the same token in the
			// cookie and the form.
			form := url.Values{"csrf": {"double-submit"}, "name": {"isv1"}, "password": {isvPW}, "next": {"/"}}
			return f.do(t, "portal", http.MethodPost, "/signin", form.Encode(), func(r *http.Request) {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.AddCookie(&http.Cookie{Name: "faas_signin", Value: "double-submit"})
			})
		}},
		{"key release", http.StatusBadRequest, func() (int, string, http.Header) {
			// Authenticated with the node's API token, as faasd does; the
			// empty request is refused (400) once the account is known.
			return f.do(t, "key release", http.MethodPost, registryapi.Prefix+registryapi.KeyReleasePath, `{}`, func(r *http.Request) {
				r.SetBasicAuth("node1", f.nodeToken)
			})
		}},
		{"token", http.StatusOK, func() (int, string, http.Header) {
			q := url.Values{"service": {server.DefaultService}, "scope": {"repository:isv1/img:pull"}}
			return f.do(t, "token", http.MethodGet, "/auth/token?"+q.Encode(), "", func(r *http.Request) {
				r.SetBasicAuth("node1", f.nodeToken)
			})
		}},
	}

	fault.inject(t, f)
	for _, s := range surfaces {
		// The fault reaches each surface within the deadline (a reload is
		// asynchronous); until then the surface answers as usual, and
		// never 500.
		var code int
		var body string
		var h http.Header
		for deadline := time.Now().Add(faultDeadline); ; {
			code, body, h = s.send()
			if code == http.StatusServiceUnavailable || code == http.StatusInternalServerError || time.Now().After(deadline) {
				break
			}
			if code != s.ok {
				t.Fatalf("%s while the fault sets in: %d %s", s.name, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s with the database %s: %d %s, want 503", s.name, fault.name, code, body)
			continue
		}
		if ra := h.Get("Retry-After"); ra != "5" {
			t.Errorf("%s: Retry-After %q, want 5", s.name, ra)
		}
		if !strings.Contains(body, fault.cause) {
			t.Errorf("%s: body does not name the cause %q: %s", s.name, fault.cause, body)
		}
		for _, leak := range []string{"SQLSTATE", "sql", "insert", "update", "pgx", "pgconn", "127.0.0.1", "dial", "tablespace"} {
			if strings.Contains(strings.ToLower(body), strings.ToLower(leak)) {
				t.Errorf("%s: body leaks %q: %s", s.name, leak, body)
			}
		}
		if s.name == "api" || s.name == "key release" {
			var e struct {
				Error struct{ Code, Message string }
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "unavailable" {
				t.Errorf("%s: want the JSON envelope with code unavailable: %s", s.name, body)
			}
		}
		if s.name == "v2" || s.name == "token" {
			var e struct {
				Errors []struct{ Code, Message string }
			}
			if json.Unmarshal([]byte(body), &e) != nil || len(e.Errors) != 1 || e.Errors[0].Code != "UNAVAILABLE" {
				t.Errorf("%s: want the OCI envelope with code UNAVAILABLE: %s", s.name, body)
			}
		}
		if s.name == "portal" && !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("portal: Content-Type %q, want the HTML error page", h.Get("Content-Type"))
		}
	}

	if fault.name != "unreachable" {
		// A full or read-only database still serves what needs no write:
		// a password login, the marketplace.
		q := url.Values{"service": {server.DefaultService}, "scope": {"repository:isv1/img:pull"}}
		code, body, _ := f.do(t, "token", http.MethodGet, "/auth/token?"+q.Encode(), "", func(r *http.Request) {
			r.SetBasicAuth("isv1", isvPW)
		})
		if code != http.StatusOK {
			t.Errorf("password login with the database %s: %d %s, want 200", fault.name, code, body)
		}
		code, body, _ = f.do(t, "api", http.MethodGet, registryapi.Prefix+"/listings", "", func(*http.Request) {})
		if code != http.StatusOK {
			t.Errorf("marketplace listings with the database %s: %d %s, want 200", fault.name, code, body)
		}
	}
	if fault.name == "unreachable" {
		// A load balancer learns why, too.
		resp, body := get(t, f.r.url+"/readyz", nil)
		if resp.StatusCode != http.StatusServiceUnavailable || body != "not ready: the database is unreachable\n" {
			t.Errorf("readyz with the database unreachable: %d %q", resp.StatusCode, body)
		}
	}

	fault.remove(t, f)
	for _, s := range surfaces {
		var code int
		var body string
		for deadline := time.Now().Add(faultDeadline); ; {
			code, body, _ = s.send()
			if code == s.ok || code == http.StatusInternalServerError || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code != s.ok {
			t.Errorf("%s after the fault was removed: %d %s, want %d", s.name, code, body, s.ok)
		}
	}
}

// do sends one request to the registry without following redirects.
func (f *faultRig) do(t *testing.T, what, method, path, body string, edit func(*http.Request)) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.r.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	edit(req)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}
