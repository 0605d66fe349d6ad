package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

func TestUpdateAccount(t *testing.T) {
	e := newEnv(t)
	t1 := e.users["tenant1"].ID
	e.must(200, "tenant1", "GET", "/me", nil)

	var a registryapi.Account
	e.must(200, "admin", "PATCH", "/accounts/"+t1, item{"disabled": true}).decode(t, &a)
	if !a.Disabled || a.Name != "tenant1" {
		t.Fatalf("after disabling: %+v", a)
	}
	// A disabled account's token opens nothing.
	e.must(401, "tenant1", "GET", "/me", nil)
	e.must(200, "admin", "PATCH", "/accounts/"+t1, item{"disabled": false})
	e.must(200, "tenant1", "GET", "/me", nil)

	e.must(200, "admin", "PATCH", "/accounts/"+e.users["tenant2"].ID, item{"role": "isv"}).decode(t, &a)
	var me registryapi.Account
	if e.must(200, "tenant2", "GET", "/me", nil).decode(t, &me); me.Role != "isv" {
		t.Fatalf("tenant2 after the role change: %+v", me)
	}

	for _, c := range []struct {
		what   string
		id     string
		body   item
		status int
		msg    string
	}{
		{"own account", e.users["admin"].ID, item{"disabled": true}, 403, "your own account"},
		{"own role", e.users["admin"].ID, item{"role": "tenant"}, 403, "your own account"},
		{"a node's role", e.users["node1"].ID, item{"role": "tenant"}, 422, "node"},
		{"becoming a node", t1, item{"role": "node"}, 422, "node"},
		{"unknown role", t1, item{"role": "root"}, 422, "role"},
		{"nothing", t1, item{}, 400, "nothing to change"},
		{"unknown field", t1, item{"name": "x"}, 422, "unknown field"},
		{"no such account", "00000000-0000-0000-0000-000000000000", item{"disabled": true}, 404, "account"},
		{"not an id", "x", item{"disabled": true}, 404, "account"},
	} {
		r := e.must(c.status, "admin", "PATCH", "/accounts/"+c.id, c.body)
		if !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s: %s, want %q", c.what, r.body, c.msg)
		}
	}
	// An ISV with listings stays one.
	e.must(201, "isv1", "POST", "/listings", item{"name": "l", "repository": "isv1/l"})
	e.must(409, "admin", "PATCH", "/accounts/"+e.users["isv1"].ID, item{"role": "tenant"})

	var audit struct{ Items []registryapi.AuditEntry }
	e.must(200, "admin", "GET", "/audit?action=account.update&target_id="+t1, nil).decode(t, &audit)
	if len(audit.Items) != 2 || !strings.Contains(string(audit.Items[1].Details), `"disabled":true`) || audit.Items[0].ActorName != "admin" {
		t.Fatalf("audit of tenant1's changes: %+v", audit.Items)
	}
}

func TestValidationJobs(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/pub", "v1")
	var P registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub"}).decode(t, &P)
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/versions", item{"version": "1", "digest": d})
	if _, err := e.pool.Exec(context.Background(), `update validation_jobs set state = 'failed', attempts = 2,
		reasons = '[{"code":"E_SIG","message":"bad signature"}]'`); err != nil {
		t.Fatal(err)
	}
	var jobs struct{ Items []registryapi.ValidationJob }
	e.must(200, "admin", "GET", "/validation-jobs", nil).decode(t, &jobs)
	if len(jobs.Items) != 1 {
		t.Fatalf("jobs %+v", jobs.Items)
	}
	j := jobs.Items[0]
	if j.Repository != "isv1/pub" || j.Digest != d || j.State != "failed" || j.Attempts != 2 || j.ListingName != "pub" ||
		!strings.Contains(string(j.Reasons), "E_SIG") {
		t.Fatalf("job %+v", j)
	}
	e.must(200, "admin", "GET", "/validation-jobs?state=pending", nil).decode(t, &jobs)
	if len(jobs.Items) != 0 {
		t.Fatalf("pending jobs %+v", jobs.Items)
	}
	e.must(422, "admin", "GET", "/validation-jobs?state=done", nil)
}

