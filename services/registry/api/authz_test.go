package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Callers of the matrix: anonymous, the owning isv (isv1), another isv,
// a tenant without entitlements (tenant2), an admin, the owning node
// account (node1) and another node account.
var matrixRoles = []string{"", "isv1", "isv2", "tenant2", "admin", "node1", "node2"}

const ok = 200 // any 2xx

// TestAuthorizationMatrix calls every endpoint as every role on objects of
// isv1 (a private unpublished listing L, a published public listing P, a
// signing key, an API token, an entitlement of tenant1 to P, a node of node1)
// and checks the status class.
func TestAuthorizationMatrix(t *testing.T) {
	e := newEnv(t)
	var L, P registryapi.Listing
	e.pushManifest("isv1/priv", "v1")
	dP := e.pushManifest("isv1/pub", "v1")
	dL := e.pushManifest("isv1/priv", "v2")
	e.must(201, "isv1", "POST", "/listings", item{"name": "priv", "repository": "isv1/priv"}).decode(t, &L)
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub", "visibility": "public"}).decode(t, &P)
	e.must(200, "isv1", "POST", "/listings/"+P.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/versions", item{"version": "1", "digest": dP})
	var R registryapi.TagRule
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/tag-rules", item{"pattern": "release-*"}).decode(t, &R)
	var K registryapi.SigningKey
	e.must(201, "isv1", "POST", "/keys", item{"public_key": ecKeyPEM(t)}).decode(t, &K)
	var T registryapi.Token
	e.must(201, "isv1", "POST", "/tokens", item{"name": "x"}).decode(t, &T)
	var E registryapi.Entitlement
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/shares", item{"account": "tenant1"}).decode(t, &E)
	var N registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &N)
	e.must(200, "admin", "POST", "/nodes/"+N.ID+"/approve", nil)
	var N2 registryapi.Node // revoked by the matrix
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "n2", "public_key": x25519B64(t)}).decode(t, &N2)
	var W registryapi.Webhook
	e.must(201, "isv1", "POST", "/webhooks", item{"url": "https://hooks.example.com/in", "events": []string{registryapi.EventSubscriptionCreated}}).decode(t, &W)
	e.must(201, "tenant1", "POST", "/listings/"+P.ID+"/subscribe", nil)
	var D, Nt string // the subscription's delivery to W, done, and its notification
	if err := e.pool.QueryRow(context.Background(), `update webhook_deliveries set state = 'failed' where webhook_id = $1
		returning id::text, event_id::text`, W.ID).Scan(&D, &Nt); err != nil {
		t.Fatal(err)
	}
	board := []item{{"model": "sim", "slots": []item{{"index": 0, "state": "cleared"}, {"index": 1, "state": "cleared"}}}}
	cert := nodeCertPEM(t, N.ID, time.Now())
	serve := func() { // (again after the matrix's repin)
		e.must(200, "node1", "POST", "/nodes/"+N.ID+"/heartbeat", item{"boards": board, "endpoint": "https://n1:8443", "tls_certificate": cert})
	}
	serve()
	var A poolapi.Attachment
	e.must(201, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/pub"}).decode(t, &A)
	var G struct{ ID string }
	e.must(201, "tenant1", "POST", "/load-grants", item{"node_id": N.ID, "repository": "isv1/pub", "digest": dP}).decode(t, &G)

	type bodyFn func(who string) any
	constant := func(v any) bodyFn { return func(string) any { return v } }
	cases := []struct {
		method, path string
		body         bodyFn
		want         []int // per matrixRoles
	}{
		{"GET", "/openapi.json", nil, []int{ok, ok, ok, ok, ok, ok, ok}},
		{"GET", "/me", nil, []int{401, ok, ok, ok, ok, ok, ok}},
		{"POST", "/accounts", func(string) any { return item{"name": uniq("acct"), "role": "tenant"} }, []int{401, 403, 403, 403, ok, 403, 403}},
		{"GET", "/accounts", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"PATCH", "/accounts/" + e.users["tenant1"].ID, constant(item{"disabled": false}), []int{401, 403, 403, 403, ok, 403, 403}},
		// A tenant's spend limits are its own and the operators': another
		// tenant's answer 404, as a missing one does.
		{"GET", "/accounts/tenant2/spend-limits", nil, []int{401, 403, 403, ok, ok, 403, 403}},
		{"GET", "/accounts/tenant1/spend-limits", nil, []int{401, 403, 403, 404, ok, 403, 403}},
		{"PUT", "/accounts/tenant2/spend-limits/EUR", constant(item{"alert_micros": 1}), []int{401, 403, 403, ok, ok, 403, 403}},
		{"POST", "/tokens", constant(item{"name": "m"}), []int{401, ok, ok, ok, ok, ok, ok}},
		{"GET", "/tokens", nil, []int{401, ok, ok, ok, ok, ok, ok}},
		{"DELETE", "/tokens/" + T.ID, nil, []int{401, ok, 404, 404, 404, 404, 404}},
		{"POST", "/keys", func(string) any { return item{"public_key": ecKeyPEM(t)} }, []int{401, ok, ok, 403, 403, 403, 403}},
		{"GET", "/keys", nil, []int{401, ok, ok, 403, ok, 403, 403}},
		{"GET", "/signing-keys?repository=isv1/pub", nil, []int{401, ok, ok, ok, ok, ok, ok}},
		{"POST", "/keys/" + K.ID + "/revoke", nil, []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings", func(who string) any { return item{"name": uniq("l"), "repository": who + "/" + uniq("r")} }, []int{401, ok, ok, 403, 403, 403, 403}},
		{"GET", "/listings", nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"GET", "/catalog?q=pub&category=ML&sort=price", nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"GET", "/listings/" + L.ID, nil, []int{404, ok, 404, 404, ok, 403, 403}},
		{"GET", "/listings/" + P.ID, nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"PATCH", "/listings/" + L.ID, constant(item{"summary": "s"}), []int{401, ok, 404, 403, ok, 403, 403}},
		// Another ISV's listing is not its to manage, visible or not: 404
		// (the one answer of the management routes, here and in the portal).
		{"PATCH", "/listings/" + P.ID, constant(item{"summary": "s"}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + P.ID + "/publish", nil, []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + L.ID + "/unpublish", nil, []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + L.ID + "/versions", func(string) any { return item{"version": uniq("v"), "digest": dL} }, []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + P.ID + "/versions", func(string) any { return item{"version": uniq("v"), "digest": dP} }, []int{401, ok, 404, 403, ok, 403, 403}},
		{"GET", "/listings/" + L.ID + "/versions", nil, []int{404, ok, 404, 404, ok, 403, 403}},
		{"GET", "/listings/" + P.ID + "/versions", nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"GET", "/invoices", nil, []int{401, 403, 403, ok, ok, 403, 403}},
		{"GET", "/revenue-statements?format=csv", nil, []int{401, ok, ok, 403, ok, 403, 403}},
		{"POST", "/months/2001-01/close", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"GET", "/listings/" + L.ID + "/prices", nil, []int{404, ok, 404, 404, ok, 403, 403}},
		{"GET", "/listings/" + P.ID + "/prices", nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"POST", "/listings/" + L.ID + "/prices", constant(item{"per_load_micros": 5}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + P.ID + "/prices", constant(item{"per_load_micros": 1000}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + L.ID + "/subscribe", nil, []int{401, 403, 403, 404, 403, 403, 403}},
		{"POST", "/listings/" + P.ID + "/subscribe", nil, []int{401, 403, 403, ok, 403, 403, 403}},
		{"POST", "/listings/" + L.ID + "/shares", constant(item{"account": "tenant1"}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + P.ID + "/shares", constant(item{"account": "tenant1"}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"GET", "/listings/" + P.ID + "/tag-rules", nil, []int{401, ok, 404, 403, ok, 403, 403}},
		{"POST", "/listings/" + P.ID + "/tag-rules", func(string) any { return item{"pattern": uniq("rc-") + "*"} }, []int{401, ok, 404, 403, ok, 403, 403}},
		// isv1 deletes the rule, so the admin after it finds none.
		{"DELETE", "/listings/" + P.ID + "/tag-rules/" + R.ID, nil, []int{401, ok, 404, 403, 404, 403, 403}},
		{"GET", "/listings/" + P.ID + "/tags/1", nil, []int{401, ok, 404, 403, ok, 403, 403}},
		{"PUT", "/listings/" + P.ID + "/logo", constant(rawBody{"image/png", pngOf(t, 16, 16)}), []int{401, ok, 404, 403, ok, 403, 403}},
		{"GET", "/listings/" + P.ID + "/logo", nil, []int{ok, ok, ok, ok, ok, 403, 403}},
		{"GET", "/listings/" + L.ID + "/logo", nil, []int{404, 404, 404, 404, 404, 403, 403}}, // no logo; hidden besides
		// isv1 deletes the logo, so the admin after it finds none.
		{"DELETE", "/listings/" + P.ID + "/logo", nil, []int{401, ok, 404, 403, 404, 403, 403}},
		{"PUT", "/listings/" + P.ID + "/versions/1/docs", constant(item{"markdown": "# Use"}), []int{401, ok, 404, 403, ok, 403, 403}},
		// Anonymous visitors read the docs of available versions only.
		{"GET", "/listings/" + P.ID + "/versions/1/docs", nil, []int{404, ok, ok, ok, ok, 403, 403}},
		{"GET", "/entitlements", nil, []int{401, ok, ok, ok, ok, 403, 403}},
		{"DELETE", "/entitlements/" + E.ID, nil, []int{401, ok, 404, 404, ok, 403, 403}},
		{"POST", "/nodes", func(string) any { return item{"hostname": uniq("h"), "public_key": x25519B64(t)} }, []int{401, 403, 403, 403, 403, ok, ok}},
		{"POST", "/nodes/" + N.ID + "/heartbeat", constant(item{"boards": board}), []int{401, 403, 403, 403, 403, ok, 404}},
		{"GET", "/nodes", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"POST", "/nodes/" + N.ID + "/approve", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"POST", "/nodes/" + N.ID + "/repin", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"POST", "/nodes/" + N2.ID + "/revoke", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		// Nodes only, and each asking is audited; an empty request is
		// refused for what it is.
		{"POST", "/keys/release", constant(item{}), []int{401, 403, 403, 403, 403, 400, 400}},
		{"POST", "/node-enrollments", constant(item{}), []int{401, 403, 403, 403, ok, 403, 403}},
		{"POST", "/load-grants", constant(item{"node_id": N.ID, "repository": "isv1/pub", "digest": dP}), []int{401, ok, 403, ok, ok, 403, 403}}, // tenant2 subscribed above
		{"POST", "/usage", func(string) any {
			return item{"node_id": N.ID, "records": []item{{"report_id": uniq("r"), "tenant_id": e.users["tenant1"].ID, "grant_id": G.ID,
				"listing_id": P.ID, "event": "load"}}}
		}, []int{401, 403, 403, 403, 403, ok, 404}},
		{"GET", "/usage/summary", nil, []int{401, ok, ok, ok, ok, 403, 403}},
		{"GET", "/audit", nil, []int{401, ok, ok, 403, ok, 403, 403}},
		{"GET", "/validation-jobs", nil, []int{401, 403, 403, 403, ok, 403, 403}},
		{"GET", "/loads", nil, []int{401, ok, ok, ok, ok, 403, 403}},
		{"POST", "/attachments", func(string) any { serve(); return poolapi.AttachRequest{Listing: "isv1/pub"} }, []int{401, 403, 403, ok, 403, 403, 403}},
		{"GET", "/attachments", nil, []int{401, 403, 403, ok, ok, 403, 403}},
		{"GET", "/attachments/" + A.ID, nil, []int{401, 403, 403, 404, ok, 403, 403}},
		{"POST", "/attachments/" + A.ID + "/renew", nil, []int{401, 403, 403, 404, 403, 403, 403}},
		{"GET", "/nodes/" + N.ID + "/assignments", nil, []int{401, 403, 403, 403, 403, ok, 404}},
		{"POST", "/nodes/" + N.ID + "/attachments/" + A.ID + "/grant", nil, []int{401, 403, 403, 403, 403, ok, 404}},
		{"POST", "/nodes/" + N.ID + "/attachments/" + A.ID + "/state", constant(poolapi.StateReport{State: poolapi.Loading}), []int{401, 403, 403, 403, 403, ok, 404}},
		{"DELETE", "/attachments/" + A.ID, nil, []int{401, 403, 403, 404, ok, 403, 403}},
		{"POST", "/webhooks", constant(item{"url": "https://hooks.example.com/m", "events": []string{registryapi.EventTokenExpiring}}), []int{401, ok, ok, ok, ok, 403, 403}},
		{"GET", "/webhooks", nil, []int{401, ok, ok, ok, ok, 403, 403}},
		{"GET", "/webhooks/" + W.ID, nil, []int{401, ok, 404, 404, 404, 403, 403}},
		{"PATCH", "/webhooks/" + W.ID, constant(item{"active": true}), []int{401, ok, 404, 404, 404, 403, 403}},
		{"GET", "/webhooks/" + W.ID + "/deliveries", nil, []int{401, ok, 404, 404, 404, 403, 403}},
		{"POST", "/webhooks/" + W.ID + "/deliveries/" + D + "/redeliver", nil, []int{401, 202, 404, 404, 404, 403, 403}},
		{"DELETE", "/webhooks/" + W.ID, nil, []int{401, ok, 404, 404, 404, 403, 403}},
		{"GET", "/notifications", nil, []int{401, ok, ok, ok, ok, 403, 403}},
		{"POST", "/notifications/" + Nt + "/read", nil, []int{401, ok, 404, 404, 404, 403, 403}},
	}
	routes := map[string]bool{}
	n := 0
	for _, c := range cases {
		routes[c.method+" "+pattern(c.path)] = true
		for i, who := range matrixRoles {
			var body any
			if c.body != nil {
				body = c.body(who)
			}
			r := e.do(who, c.method, c.path, body)
			want := c.want[i]
			good := r.status == want || (want == ok && r.status >= 200 && r.status < 300)
			if !good {
				t.Errorf("%s %s as %q: status %d, want %d: %s", c.method, c.path, who, r.status, want, r.body)
			}
			if r.status >= 400 && !strings.Contains(string(r.body), `"error":{"code":`) {
				t.Errorf("%s %s as %q: error body %s", c.method, c.path, who, r.body)
			}
			n++
		}
	}
	t.Logf("%d matrix cases", n)
	for _, r := range e.api.Routes() {
		if strings.HasSuffix(r.Path, "/*") {
			continue
		}
		if !routes[r.Method+" "+strings.TrimPrefix(r.Path, registryapi.Prefix)] {
			t.Errorf("route %s %s not covered by the matrix", r.Method, r.Path)
		}
	}

	// Listings contents: no cross-account leaks.
	for _, who := range []string{"", "isv2", "tenant2"} {
		var list struct{ Items []registryapi.Listing }
		e.must(http.StatusOK, who, "GET", "/listings", nil).decode(t, &list)
		for _, l := range list.Items {
			if l.ID == L.ID {
				t.Errorf("%q sees private listing", who)
			}
		}
	}
	var keys struct{ Items []registryapi.SigningKey }
	e.must(200, "isv2", "GET", "/keys", nil).decode(t, &keys)
	for _, k := range keys.Items {
		if k.AccountID != e.users["isv2"].ID {
			t.Errorf("isv2 sees key %+v", k)
		}
	}
	for _, who := range []string{"isv2", "tenant2"} {
		var ents struct{ Items []registryapi.Entitlement }
		e.must(200, who, "GET", "/entitlements", nil).decode(t, &ents)
		for _, x := range ents.Items {
			if x.AccountID != e.users[who].ID {
				t.Errorf("%s sees entitlement %+v", who, x)
			}
		}
	}
	// Bad credentials never fall back to anonymous.
	req, _ := http.NewRequest("GET", e.url+registryapi.Prefix+"/listings", nil)
	req.Header.Set("Authorization", "Bearer faas_wrong")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("bad token: %d", res.StatusCode)
	}
	req.SetBasicAuth("isv1", "wrong")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("bad password: %d", res.StatusCode)
	}
}

// pattern turns a concrete path back into its route pattern.
var monthRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}$`)

func pattern(p string) string {
	p, _, _ = strings.Cut(p, "?")
	parts := strings.Split(p, "/")
	ids := 0
	for i, s := range parts {
		switch {
		case i > 0 && parts[i-1] == "tag-rules":
			parts[i] = ":rule"
		case i > 0 && parts[i-1] == "tags":
			parts[i] = ":tag"
		case i > 1 && parts[i-1] == "versions" && i+1 < len(parts):
			parts[i] = ":version"
		case i > 0 && parts[i-1] == "deliveries":
			parts[i] = ":delivery"
		case i > 0 && parts[i-1] == "accounts" && i+1 < len(parts) && parts[i+1] == "spend-limits":
			parts[i] = ":name"
		case i > 0 && parts[i-1] == "spend-limits":
			parts[i] = ":currency"
		case len(s) == 36 && strings.Count(s, "-") == 4:
			parts[i] = []string{":id", ":aid"}[min(ids, 1)]
			ids++
		}
		if monthRE.MatchString(s) {
			parts[i] = ":month"
		}
	}
	return strings.Join(parts, "/")
}
