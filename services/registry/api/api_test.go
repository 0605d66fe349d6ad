package api_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/server"
)

var testParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

type env struct {
	t     *testing.T
	url   string
	pool  *pgxpool.Pool
	acct  *auth.Store
	meta  *meta.Store
	api   *api.API
	users map[string]user
	// nodeID is the node that usage written by the tests ran on.
	nodeID string
}

type user struct {
	auth.Account
	token string
}

// newReleaser is a key release over pool with an empty blob store: the
// API's tests see its route and refusals, keyrelease's its releases.
func newReleaser(t *testing.T, pool *pgxpool.Pool, ms *meta.Store) *keyrelease.Releaser {
	t.Helper()
	blobs, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := keyrelease.New(keyrelease.Config{Pool: pool, Meta: ms, Blobs: blobs, Recipient: key})
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, api.Config{}) }

// newEnvWith is newEnv with cfg's optional fields (the required ones are
// the environment's).
func newEnvWith(t *testing.T, cfg api.Config) *env {
	t.Helper()
	pool := testenv.RegistryDB(t)
	as, err := auth.NewStore(pool, auth.WithParams(testParams))
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.New(pool)
	cfg.DB, cfg.Accounts, cfg.Meta = pool, as, ms
	if cfg.KeyRelease == nil {
		cfg.KeyRelease = newReleaser(t, pool, ms)
	}
	a, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, pool: pool, acct: as, meta: ms, api: a, users: map[string]user{}}
	for name, role := range map[string]auth.Role{"isv1": auth.RoleISV, "isv2": auth.RoleISV, "tenant1": auth.RoleTenant,
		"tenant2": auth.RoleTenant, "admin": auth.RoleAdmin, "node1": auth.RoleNode, "node2": auth.RoleNode} {
		e.addUser(name, role)
	}
	return e
}

