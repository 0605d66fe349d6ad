package portal_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// version stores a manifest in the listing's repository (as a push would)
// and attaches it to the listing as version v; it returns the digest.
func (r *rig) version(user, listingID, repo, v string) string {
	r.t.Helper()
	content := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"x":%q}}`, repo+v))
	sum := sha256.Sum256(content)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if err := meta.New(r.srv.Pool()).PutManifest(context.Background(), repo,
		meta.Manifest{Digest: d, MediaType: "application/vnd.oci.image.manifest.v1+json", Content: content}, v); err != nil {
		r.t.Fatal(err)
	}
	r.api(user, http.MethodPost, "/listings/"+listingID+"/versions", map[string]string{"version": v, "digest": d}, nil)
	return d
}

// node registers an approved node of a new node account; it returns the
// account's name and the node's id. An admin account "root" must exist.
func (r *rig) node(host string) (acct, id string) {
	r.t.Helper()
	acct = "node-" + host
	r.user(acct, auth.RoleNode)
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		r.t.Fatal(err)
	}
	var n struct{ ID string }
	r.api(acct, http.MethodPost, "/nodes", map[string]string{"hostname": host, "public_key": base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())}, &n)
	r.api("root", http.MethodPost, "/nodes/"+n.ID+"/approve", nil, nil)
	return acct, n.ID
}

// load records, as node acct, tenant's load of repo@digest in slot, and
// busyHours of use, under a grant the tenant gives the node.
func (r *rig) load(tenant, acct, nodeID, repo, digest string, slot int, busyHours float64) {
	r.t.Helper()
	var g struct{ ID string }
	r.api(tenant, http.MethodPost, "/load-grants", map[string]string{"node_id": nodeID, "repository": repo, "digest": digest}, &g)
	var tn struct{ ID string }
	r.api(tenant, http.MethodGet, "/me", nil, &tn)
	recs := []map[string]any{{"report_id": "load-" + g.ID, "tenant_id": tn.ID, "grant_id": g.ID, "event": "load", "slot": slot, "digest": digest}}
	if busyHours > 0 {
		recs = append(recs, map[string]any{"report_id": "busy-" + g.ID, "tenant_id": tn.ID, "grant_id": g.ID, "event": "busy",
			"slot": slot, "busy_ns": int64(busyHours * 3600e9)})
	}
	r.api(acct, http.MethodPost, "/usage", map[string]any{"node_id": nodeID, "records": recs}, nil)
}

// heartbeat sends one board of model with slots in states (digest on all
// but cleared ones).
func (r *rig) heartbeat(acct, nodeID, model, digest string, states ...string) {
	r.t.Helper()
	var slots []map[string]any
	for i, s := range states {
		sl := map[string]any{"index": i, "state": s}
		if s != "cleared" {
			sl["digest"] = digest
		}
		if s == "failed" {
			sl["reason"] = "DMA timeout"
		}
		slots = append(slots, sl)
	}
	r.api(acct, http.MethodPost, "/nodes/"+nodeID+"/heartbeat", map[string]any{"boards": []map[string]any{{"model": model, "slots": slots}}}, nil)
}

// fleet is a marketplace with usage: ISVs acme and globex, tenants alice
// and bob, admin root; alice subscribed to acme's Fast AES, loaded it on
// node n1 slot 0 (busy 2 h) and slot 1 (loaded), bob to globex's Matrix.
type fleet struct {
	aes, matrix    string // listing ids
	aesDigest      string
	n1, n2         string // node ids
	n1Acct, n2Acct string
}

func newFleet(r *rig) fleet {
	r.t.Helper()
	for name, role := range map[string]auth.Role{"acme": auth.RoleISV, "globex": auth.RoleISV, "alice": auth.RoleTenant,
		"bob": auth.RoleTenant, "root": auth.RoleAdmin} {
		r.user(name, role)
	}
	var f fleet
	f.aes = r.listing("acme", "Fast AES", "AES at line rate.", true)
	f.matrix = r.listing("globex", "Matrix", "GEMM.", true)
	f.aesDigest = r.version("acme", f.aes, "acme/fast-aes", "1.0.0")
	mDigest := r.version("globex", f.matrix, "globex/matrix", "2.0.0")
	r.api("alice", http.MethodPost, "/listings/"+f.aes+"/subscribe", nil, nil)
	r.api("bob", http.MethodPost, "/listings/"+f.matrix+"/subscribe", nil, nil)
	f.n1Acct, f.n1 = r.node("n1")
	f.n2Acct, f.n2 = r.node("n2")
	r.load("alice", f.n1Acct, f.n1, "acme/fast-aes", f.aesDigest, 0, 2)
	r.load("alice", f.n1Acct, f.n1, "acme/fast-aes", f.aesDigest, 1, 0)
	r.load("bob", f.n1Acct, f.n1, "globex/matrix", mDigest, 2, 1)
	r.heartbeat(f.n1Acct, f.n1, "faas-vu9p-2", f.aesDigest, "busy", "loaded", "cleared", "failed")
	return f
}

// has fails unless page contains every one of want.
func has(page string, want ...string) []string {
	var missing []string
	for _, w := range want {
		if !strings.Contains(page, w) {
			missing = append(missing, w)
		}
	}
	return missing
}
