package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// TestUsageNeedsGrant holds a finding of the outside probe (SECURITY.md),
// "usage is taken on trust": a node reported loads for any tenant on any
// listing, and they reached the tenant's usage summary. A record must now name a load grant given to that
// node for that tenant; anything else is refused (422) and audited.
func TestUsageNeedsGrant(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/pub", "v1")
	other := e.pushManifest("isv1/pub", "v2")
	var P registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub", "visibility": "public",
		"price_per_load_micros": 1000}).decode(t, &P)
	e.must(200, "isv1", "POST", "/listings/"+P.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings/"+P.ID+"/versions", item{"version": "1", "digest": d})
	e.must(201, "tenant1", "POST", "/listings/"+P.ID+"/subscribe", nil)
	var N1, N2 registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &N1)
	e.must(201, "node2", "POST", "/nodes", item{"hostname": "n2", "public_key": x25519B64(t)}).decode(t, &N2)
	for _, n := range []registryapi.Node{N1, N2} {
		e.must(200, "admin", "POST", "/nodes/"+n.ID+"/approve", nil)
	}
	var G struct{ ID string }
	e.must(201, "tenant1", "POST", "/load-grants", item{"node_id": N1.ID, "repository": "isv1/pub", "digest": d}).decode(t, &G)

	rec := func(tenant, grant string, extra ...any) item {
		r := item{"report_id": uniq("r"), "tenant_id": e.users[tenant].ID, "grant_id": grant, "event": "load"}
		for i := 0; i+1 < len(extra); i += 2 {
			r[extra[i].(string)] = extra[i+1]
		}
		return r
	}
	refused := []struct {
		what, who string
		report    item
	}{
		{"a tenant the node never served (the probe's attack)", "node1", item{"node_id": N1.ID, "records": []item{
			rec("tenant2", G.ID, "listing_id", P.ID)}}},
		{"a grant that does not exist", "node1", item{"node_id": N1.ID, "records": []item{
			rec("tenant1", "00000000-0000-0000-0000-000000000000")}}},
		{"another node's grant", "node2", item{"node_id": N2.ID, "records": []item{rec("tenant1", G.ID)}}},
		{"another image than the grant's", "node1", item{"node_id": N1.ID, "records": []item{rec("tenant1", G.ID, "digest", other)}}},
		{"a good record batched with a forged one", "node1", item{"node_id": N1.ID, "records": []item{
			rec("tenant1", G.ID), rec("tenant2", G.ID)}}},
	}
	for _, c := range refused {
		r := e.must(422, c.who, "POST", "/usage", c.report)
		if !strings.Contains(string(r.body), "grant") {
			t.Errorf("%s: %s", c.what, r.body)
		}
	}
	var sum struct {
		Items       []registryapi.UsageSummary
		TotalMicros int64 `json:"total_micros"`
	}
	for _, who := range []string{"tenant1", "tenant2"} {
		e.must(200, who, "GET", "/usage/summary", nil).decode(t, &sum)
		if len(sum.Items) != 0 {
			t.Fatalf("%s's usage after refused reports: %+v", who, sum)
		}
	}
	var denied int
	if err := e.pool.QueryRow(context.Background(), `select count(*) from audit_log
		where action = 'usage.report' and outcome like 'denied:%grant%'`).Scan(&denied); err != nil {
		t.Fatal(err)
	}
	if denied != len(refused) {
		t.Errorf("%d denied usage reports audited, want %d", denied, len(refused))
	}

	// The grant backs at most MaxLoadsPerGrant loads; its listing and
	// image are the grant's, whatever the node says.
	for i := range nodetrust.MaxLoadsPerGrant {
		e.must(200, "node1", "POST", "/usage", item{"node_id": N1.ID, "records": []item{rec("tenant1", G.ID, "slot", i)}})
	}
	e.must(422, "node1", "POST", "/usage", item{"node_id": N1.ID, "records": []item{rec("tenant1", G.ID)}})
	e.must(200, "tenant1", "GET", "/usage/summary", nil).decode(t, &sum)
	if len(sum.Items) != 1 || sum.Items[0].ListingID != P.ID || sum.Items[0].Loads != int64(nodetrust.MaxLoadsPerGrant) {
		t.Fatalf("tenant1's usage %+v", sum)
	}
	// A revoked node reports nothing more.
	e.must(200, "admin", "POST", "/nodes/"+N1.ID+"/revoke", nil)
	r := e.do("node1", "POST", "/usage", item{"node_id": N1.ID, "records": []item{rec("tenant1", G.ID, "event", "clear")}})
	if r.status < 400 {
		t.Fatalf("revoked node's report: %d %s", r.status, r.body)
	}
}
