package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/shell"
)

// pool is a registry API with a published listing of a one-chip and a
// two-chip image, tenant1 subscribed, and two approved nodes serving
// remote attach with two chips each.
type pool struct {
	*env
	listing      registryapi.Listing
	one, two     string // digests of versions "1" and "2"
	nodes        map[string]registryapi.Node
	digestOnSlot map[string]map[int]string // what each node's heartbeat says is loaded
	certs        map[string]string
	model        map[string]string // the board model each node reports; "sim" when unset
}

func newPool(t *testing.T, cfg api.AttachConfig) *pool {
	e := newEnvWith(t, api.Config{Attach: cfg})
	p := &pool{env: e, nodes: map[string]registryapi.Node{}, digestOnSlot: map[string]map[int]string{}, certs: map[string]string{}, model: map[string]string{}}
	p.one = e.pushManifest("isv1/mnist", "v1")
	p.two = p.pushImage("isv1/mnist", "v2", 2)
	e.must(201, "isv1", "POST", "/listings", item{"name": "mnist", "repository": "isv1/mnist", "visibility": "public"}).decode(t, &p.listing)
	e.must(200, "isv1", "POST", "/listings/"+p.listing.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings/"+p.listing.ID+"/versions", item{"version": "1", "digest": p.one})
	e.must(201, "isv1", "POST", "/listings/"+p.listing.ID+"/versions", item{"version": "2", "digest": p.two})
	e.must(201, "tenant1", "POST", "/listings/"+p.listing.ID+"/subscribe", nil)
	e.must(201, "tenant2", "POST", "/listings/"+p.listing.ID+"/subscribe", nil)
	for _, name := range []string{"node1", "node2"} {
		var n registryapi.Node
		e.must(201, name, "POST", "/nodes", item{"hostname": "h-" + name, "public_key": x25519B64(t)}).decode(t, &n)
		e.must(200, "admin", "POST", "/nodes/"+n.ID+"/approve", nil)
		p.nodes[name] = n
		p.digestOnSlot[name] = map[int]string{}
		p.certs[name] = nodeCertPEM(t, n.ID, time.Now())
		p.heartbeat(name)
	}
	return p
}

// pushImage stores a manifest with chips bitstream layers.
func (p *pool) pushImage(repo, tag string, chips int) string {
	var layers []string
	for i := range chips {
		layers = append(layers, fmt.Sprintf(`{"mediaType":%q,"digest":"sha256:%064d","size":1}`, image.BitstreamMediaType, i))
	}
	content := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[` + strings.Join(layers, ",") + `]}`)
	sum := sha256.Sum256(content)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if err := p.meta.PutManifest(context.Background(), repo, meta.Manifest{Digest: d, MediaType: "application/vnd.oci.image.manifest.v1+json", Content: content}, tag); err != nil {
		p.t.Fatal(err)
	}
	return d
}

// heartbeat reports node name's board: slots 0 and 1, loaded with what
// digestOnSlot says, else cleared.
func (p *pool) heartbeat(name string) {
	n := p.nodes[name]
	var slots []item
	for i := range 2 {
		if d := p.digestOnSlot[name][i]; d != "" {
			slots = append(slots, item{"index": i, "state": "loaded", "digest": d})
		} else {
			slots = append(slots, item{"index": i, "state": "cleared"})
		}
	}
	model := p.model[name]
	if model == "" {
		model = "sim"
	}
	p.must(200, name, "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{{"model": model, "slots": slots}},
		"endpoint": "https://" + n.Hostname + ":8443", "tls_certificate": p.certs[name]})
}

func (p *pool) attach(who string, req poolapi.AttachRequest) poolapi.Attachment {
	p.t.Helper()
	var a poolapi.Attachment
	p.must(201, who, "POST", "/attachments", req).decode(p.t, &a)
	return a
}

func (p *pool) nodeOf(a poolapi.Attachment) string {
	for name, n := range p.nodes {
		if n.ID == a.NodeID {
			return name
		}
	}
	p.t.Fatalf("attachment on unknown node %s", a.NodeID)
	return ""
}

func (p *pool) assignments(node string, since int64) poolapi.Assignments {
	p.t.Helper()
	var as poolapi.Assignments
	p.must(200, node, "GET", fmt.Sprintf("/nodes/%s/assignments?since=%d&wait=5s", p.nodes[node].ID, since), nil).decode(p.t, &as)
	return as
}

func (p *pool) report(node, aid string, r poolapi.StateReport) {
	p.t.Helper()
	p.must(204, node, "POST", "/nodes/"+p.nodes[node].ID+"/attachments/"+aid+"/state", r)
}

func (p *pool) get(who, id string) poolapi.Attachment {
	p.t.Helper()
	var a poolapi.Attachment
	p.must(200, who, "GET", "/attachments/"+id, nil).decode(p.t, &a)
	return a
}

func (p *pool) audited(action, id string) int {
	var n int
	if err := p.pool.QueryRow(context.Background(), `select count(*) from audit_log where action = $1 and target_id = $2`, action, id).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// TestAttachLifecycle walks an attachment from placement to release as the
// tenant, the node and the registry see it, and checks who may see what.
func TestAttachLifecycle(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	a := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if a.State != poolapi.Pending || a.Digest != p.one || a.Version != "1" || a.Listing != "mnist" || a.Tenant != "tenant1" ||
		a.Endpoint == "" || a.TLSCertificate == "" || a.ServerName != a.NodeID+".node.faas" || a.LeaseSeconds != poolapi.DefaultLeaseSeconds {
		t.Fatalf("attachment %+v", a)
	}
	id, secret, ok := strings.Cut(strings.TrimPrefix(a.Credential, poolapi.CredentialPrefix), "_")
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	if !ok || id != a.ID || err != nil || len(raw) != 32 {
		t.Fatalf("credential %q", a.Credential)
	}
	if got := p.get("tenant1", a.ID); got.Credential != "" {
		t.Fatal("the credential is shown again")
	}
	node := p.nodeOf(a)
	other := map[string]string{"node1": "node2", "node2": "node1"}[node]

	// The node sees it, with the credential's hash only; the other node
	// does not, and may not look.
	as := p.assignments(node, 0)
	sum := sha256.Sum256(raw)
	if len(as.Assignments) != 1 || as.Assignments[0].ID != a.ID || as.Assignments[0].CredentialSHA256 != hex.EncodeToString(sum[:]) ||
		as.Assignments[0].Tenant != "tenant1" || as.Assignments[0].Chips != 1 || as.Assignments[0].Slot != a.Slot || as.Revision == 0 {
		t.Fatalf("assignments %+v", as)
	}
	if as := p.assignments(other, 0); len(as.Assignments) != 0 {
		t.Fatalf("other node's assignments %+v", as)
	}
	p.must(404, other, "GET", "/nodes/"+p.nodes[node].ID+"/assignments", nil)
	p.must(404, "tenant2", "GET", "/attachments/"+a.ID, nil)
	p.must(403, "tenant1", "GET", "/nodes/"+p.nodes[node].ID+"/assignments", nil)

	// A long poll at the current revision waits for the next change.
	polled := make(chan poolapi.Assignments, 1)
	go func() {
		var got poolapi.Assignments
		r := p.do(node, "GET", fmt.Sprintf("/nodes/%s/assignments?since=%d&wait=30s", p.nodes[node].ID, as.Revision), nil)
		r.decode(t, &got)
		polled <- got
	}()
	waited := make(chan poolapi.Attachment, 1)
	go func() {
		var got poolapi.Attachment
		p.do("tenant1", "GET", "/attachments/"+a.ID+"?wait=30s&since=pending", nil).decode(t, &got)
		waited <- got
	}()

	// The node loads it: a grant for the tenant's image, then its reports.
	var g struct {
		Grant    string `json:"grant"`
		TenantID string `json:"tenant_id"`
		NodeID   string `json:"node_id"`
		Digest   string `json:"digest"`
	}
	p.must(201, node, "POST", "/nodes/"+p.nodes[node].ID+"/attachments/"+a.ID+"/grant", nil).decode(t, &g)
	if !strings.HasPrefix(g.Grant, "fgr_") || g.TenantID != p.users["tenant1"].ID || g.NodeID != a.NodeID || g.Digest != p.one {
		t.Fatalf("grant %+v", g)
	}
	p.must(404, other, "POST", "/nodes/"+p.nodes[other].ID+"/attachments/"+a.ID+"/grant", nil)
	p.report(node, a.ID, poolapi.StateReport{State: poolapi.Loading})
	if got := <-polled; got.Revision <= as.Revision || got.Assignments[0].State != poolapi.Loading {
		t.Fatalf("long poll answered %+v", got)
	}
	p.must(422, node, "POST", "/nodes/"+p.nodes[node].ID+"/attachments/"+a.ID+"/state", poolapi.StateReport{State: poolapi.Ready, Slots: []int{a.Slot + 1}})
	p.report(node, a.ID, poolapi.StateReport{State: poolapi.Ready, Slots: []int{a.Slot}})
	if got := <-waited; got.State != poolapi.Loading && got.State != poolapi.Ready {
		t.Fatalf("tenant's wait answered %+v", got)
	}
	if got := p.get("tenant1", a.ID); got.State != poolapi.Ready || got.ReadyAt == nil {
		t.Fatalf("after ready: %+v", got)
	}

	// Renewal extends the lease.
	var r poolapi.Attachment
	time.Sleep(10 * time.Millisecond)
	p.must(200, "tenant1", "POST", "/attachments/"+a.ID+"/renew", nil).decode(t, &r)
	if !r.LeaseExpiresAt.After(a.LeaseExpiresAt) {
		t.Fatalf("lease %v not past %v", r.LeaseExpiresAt, a.LeaseExpiresAt)
	}
	p.must(404, "tenant2", "POST", "/attachments/"+a.ID+"/renew", nil)

	// A second tenant lands on the other node: attachments spread.
	b := p.attach("tenant2", poolapi.AttachRequest{Listing: p.listing.ID, Version: "1"})
	if b.NodeID == a.NodeID {
		t.Fatalf("both attachments on node %s", a.NodeID)
	}

	// Detach ends it; the node is told to release it and may keep it warm.
	p.must(200, "tenant1", "DELETE", "/attachments/"+a.ID, nil).decode(t, &r)
	if r.State != poolapi.Detached || r.EndedAt == nil {
		t.Fatalf("detached: %+v", r)
	}
	p.must(410, "tenant1", "POST", "/attachments/"+a.ID+"/renew", nil)
	p.must(409, node, "POST", "/nodes/"+p.nodes[node].ID+"/attachments/"+a.ID+"/state", poolapi.StateReport{State: poolapi.Ready, Slots: []int{a.Slot}})
	as = p.assignments(node, 0)
	if len(as.Assignments) != 1 || as.Assignments[0].State != poolapi.Detached || !as.Assignments[0].KeepWarm {
		t.Fatalf("assignments after detach %+v", as)
	}
	p.report(node, a.ID, poolapi.StateReport{State: poolapi.Released})
	if as := p.assignments(node, 0); len(as.Assignments) != 0 {
		t.Fatalf("released assignment still listed: %+v", as)
	}

	// The image stayed loaded for tenant1: its next attach is warm, on
	// the same slot; tenant2's is not placed there.
	p.digestOnSlot[node][a.Slot] = p.one
	p.heartbeat(node)
	w := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if !w.Warm || w.NodeID != a.NodeID || w.Slot != a.Slot {
		t.Fatalf("warm attach %+v, want on %s slot %d", w, a.NodeID, a.Slot)
	}

	for _, action := range []string{"attachment.create", "attachment.grant", "attachment.loading", "attachment.ready", "attachment.detach", "attachment.released"} {
		if p.audited(action, a.ID) != 1 {
			t.Errorf("%s audited %d times", action, p.audited(action, a.ID))
		}
	}
	var attached int64
	var ended bool
	if err := p.pool.QueryRow(context.Background(), `select count(*), bool_and(ended_at is not null) from usage_records
		where attachment_id = $1::uuid and event = 'attach'`, a.ID).Scan(&attached, &ended); err != nil || attached != 1 || !ended {
		t.Fatalf("usage record of the attachment: %d, closed %v, %v", attached, ended, err)
	}
	var sum2 struct{ Items []registryapi.UsageSummary }
	p.must(200, "tenant1", "GET", "/usage/summary", nil).decode(t, &sum2)
	if len(sum2.Items) != 1 || sum2.Items[0].Attachments != 2 || sum2.Items[0].AttachedNs <= 0 {
		t.Fatalf("usage summary %+v", sum2.Items)
	}
}

// TestAttachPlacement checks shares, two-chip images and a full pool.
func TestAttachPlacement(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	// A two-chip image takes a whole board; a share of it is refused.
	two := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist"})
	if two.Version != "2" || two.Slot != 0 {
		t.Fatalf("two-chip attachment %+v", two)
	}
	p.must(422, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "2", Share: true})
	var as poolapi.Assignments
	as = p.assignments(p.nodeOf(two), 0)
	if len(as.Assignments) != 1 || as.Assignments[0].Chips != 2 {
		t.Fatalf("assignments %+v", as)
	}
	// A share goes to a chip running the image, without a load.
	free := p.nodeOf(two)
	free = map[string]string{"node1": "node2", "node2": "node1"}[free]
	p.digestOnSlot[free][1] = p.one
	p.heartbeat(free)
	s1 := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true})
	s2 := p.attach("tenant2", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true})
	for _, s := range []poolapi.Attachment{s1, s2} {
		if !s.Warm || !s.Share || p.nodeOf(s) != free || s.Slot != 1 {
			t.Fatalf("share %+v", s)
		}
	}
	// One free chip is left in the pool (slot 0 of the free node).
	w := p.attach("tenant2", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if p.nodeOf(w) != free || w.Slot != 0 || w.Warm {
		t.Fatalf("whole attachment %+v", w)
	}
	r := p.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if !strings.Contains(string(r.body), "no node in the pool has room") {
		t.Fatalf("full pool: %s", r.body)
	}
	// A tenant at its budget of live attachments gets none more, whatever
	// the room.
	p2 := newPool(t, api.AttachConfig{MaxPerTenant: 1})
	p2.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	r = p2.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if !strings.Contains(string(r.body), "you hold 1 attachments") {
		t.Fatalf("over the budget: %s", r.body)
	}

	// Refusals name what was wrong.
	for _, c := range []struct {
		status int
		who    string
		req    any
		want   string
	}{
		{422, "tenant1", poolapi.AttachRequest{Listing: "isv1/none"}, "listing"},
		{422, "tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "9"}, "version"},
		{422, "tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", LeaseSeconds: 1}, "lease_seconds"},
		{422, "tenant1", `{"listing": "isv1/mnist", "slot": 3}`, "slot"},
		{403, "isv1", poolapi.AttachRequest{Listing: "isv1/mnist"}, "role"},
		{403, "node1", poolapi.AttachRequest{Listing: "isv1/mnist"}, "role"},
	} {
		r := p.must(c.status, c.who, "POST", "/attachments", c.req)
		if !strings.Contains(string(r.body), c.want) {
			t.Errorf("%v: %s", c.req, r.body)
		}
	}
	p.addUser("tenant3", "tenant")
	r = p.must(403, "tenant3", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist"})
	if !strings.Contains(string(r.body), "subscribe") {
		t.Errorf("not entitled: %s", r.body)
	}
}

// TestAttachLeaseAndLostNode lets a lease run out and a node go silent,
// with the registry's reaper running as it does in a server.
func TestAttachLeaseAndLostNode(t *testing.T) {
	p := newPool(t, api.AttachConfig{NodeLostAfter: 2 * time.Second, ReapInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.api.RunPool(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	short := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", LeaseSeconds: 2})
	long := p.attach("tenant2", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", LeaseSeconds: 600})
	if short.NodeID == long.NodeID {
		t.Fatal("attachments on one node")
	}
	// The short lease's node keeps heartbeating; the long one's goes silent.
	alive := p.nodeOf(short)
	stop := make(chan struct{})
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				p.heartbeat(alive)
			}
		}
	}()
	defer func() { close(stop); <-beat }()

	waitState := func(who, id string, want poolapi.State) poolapi.Attachment {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			a := p.get(who, id)
			if a.State == want {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("attachment %s is %s, want %s", id, a.State, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitState("tenant1", short.ID, poolapi.Expired)
	r := p.must(410, "tenant1", "POST", "/attachments/"+short.ID+"/renew", nil)
	if !strings.Contains(string(r.body), "lease expired") {
		t.Errorf("renewal of an expired lease: %s", r.body)
	}
	lost := waitState("tenant2", long.ID, poolapi.Lost)
	r = p.must(410, "tenant2", "POST", "/attachments/"+long.ID+"/renew", nil)
	if !strings.Contains(string(r.body), "stopped answering") || lost.EndedAt == nil {
		t.Errorf("renewal of a lost attachment: %s", r.body)
	}
	// The expired one is the live node's to release; it scrubs.
	as := p.assignments(alive, 0)
	if len(as.Assignments) != 1 || as.Assignments[0].State != poolapi.Expired || as.Assignments[0].KeepWarm {
		t.Fatalf("assignments %+v", as)
	}
	p.report(alive, short.ID, poolapi.StateReport{State: poolapi.Released, Scrubbed: true})
	for id, action := range map[string]string{short.ID: "attachment.expired", long.ID: "attachment.lost"} {
		if p.audited(action, id) != 1 {
			t.Errorf("%s of %s audited %d times", action, id, p.audited(action, id))
		}
	}
	var open int
	if err := p.pool.QueryRow(context.Background(), `select count(*) from usage_records where event = 'attach' and ended_at is null`).Scan(&open); err != nil || open != 0 {
		t.Fatalf("%d usage records left open (%v)", open, err)
	}
	var scrubbed bool
	if err := p.pool.QueryRow(context.Background(), `select scrubbed from attachments where id = $1::uuid`, short.ID).Scan(&scrubbed); err != nil || !scrubbed {
		t.Fatalf("scrubbed %v (%v)", scrubbed, err)
	}

	// The pool's metrics: one expired, one lost and not released (its node
	// is gone), nothing live.
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.api.PoolCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"faas_registry_attachments_ended_total/expired": 1, "faas_registry_attachments_ended_total/lost": 1,
		"faas_registry_attachments/ready": 0, "faas_registry_attachments/pending": 0, "faas_registry_attachments_unreleased": 1} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
}

// validated records digest as validated, needing chips of parts, as the
// validation worker does (services/registry/validation).
func (p *pool) validated(digest string, parts ...string) {
	p.t.Helper()
	p.validatedChips(digest, parts, nil)
}

// validatedChips marks image digest available with the parts and chip
// indexes its validation would record.
func (p *pool) validatedChips(digest string, parts []string, indexes []int) {
	p.t.Helper()
	if parts == nil {
		parts = []string{}
	}
	if indexes == nil {
		indexes = []int{}
	}
	tag, err := p.pool.Exec(context.Background(), `update validation_jobs set state = 'available', parts = $2, chip_indexes = $3,
		finished_at = now() where manifest_digest = $1`, digest, parts, indexes)
	if err != nil || tag.RowsAffected() != 1 {
		p.t.Fatalf("validating %s: %v (%d jobs)", digest, err, tag.RowsAffected())
	}
}

// TestAttachPart places an image only on chips of the part it was built
// for: two nodes of different parts, and an image of one of them.
func TestAttachPart(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	vu9p, ku15p := shell.ModelVU9PDual, shell.ModelKU15PDual
	p.model["node1"], p.model["node2"] = ku15p.Name, vu9p.Name
	p.heartbeat("node1")
	p.heartbeat("node2")
	p.validated(p.one, vu9p.Parts[0].Name)
	p.validated(p.two, ku15p.Parts[0].Name, ku15p.Parts[1].Name)

	// node1 has as many free chips, and fewer attachments, but its chips
	// are the wrong part.
	for _, who := range []string{"tenant1", "tenant2"} {
		a := p.attach(who, poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
		if p.nodeOf(a) != "node2" {
			t.Fatalf("a %s image placed on %s, whose chips are %s", vu9p.Parts[0].Name, p.nodeOf(a), ku15p.Parts[0].Name)
		}
	}
	// The vu9p chips are taken: the refusal names the part, although
	// node1 has two free chips.
	r := p.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if want := "no node in the pool has a free " + vu9p.Parts[0].Name + " chip"; !strings.Contains(string(r.body), want) {
		t.Fatalf("no chip of the part: %s, want %q", r.body, want)
	}
	// The two-chip image of the other part takes node1's board.
	two := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "2"})
	if p.nodeOf(two) != "node1" || two.Slot != 0 {
		t.Fatalf("the %s image on %s slot %d", ku15p.Parts[0].Name, p.nodeOf(two), two.Slot)
	}
	// A node reporting a part per chip (a board model this registry does
	// not know) is placed on by what it reports; a chip of unknown part
	// takes no image whose part is known.
	p3 := newPool(t, api.AttachConfig{})
	p3.validated(p3.one, vu9p.Parts[0].Name)
	r = p3.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if !strings.Contains(string(r.body), "free "+vu9p.Parts[0].Name+" chip") {
		t.Fatalf("nodes of unknown parts: %s", r.body)
	}
	n := p3.nodes["node1"]
	p3.must(200, "node1", "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{{"model": "faas-future", "slots": []item{
		{"index": 0, "state": "cleared", "part": ku15p.Parts[0].Name}, {"index": 1, "state": "cleared", "part": vu9p.Parts[0].Name}}}},
		"endpoint": "https://" + n.Hostname + ":8443", "tls_certificate": p3.certs["node1"]})
	if a := p3.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"}); p3.nodeOf(a) != "node1" || a.Slot != 1 {
		t.Fatalf("placed on %s slot %d, want node1's %s chip, slot 1", p3.nodeOf(a), a.Slot, vu9p.Parts[0].Name)
	}
}

// TestAttachChipIndex places a one-chip image only on the chip of a board
// its bitstream is for: with every chip 0 taken, an image for chip 0 is
// refused though chips 1 are free, and names what it wanted.
func TestAttachChipIndex(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	p.validatedChips(p.one, nil, []int{0})
	var got []int
	for _, who := range []string{"tenant1", "tenant2"} {
		a := p.attach(who, poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
		got = append(got, a.Slot)
		if a.Slot%2 != 0 {
			t.Fatalf("an image for chip 0 placed on %s slot %d, a chip 1", p.nodeOf(a), a.Slot)
		}
	}
	r := p.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})
	if want := "no node in the pool has a free chip 0 of a board"; !strings.Contains(string(r.body), want) {
		t.Fatalf("every chip 0 taken (slots %v): %s, want %q", got, r.body, want)
	}
}

// TestAttachSharesFromRecords places shares from the registry's own
// records: no heartbeat is sent after the pool is set up, yet a second
// share joins the chip the first was placed on, and a chip's tenant
// windows are counted.
func TestAttachSharesFromRecords(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	first := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true})
	if first.Warm || first.State != poolapi.Pending {
		t.Fatalf("first share %+v: the heartbeats show no chip running the image", first)
	}
	second := p.attach("tenant2", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true})
	if second.NodeID != first.NodeID || second.Slot != first.Slot || second.State != poolapi.Pending || !second.Share {
		t.Fatalf("second share on %s slot %d (%s), want the first's chip, %s slot %d", second.NodeID, second.Slot, second.State,
			first.NodeID, first.Slot)
	}
	// The node is assigned both on the one chip.
	as := p.assignments(p.nodeOf(first), 0)
	if len(as.Assignments) != 2 || as.Assignments[0].Slot != first.Slot || as.Assignments[1].Slot != first.Slot {
		t.Fatalf("assignments %+v", as)
	}
	// The chip takes shell.Windows-1 shares; the next goes to another chip.
	for range shell.Windows - 3 {
		if s := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true}); s.NodeID != first.NodeID || s.Slot != first.Slot {
			t.Fatalf("share on %s slot %d, want %s slot %d", s.NodeID, s.Slot, first.NodeID, first.Slot)
		}
	}
	if s := p.attach("tenant2", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", Share: true}); s.NodeID == first.NodeID && s.Slot == first.Slot {
		t.Fatalf("share %d on a chip of %d windows", shell.Windows, shell.Windows)
	}
	// A whole attachment never takes the shared chip.
	for range 2 {
		if w := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"}); w.NodeID == first.NodeID && w.Slot == first.Slot {
			t.Fatalf("whole attachment on the shared chip")
		}
	}
}

// TestAttachExclude places away from the nodes a request excludes.
func TestAttachExclude(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	for range 2 {
		a := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1", ExcludeNodes: []string{p.nodes["node1"].ID}})
		if p.nodeOf(a) != "node2" {
			t.Fatalf("placed on excluded %s", p.nodeOf(a))
		}
	}
	r := p.must(409, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1",
		ExcludeNodes: []string{p.nodes["node1"].ID}})
	if !strings.Contains(string(r.body), "1 excluded") {
		t.Fatalf("room only on an excluded node: %s", r.body)
	}
	p.must(422, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", ExcludeNodes: []string{"node1"}})
	many := make([]string, poolapi.MaxExcludeNodes+1)
	for i := range many {
		many[i] = p.nodes["node1"].ID
	}
	p.must(422, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", ExcludeNodes: many})
}

// TestAttachSDKPlacesAgain runs the SDK's Attach against the registry
// while both nodes fail every load: it is placed on one node, then on the
// other (the registry honouring exclude_nodes), then refused for want of
// a third, and the error reports each attempt.
func TestAttachSDKPlacesAgain(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The nodes: each fails whatever it is assigned.
	failing := make(chan struct{})
	go func() {
		defer close(failing)
		for ctx.Err() == nil {
			for name, n := range p.nodes {
				var as poolapi.Assignments
				r := p.do(name, "GET", "/nodes/"+n.ID+"/assignments", nil)
				if r.status != 200 {
					t.Errorf("assignments of %s: %d %s", name, r.status, r.body)
					return
				}
				r.decode(t, &as)
				for _, a := range as.Assignments {
					if a.State == poolapi.Pending {
						r := p.do(name, "POST", "/nodes/"+n.ID+"/attachments/"+a.ID+"/state",
							poolapi.StateReport{State: poolapi.Failed, Error: "self-test failed on " + name})
						if r.status != 204 {
							t.Errorf("failed report of %s: %d %s", name, r.status, r.body)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { cancel(); <-failing }()

	_, err := faas.Attach(ctx, p.url, "isv1/mnist:1", faas.WithRegistryToken(p.users["tenant1"].token), faas.WithLocalAgent("-"))
	var ae *faas.AttachError
	if !errors.As(err, &ae) || !errors.Is(err, faas.ErrNoCapacity) || len(ae.Attempts) != 3 {
		t.Fatalf("Attach: %v, want an AttachError of 3 attempts ending in no capacity", err)
	}
	first, second := ae.Attempts[0], ae.Attempts[1]
	if first.State != poolapi.Failed || second.State != poolapi.Failed || first.NodeID == second.NodeID ||
		!strings.Contains(first.Error, "self-test failed on "+p.nodeOf(poolapi.Attachment{NodeID: first.NodeID})) {
		t.Fatalf("attempts %+v", ae.Attempts)
	}
	if ae.Attempts[2].Attachment != "" || !strings.Contains(ae.Attempts[2].Error, "2 excluded") {
		t.Fatalf("third attempt %+v", ae.Attempts[2])
	}
	for _, at := range ae.Attempts[:2] {
		if got := p.get("tenant1", at.Attachment); got.State != poolapi.Failed || got.NodeID != at.NodeID {
			t.Errorf("attachment %s: %+v", at.Attachment, got)
		}
	}
}