// TestLoads: a tenant sees the slots running its images, from the nodes'
// heartbeats and its load records, and nobody else's.
func TestLoads(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/pub", "v1")
	var P registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub", "visibility": "public"}).decode(t, &P)
	e.must(200, "isv1", "POST", "/listings/"+P.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/versions", item{"version": "1", "digest": d})
	var N registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &N)
	e.must(200, "admin", "POST", "/nodes/"+N.ID+"/approve", nil)
	load := func(tenant string, slot int) {
		t.Helper()
		if r := e.do(tenant, "POST", "/listings/"+P.ID+"/subscribe", nil); r.status >= 300 {
			t.Fatalf("subscribe: %d %s", r.status, r.body)
		}
		var G struct{ ID string }
		e.must(201, tenant, "POST", "/load-grants", item{"node_id": N.ID, "repository": "isv1/pub", "digest": d}).decode(t, &G)
		e.must(200, "node1", "POST", "/usage", item{"node_id": N.ID, "records": []item{{"report_id": uniq("r"),
			"tenant_id": e.users[tenant].ID, "grant_id": G.ID, "event": "load", "slot": slot, "digest": d}}})
	}
	heartbeat := func(states ...string) {
		t.Helper()
		var slots []item
		for i, s := range states {
			sl := item{"index": i, "state": s}
			if s != "cleared" {
				sl["digest"] = d
			}
			slots = append(slots, sl)
		}
		e.must(200, "node1", "POST", "/nodes/"+N.ID+"/heartbeat", item{"boards": []item{{"model": "faas-vu9p-2", "slots": slots}}})
	}
	loads := func(who string) []registryapi.Load {
		t.Helper()
		var res struct{ Items []registryapi.Load }
		e.must(200, who, "GET", "/loads", nil).decode(t, &res)
		return res.Items
	}

	load("tenant1", 0)
	load("tenant2", 1)
	heartbeat("busy", "loaded")
	got := loads("tenant1")
	if len(got) != 1 || got[0].Slot != 0 || got[0].State != "busy" || got[0].Hostname != "n1" || got[0].Board != "faas-vu9p-2" ||
		got[0].ListingName != "pub" || got[0].Digest != d || got[0].LastHeartbeatAt == nil {
		t.Fatalf("tenant1's loads: %+v", got)
	}
	if got := loads("tenant2"); len(got) != 1 || got[0].Slot != 1 {
		t.Fatalf("tenant2's loads: %+v", got)
	}
	for _, who := range []string{"isv1", "admin"} {
		if got := loads(who); len(got) != 0 {
			t.Fatalf("%s sees others' loads: %+v", who, got)
		}
	}
	// tenant2 loads slot 0 after tenant1: the slot is tenant2's now.
	load("tenant2", 0)
	if got := loads("tenant1"); len(got) != 0 {
		t.Fatalf("tenant1's loads after tenant2 took slot 0: %+v", got)
	}
	// A cleared slot is no load.
	heartbeat("loaded", "cleared")
	if got := loads("tenant2"); len(got) != 1 || got[0].Slot != 0 {
		t.Fatalf("tenant2's loads after slot 1 cleared: %+v", got)
	}
	// A heartbeat that is not an array of boards changes nothing here.
	if _, err := e.pool.Exec(context.Background(), `update nodes set boards = '{"x":1}'`); err != nil {
		t.Fatal(err)
	}
	if got := loads("tenant2"); len(got) != 0 {
		t.Fatalf("loads from malformed boards: %+v", got)
	}
}