func (e *env) addUser(name string, role auth.Role) user {
	ctx := context.Background()
	a, err := e.acct.Create(ctx, name, role, "pw-"+name)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := e.acct.IssueToken(ctx, a.ID, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	u := user{a, tok}
	e.users[name] = u
	return u
}

type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// do sends a request as user who ("" anonymous; "basic:NAME" password auth).
func (e *env) do(who, method, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case rawBody:
		rd, ctype = bytes.NewReader(b.data), b.ctype
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+registryapi.Prefix+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if name, ok := strings.CutPrefix(who, "basic:"); ok {
		req.SetBasicAuth(name, "pw-"+name)
	} else if who != "" {
		req.Header.Set("Authorization", "Bearer "+e.users[who].token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, b, res.Header}
}

func (e *env) must(status int, who, method, path string, body any) resp {
	e.t.Helper()
	r := e.do(who, method, path, body)
	if r.status != status {
		e.t.Fatalf("%s %s %s: status %d, want %d: %s", who, method, path, r.status, status, r.body)
	}
	return r
}

// pushManifest stores a manifest (without blobs) in repo and returns its digest.
func (e *env) pushManifest(repo, tag string) string {
	e.t.Helper()
	content := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"x":%q}}`, repo+tag))
	sum := sha256.Sum256(content)
	d := "sha256:" + hex.EncodeToString(sum[:])
	err := e.meta.PutManifest(context.Background(), repo, meta.Manifest{Digest: d, MediaType: "application/vnd.oci.image.manifest.v1+json", Content: content}, tag)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func ecKeyPEM(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func x25519B64(t *testing.T) string {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
}

var seq atomic.Int64

func uniq(p string) string { return fmt.Sprintf("%s%d", p, seq.Add(1)) }

type item = map[string]any

func TestHappyPaths(t *testing.T) {
	e := newEnv(t)
	// me, with password and token.
	var me registryapi.Account
	e.must(200, "basic:isv1", "GET", "/me", nil).decode(t, &me)
	if me.Name != "isv1" || me.Role != "isv" {
		t.Fatalf("me = %+v", me)
	}
	r := e.do("", "GET", "/me", nil)
	if r.status != 401 || !strings.Contains(string(r.body), `"code":"unauthenticated"`) || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("anonymous /me: %d %s", r.status, r.body)
	}

	// admin creates an account; tokens.
	var acct registryapi.Account
	e.must(201, "admin", "POST", "/accounts", item{"name": "newtenant", "role": "tenant", "password": "secret"}).decode(t, &acct)
	e.must(409, "admin", "POST", "/accounts", item{"name": "newtenant", "role": "tenant"})
	r = e.must(422, "admin", "POST", "/accounts", item{"name": "Bad Name", "role": "tenant"})
	if !strings.Contains(string(r.body), `"field":"name"`) {
		t.Fatalf("validation error: %s", r.body)
	}
	r = e.must(422, "admin", "POST", "/accounts", item{"name": "x", "role": "tenant", "extra": 1})
	if !strings.Contains(string(r.body), `"field":"extra"`) {
		t.Fatalf("unknown field: %s", r.body)
	}
	e.must(413, "admin", "POST", "/accounts", `{"name":"`+strings.Repeat("a", 2<<20)+`"}`)
	var pageA struct {
		Items      []registryapi.Account `json:"items"`
		NextCursor string                `json:"next_cursor"`
	}
	e.must(200, "admin", "GET", "/accounts?limit=3", nil).decode(t, &pageA)
	if len(pageA.Items) != 3 || pageA.NextCursor == "" {
		t.Fatalf("accounts page: %+v", pageA)
	}
	seen := len(pageA.Items)
	for pageA.NextCursor != "" {
		c := pageA.NextCursor
		pageA.NextCursor = ""
		e.must(200, "admin", "GET", "/accounts?limit=3&cursor="+c, nil).decode(t, &pageA)
		seen += len(pageA.Items)
	}
	if seen != 8 {
		t.Fatalf("paged through %d accounts, want 8", seen)
	}
	var tok registryapi.Token
	e.must(201, "tenant1", "POST", "/tokens", item{"name": "ci"}).decode(t, &tok)
	if !strings.HasPrefix(tok.Secret, auth.TokenPrefix) {
		t.Fatalf("token %+v", tok)
	}
	e.users["tenant1-ci"] = user{e.users["tenant1"].Account, tok.Secret}
	e.must(200, "tenant1-ci", "GET", "/me", nil)
	e.must(204, "tenant1", "DELETE", "/tokens/"+tok.ID, nil)
	e.must(401, "tenant1-ci", "GET", "/me", nil)

	// keys
	var key registryapi.SigningKey
	e.must(201, "isv1", "POST", "/keys", item{"public_key": ecKeyPEM(t)}).decode(t, &key)
	if !strings.HasPrefix(key.KeyID, "sha256:") {
		t.Fatalf("key %+v", key)
	}
	e.must(422, "isv1", "POST", "/keys", item{"public_key": "nope"})
	e.must(200, "isv1", "POST", "/keys/"+key.ID+"/revoke", nil).decode(t, &key)
	if key.RevokedAt == nil {
		t.Fatal("key not revoked")
	}

	// listings
	digest := e.pushManifest("isv1/conv", "v1")
	var l registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "Conv2D", "summary": "fast conv", "category": "ml",
		"board_model": "u250", "price_per_hour_micros": 3_600_000, "price_per_load_micros": 1000,
		"visibility": "public", "repository": "isv1/conv"}).decode(t, &l)
	e.must(422, "isv1", "POST", "/listings", item{"name": "x", "repository": "isv2/conv"})
	e.must(422, "isv1", "POST", "/listings", item{"name": "x", "repository": "isv1/y", "visibility": "open"})
	var list struct{ Items []registryapi.Listing }
	e.must(200, "", "GET", "/listings", nil).decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("anonymous sees unpublished: %+v", list)
	}
	e.must(200, "isv1", "POST", "/listings/"+l.ID+"/publish", nil)
	e.must(200, "", "GET", "/listings?category=ml&board=u250&q=conv", nil).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != l.ID || list.Items[0].Repository != "isv1/conv" {
		t.Fatalf("listing browse: %+v", list)
	}
	e.must(200, "", "GET", "/listings?category=other", nil).decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatal("category filter")
	}
	e.must(200, "isv1", "PATCH", "/listings/"+l.ID, item{"summary": "faster conv"}).decode(t, &l)
	if l.Summary != "faster conv" || l.Name != "Conv2D" {
		t.Fatalf("patch: %+v", l)
	}

	// versions
	var v registryapi.Version
	e.must(201, "isv1", "POST", "/listings/"+l.ID+"/versions", item{"version": "1.0.0", "digest": digest}).decode(t, &v)
	if v.State != "pending" {
		t.Fatalf("version %+v", v)
	}
	e.must(409, "isv1", "POST", "/listings/"+l.ID+"/versions", item{"version": "1.0.0", "digest": digest})
	r = e.must(422, "isv1", "POST", "/listings/"+l.ID+"/versions", item{"version": "2", "digest": "sha256:" + strings.Repeat("0", 64)})
	if !strings.Contains(string(r.body), `"field":"digest"`) {
		t.Fatalf("%s", r.body)
	}
	if _, err := e.pool.Exec(context.Background(), `update validation_jobs set state = 'failed', reasons = '[{"code":"E_SIG"}]'`); err != nil {
		t.Fatal(err)
	}
	var vs struct{ Items []registryapi.Version }
	e.must(200, "tenant1", "GET", "/listings/"+l.ID+"/versions", nil).decode(t, &vs)
	if len(vs.Items) != 1 || vs.Items[0].State != "failed" || !strings.Contains(string(vs.Items[0].Reasons), "E_SIG") {
		t.Fatalf("versions %+v", vs)
	}

	// entitlements; the distribution policy agrees.
	policy := server.NewPolicy(e.pool)
	e.must(200, "isv1", "PATCH", "/listings/"+l.ID, item{"visibility": "shared"})
	ok, err := policy.Entitled(context.Background(), e.users["tenant1"].ID, "isv1/conv")
	if err != nil || ok {
		t.Fatalf("entitled before share: %v %v", ok, err)
	}
	e.must(404, "tenant1", "POST", "/listings/"+l.ID+"/subscribe", nil) // shared, not with tenant1: invisible
	var ent registryapi.Entitlement
	e.must(201, "isv1", "POST", "/listings/"+l.ID+"/shares", item{"account": "tenant1"}).decode(t, &ent)
	e.must(200, "isv1", "POST", "/listings/"+l.ID+"/shares", item{"account": "tenant1"})
	e.must(422, "isv1", "POST", "/listings/"+l.ID+"/shares", item{"account": "nobody"})
	ok, err = policy.Entitled(context.Background(), e.users["tenant1"].ID, "isv1/conv")
	if err != nil || !ok {
		t.Fatalf("not entitled after share: %v %v", ok, err)
	}
	e.must(200, "isv1", "PATCH", "/listings/"+l.ID, item{"visibility": "public"})
	e.must(201, "tenant2", "POST", "/listings/"+l.ID+"/subscribe", nil)
	e.must(200, "tenant2", "POST", "/listings/"+l.ID+"/subscribe", nil)
	var ents struct{ Items []registryapi.Entitlement }
	e.must(200, "isv1", "GET", "/entitlements", nil).decode(t, &ents)
	if len(ents.Items) != 2 {
		t.Fatalf("isv entitlements %+v", ents)
	}
	e.must(200, "tenant1", "GET", "/entitlements", nil).decode(t, &ents)
	if len(ents.Items) != 1 || ents.Items[0].ID != ent.ID {
		t.Fatalf("tenant entitlements %+v", ents)
	}
	e.must(204, "tenant1", "DELETE", "/entitlements/"+ent.ID, nil)
	e.must(200, "tenant1", "GET", "/entitlements?active=true", nil).decode(t, &ents)
	if len(ents.Items) != 0 {
		t.Fatalf("after revoke %+v", ents)
	}

	// nodes and usage
	var n registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "fpga-01", "public_key": x25519B64(t)}).decode(t, &n)
	e.must(409, "node1", "POST", "/nodes", item{"hostname": "fpga-01", "public_key": x25519B64(t)})
	e.must(422, "node1", "POST", "/nodes", item{"hostname": "fpga-02", "public_key": "AAAA"})
	e.must(200, "node1", "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{{"model": "u250",
		"slots": []item{{"index": 0, "state": "loaded", "digest": digest}}}}}).decode(t, &n)
	if n.LastHeartbeatAt == nil || !strings.Contains(string(n.Boards), "u250") {
		t.Fatalf("heartbeat %+v", n)
	}
	var nodes struct{ Items []registryapi.Node }
	e.must(200, "admin", "GET", "/nodes", nil).decode(t, &nodes)
	if len(nodes.Items) != 1 {
		t.Fatalf("nodes %+v", nodes)
	}
	// Load grants: none on a node not yet approved, then for entitled
	// tenants only.
	grantReq := item{"node_id": n.ID, "repository": "isv1/conv", "digest": digest}
	r = e.must(403, "tenant2", "POST", "/load-grants", grantReq)
	if !strings.Contains(string(r.body), "node_untrusted") {
		t.Fatalf("grant on an unapproved node: %s", r.body)
	}
	e.must(403, "node1", "POST", "/nodes/"+n.ID+"/approve", nil)
	e.must(200, "admin", "POST", "/nodes/"+n.ID+"/approve", nil).decode(t, &n)
	if n.ApprovedAt == nil || n.ApprovedBy != "admin" {
		t.Fatalf("approved node %+v", n)
	}
	var g struct {
		ID    string
		Grant string
	}
	e.must(201, "tenant2", "POST", "/load-grants", grantReq).decode(t, &g)
	if !strings.HasPrefix(g.Grant, "fgr_") || g.ID == "" {
		t.Fatalf("grant %+v", g)
	}
	e.must(403, "tenant1", "POST", "/load-grants", grantReq) // entitlement revoked above
	e.must(403, "isv2", "POST", "/load-grants", grantReq)
	e.must(403, "node1", "POST", "/load-grants", grantReq)
	e.must(422, "tenant2", "POST", "/load-grants", item{"node_id": n.ID, "repository": "isv1/conv", "digest": "md5:00"})
	report := item{"node_id": n.ID, "records": []item{
		{"report_id": "r1", "tenant_id": e.users["tenant2"].ID, "grant_id": g.ID, "listing_id": l.ID, "event": "load", "board": "u250", "slot": 0},
		{"report_id": "r2", "tenant_id": e.users["tenant2"].ID, "grant_id": g.ID, "event": "busy", "busy_ns": 1_800_000_000_000},
		{"report_id": "r3", "tenant_id": e.users["tenant2"].ID, "grant_id": g.ID, "event": "clear"},
	}}
	var acc struct{ Accepted, Duplicates int }
	e.must(200, "node1", "POST", "/usage", report).decode(t, &acc)
	if acc.Accepted != 3 {
		t.Fatalf("accepted %+v", acc)
	}
	e.must(200, "node1", "POST", "/usage", report).decode(t, &acc)
	if acc.Accepted != 0 || acc.Duplicates != 3 {
		t.Fatalf("idempotence %+v", acc)
	}
	e.must(404, "node2", "POST", "/usage", report)
	var sum struct {
		Items       []registryapi.UsageSummary
		TotalMicros int64 `json:"total_micros"`
	}
	for _, who := range []string{"tenant2", "isv1", "admin"} {
		e.must(200, who, "GET", "/usage/summary", nil).decode(t, &sum)
		// 1 load × 1000 + 0.5 h × 3.6e6 = 1,801,000
		if len(sum.Items) != 1 || sum.Items[0].Loads != 1 || sum.TotalMicros != 1_801_000 {
			t.Fatalf("%s summary %+v", who, sum)
		}
	}
	for _, who := range []string{"tenant1", "isv2"} {
		e.must(200, who, "GET", "/usage/summary", nil).decode(t, &sum)
		if len(sum.Items) != 0 {
			t.Fatalf("%s sees others' usage: %+v", who, sum)
		}
	}

	// audit
	var audit struct{ Items []registryapi.AuditEntry }
	e.must(200, "admin", "GET", "/audit?limit=200", nil).decode(t, &audit)
	actions := map[string]bool{}
	for _, a := range audit.Items {
		actions[a.Action] = true
	}
	for _, want := range []string{"account.create", "token.create", "token.revoke", "key.create", "key.revoke", "listing.create",
		"listing.publish", "listing.update", "listing.version.create", "entitlement.share", "entitlement.subscribe",
		"entitlement.revoke", "node.register", "node.heartbeat", "node.approve", "grant.issue", "usage.report"} {
		if !actions[want] {
			t.Errorf("no audit entry %s", want)
		}
	}
	e.must(200, "isv1", "GET", "/audit", nil).decode(t, &audit)
	// Its listing's entries, its keys' and its own actions.
	for _, a := range audit.Items {
		if a.ActorName != "isv1" && (a.TargetType != "listing" || a.TargetID != l.ID) && a.TargetType != "signing_key" {
			t.Fatalf("isv sees foreign audit entry %+v", a)
		}
	}
	e.must(200, "isv2", "GET", "/audit", nil).decode(t, &audit)
	if len(audit.Items) != 0 {
		t.Fatalf("isv2 sees %+v", audit.Items)
	}
	// A failed change leaves no audit row.
	var before, after int
	_ = e.pool.QueryRow(context.Background(), `select count(*) from audit_log`).Scan(&before)
	e.must(409, "admin", "POST", "/accounts", item{"name": "newtenant", "role": "tenant"})
	_ = e.pool.QueryRow(context.Background(), `select count(*) from audit_log`).Scan(&after)
	if before != after {
		t.Fatal("failed change audited")
	}
}

// TestOpenAPIMatchesRoutes checks that every route is documented and every
// documented operation is routed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(api.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	a, err := api.New(api.Config{DB: &pgxpool.Pool{}, Accounts: &auth.Store{}, Meta: &meta.Store{}})
	if err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	for _, r := range a.Routes() {
		if strings.HasSuffix(r.Path, "/*") {
			continue
		}
		p := strings.TrimPrefix(r.Path, registryapi.Prefix)
		p = regexp.MustCompile(`:([a-z]+)`).ReplaceAllString(p, "{$1}")
		routed[r.Method+" "+p] = true
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("route %s not in openapi.json", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("openapi.json documents %s, not routed", k)
		}
	}
	if len(routed) != 72 {
		t.Errorf("%d routes", len(routed))
	}
}

// TestOpenAPIUnavailable checks that every operation documents the 503 of
// a database that cannot serve requests for now, with its Retry-After.
func TestOpenAPIUnavailable(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string
				Headers     map[string]any
			}
		}
	}
	if err := json.Unmarshal(api.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			r, ok := op.Responses["503"]
			if !ok || !strings.Contains(r.Description, "the database is out of disk space") || r.Headers["Retry-After"] == nil {
				t.Errorf("%s %s: 503 %+v, want the database's faults and Retry-After", m, p, r)
			}
		}
	}
}