func TestUsagePerDay(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/pub", "v1")
	var P registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub", "visibility": "public",
		"price_per_load_micros": 1000}).decode(t, &P)
	e.must(200, "isv1", "POST", "/listings/"+P.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/versions", item{"version": "1", "digest": d})
	e.must(201, "tenant1", "POST", "/listings/"+P.ID+"/subscribe", nil)
	var N registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &N)
	e.must(200, "admin", "POST", "/nodes/"+N.ID+"/approve", nil)
	for range 2 {
		var G struct{ ID string }
		e.must(201, "tenant1", "POST", "/load-grants", item{"node_id": N.ID, "repository": "isv1/pub", "digest": d}).decode(t, &G)
		e.must(200, "node1", "POST", "/usage", item{"node_id": N.ID, "records": []item{{"report_id": uniq("r"),
			"tenant_id": e.users["tenant1"].ID, "grant_id": G.ID, "event": "load"}}})
	}
	if _, err := e.pool.Exec(context.Background(), `update usage_records set recorded_at = '2030-01-02T10:00:00Z'
		where id = (select min(id) from usage_records)`); err != nil {
		t.Fatal(err)
	}
	var sum struct{ Items []registryapi.UsageSummary }
	e.must(200, "isv1", "GET", "/usage/summary?by=day", nil).decode(t, &sum)
	today := time.Now().UTC().Format("2006-01-02")
	if len(sum.Items) != 2 || sum.Items[0].Day != today || sum.Items[1].Day != "2030-01-02" || sum.Items[1].Loads != 1 ||
		sum.Items[1].TotalMicros != 1000 || sum.Items[0].Tenant != "tenant1" {
		t.Fatalf("per day: %+v", sum.Items)
	}
	sum.Items = nil
	e.must(200, "isv1", "GET", "/usage/summary", nil).decode(t, &sum)
	if len(sum.Items) != 1 || sum.Items[0].Day != "" || sum.Items[0].Loads != 2 {
		t.Fatalf("whole: %+v", sum.Items)
	}
	e.must(422, "isv1", "GET", "/usage/summary?by=week", nil)
	e.must(200, "isv2", "GET", "/usage/summary?by=day", nil).decode(t, &sum)
	if len(sum.Items) != 0 {
		t.Fatalf("isv2 sees isv1's usage: %+v", sum.Items)
	}
}

// TestAuditOfAnISV: an ISV sees entries about its listings and keys and its
// own actions, filtered by actor too; never another ISV's.
func TestAuditOfAnISV(t *testing.T) {
	e := newEnv(t)
	var K registryapi.SigningKey
	e.must(201, "isv1", "POST", "/keys", item{"public_key": ecKeyPEM(t)}).decode(t, &K)
	e.must(200, "admin", "POST", "/keys/"+K.ID+"/revoke", nil)
	e.must(201, "isv1", "POST", "/tokens", item{"name": "ci"})
	e.must(201, "isv2", "POST", "/tokens", item{"name": "theirs"})
	e.must(201, "isv2", "POST", "/listings", item{"name": "x", "repository": "isv2/x"})

	var audit struct{ Items []registryapi.AuditEntry }
	e.must(200, "isv1", "GET", "/audit", nil).decode(t, &audit)
	seen := map[string]bool{}
	for _, a := range audit.Items {
		seen[a.Action+" by "+a.ActorName] = true
		if a.ActorName == "isv2" {
			t.Errorf("isv1 sees isv2's entry %+v", a)
		}
	}
	for _, want := range []string{"key.create by isv1", "key.revoke by admin", "token.create by isv1"} {
		if !seen[want] {
			t.Errorf("isv1's audit lacks %s: %v", want, seen)
		}
	}
	e.must(200, "isv1", "GET", "/audit?actor=admin", nil).decode(t, &audit)
	if len(audit.Items) != 1 || audit.Items[0].Action != "key.revoke" {
		t.Fatalf("isv1's audit by admin: %+v", audit.Items)
	}
	e.must(422, "isv1", "GET", "/audit?actor="+strings.Repeat("a", 300), nil)
}
