package keyrelease_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell"
)

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestRelease(t *testing.T) {
	ctx := t.Context()
	pool := testenv.RegistryDB(t)
	st, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ms := meta.New(pool)
	accounts, err := auth.NewStore(pool, auth.WithParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}))
	if err != nil {
		t.Fatal(err)
	}
	platform, err := validation.LoadPlatformKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dist, _ := distribution.New(distribution.Config{Meta: ms, Blobs: st, Authorizer: distribution.AllowAll{}})
	reg := httptest.NewServer(dist)
	t.Cleanup(reg.Close)
	srv := serve(t, pool, accounts, ms, st, platform.Recipient)

	// A sealed image, sealed to the platform key, and its keys artifact.
	dir := t.TempDir()
	bit, err := loopback.Bitstream(shell.PartVU9P, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "c.bit"), bit, 0o644)
	os.WriteFile(filepath.Join(dir, "image.yaml"), []byte("name: lb\nversion: 1.0.0\nvendor: T\nboard: faas-vu9p-dual\nboth_chips: true\nchips:\n"+
		"  - {index: 0, bitstream: c.bit, role: {name: loopback, version: \"1.0\"}}\n"+
		"  - {index: 1, bitstream: c.bit, role: {name: loopback, version: \"1.0\"}}\n"), 0o644)
	m, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := image.Build(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	sealed, keys, err := image.Seal(ctx, plain, platform.Recipient.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(reg.URL, "http://")
	tag, _ := name.NewTag(host + "/isv1/lb:1.0.0")
	if err := remote.Write(tag, sealed, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	d, _ := sealed.Digest()
	digest := d.String()
	var lines []map[string]string
	for _, k := range keys {
		wk, _ := k.Key.MarshalBinary()
		lines = append(lines, map[string]string{"chip": k.Chip.String(), "layer": k.Layer.String(), "plaintext": k.Plaintext.String(),
			"key_id": k.KeyID.String(), "wrapped_key": base64.StdEncoding.EncodeToString(wk)})
	}
	keysJSON, _ := json.Marshal(lines)
	keysLayer := static.NewLayer(keysJSON, "application/json")
	empty := static.NewLayer([]byte("{}"), "application/vnd.oci.empty.v1+json")
	for _, l := range []v1.Layer{keysLayer, empty} {
		if err := remote.WriteLayer(tag.Context(), l, remote.WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	kd, _ := keysLayer.Digest()
	ed, _ := empty.Digest()
	size, _ := sealed.Size()
	art, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": types.OCIManifestSchema1, "artifactType": keyrelease.KeysArtifactType,
		"config":  map[string]any{"mediaType": "application/vnd.oci.empty.v1+json", "digest": ed.String(), "size": 2},
		"layers":  []any{map[string]any{"mediaType": "application/json", "digest": kd.String(), "size": len(keysJSON)}},
		"subject": map[string]any{"mediaType": types.OCIManifestSchema1, "digest": digest, "size": size},
	})
	ad, _, _ := v1.SHA256(bytes.NewReader(art))
	if err := remote.Put(tag.Context().Digest(ad.String()), rawManifest{art, types.OCIManifestSchema1}, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}

	// Accounts, listing, version, entitlement, node, validation state.
	isv, _ := accounts.Create(ctx, "isv1", auth.RoleISV, "pw-isv")
	tenant, _ := accounts.Create(ctx, "tenant1", auth.RoleTenant, "pw-tenant")
	other, _ := accounts.Create(ctx, "tenant2", auth.RoleTenant, "pw-tenant2")
	nodeAcct, _ := accounts.Create(ctx, "node1", auth.RoleNode, "pw-node")
	thiefAcct, _ := accounts.Create(ctx, "node2", auth.RoleNode, "pw-node2")
	var listing string
	if err := pool.QueryRow(ctx, `insert into listings (owner_id, repository_id, name) select $1::uuid, id, 'lb' from repositories where name = 'isv1/lb'
		returning id::text`, isv.ID).Scan(&listing); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `insert into listing_versions (listing_id, version, manifest_digest) values ($1::uuid, '1.0.0', $2)`, listing, digest)
	exec(t, pool, `insert into entitlements (listing_id, account_id, kind) values ($1::uuid, $2::uuid, 'subscription')`, listing, tenant.ID)
	exec(t, pool, `insert into validation_jobs (repository_id, manifest_digest, listing_id, state)
		select id, $1, $2::uuid, 'validating' from repositories where name = 'isv1/lb'`, digest, listing)
	nodePriv, _ := ecdh.X25519().GenerateKey(rand.Reader)
	nodeID := addNode(t, pool, nodeAcct.ID, "n1", nodePriv.PublicKey())
	// node2's account registers a node of its own: the attacker of issue
	// 18, a node that never served tenant1.
	thiefPriv, _ := ecdh.X25519().GenerateKey(rand.Reader)
	thiefID := addNode(t, pool, thiefAcct.ID, "n2", thiefPriv.PublicKey())

	post := func(user, pw string, body map[string]string) (int, registryapi.KeyReleaseResult) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+releasePath, bytes.NewReader(b))
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out registryapi.KeyReleaseResult
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	body := func(node, tenantID, grant string) map[string]string {
		return map[string]string{"node_id": node, "tenant_id": tenantID, "repository": "isv1/lb", "digest": digest, "grant": grant}
	}
	grant := func(who auth.Account, node string) string {
		t.Helper()
		g, err := nodetrust.Issue(ctx, pool, nodetrust.Caller{ID: who.ID, Role: string(who.Role)},
			registryapi.GrantRequest{NodeID: node, Repository: "isv1/lb", Digest: digest}, 0)
		if err != nil {
			t.Fatalf("grant for %s on %s: %v", who.Name, node, err)
		}
		return g.Secret
	}

	// No grant for a node an operator has not approved.
	if _, err := nodetrust.Issue(ctx, pool, nodetrust.Caller{ID: tenant.ID, Role: "tenant"},
		registryapi.GrantRequest{NodeID: nodeID, Repository: "isv1/lb", Digest: digest}, 0); !errors.Is(err, nodetrust.ErrNotApproved) {
		t.Fatalf("grant on an unapproved node: %v, want ErrNotApproved", err)
	}
	for _, id := range []string{nodeID, thiefID} {
		if err := nodetrust.Approve(ctx, pool, id, "op"); err != nil {
			t.Fatal(err)
		}
	}
	// A tenant without an entitlement gets no grant.
	if _, err := nodetrust.Issue(ctx, pool, nodetrust.Caller{ID: other.ID, Role: "tenant"},
		registryapi.GrantRequest{NodeID: nodeID, Repository: "isv1/lb", Digest: digest}, 0); !errors.Is(err, nodetrust.ErrPermission) {
		t.Fatalf("grant without entitlement: %v, want ErrPermission", err)
	}

	if code, _ := post("node1", "pw-node", body(nodeID, tenant.ID, grant(tenant, nodeID))); code != http.StatusConflict {
		t.Errorf("not validated: %d, want 409", code)
	}
	exec(t, pool, `update validation_jobs set state = 'available'`)

	if code, _ := post("", "", body(nodeID, tenant.ID, grant(tenant, nodeID))); code != http.StatusUnauthorized {
		t.Errorf("anonymous: %d", code)
	}
	if code, _ := post("tenant1", "pw-tenant", body(nodeID, tenant.ID, grant(tenant, nodeID))); code != http.StatusForbidden {
		t.Errorf("tenant account: %d, want 403", code)
	}
	if code, _ := post("node2", "pw-node2", body(nodeID, tenant.ID, grant(tenant, nodeID))); code != http.StatusNotFound {
		t.Errorf("other account's node: %d, want 404", code)
	}
	if code, _ := post("node1", "pw-node", body("00000000-0000-0000-0000-000000000000", tenant.ID, grant(tenant, nodeID))); code != http.StatusNotFound {
		t.Errorf("unknown node: %d, want 404", code)
	}
	// The finding: an approved node's account asks for tenant1's keys
	// for its own node, with no grant, a forged one, or one given to
	// another node. Nothing is released.
	thief := map[string]map[string]string{
		"no grant":              body(thiefID, tenant.ID, ""),
		"forged grant":          body(thiefID, tenant.ID, nodetrust.GrantPrefix+strings.Repeat("A", 43)),
		"another node's grant":  body(thiefID, tenant.ID, grant(tenant, nodeID)),
		"tenant name, no grant": {"node_id": thiefID, "tenant": "tenant1", "repository": "isv1/lb", "digest": digest},
	}
	for what, b := range thief {
		if code, out := post("node2", "pw-node2", b); code == http.StatusOK || len(out.WrappedKeys) != 0 {
			t.Errorf("%s: %d %+v, want a refusal", what, code, out)
		}
	}
	// A grant is for its tenant, image and node only, and single use.
	g := grant(tenant, nodeID)
	if code, _ := post("node1", "pw-node", body(nodeID, other.ID, g)); code != http.StatusForbidden {
		t.Errorf("grant of tenant1 named for tenant2: %d, want 403", code)
	}
	if code, _ := post("node1", "pw-node", body(nodeID, tenant.ID, g)); code != http.StatusForbidden {
		t.Errorf("spent grant: %d, want 403", code)
	}
	g = grant(tenant, nodeID)
	wrongImage := body(nodeID, tenant.ID, g)
	wrongImage["digest"] = "sha256:" + strings.Repeat("0", 64)
	if code, _ := post("node1", "pw-node", wrongImage); code != http.StatusForbidden {
		t.Errorf("grant for another image: %d, want 403", code)
	}
	g = grant(tenant, nodeID)
	exec(t, pool, `update load_grants set expires_at = now() - interval '1 second' where redeemed_at is null`)
	if code, _ := post("node1", "pw-node", body(nodeID, tenant.ID, g)); code != http.StatusForbidden {
		t.Errorf("expired grant: %d, want 403", code)
	}
	// A revoked node's outstanding grants die with it.
	g = grant(tenant, thiefID)
	if err := nodetrust.Revoke(ctx, pool, thiefID, "op"); err != nil {
		t.Fatal(err)
	}
	if code, _ := post("node2", "pw-node2", body(thiefID, tenant.ID, g)); code != http.StatusForbidden {
		t.Errorf("revoked node: %d, want 403", code)
	}

	g = grant(tenant, nodeID)
	code, out := post("node1", "pw-node", body(nodeID, tenant.ID, g))
	if code != http.StatusOK || len(out.WrappedKeys) != len(keys) {
		t.Fatalf("release: %d %+v", code, out)
	}
	got := map[string]seal.DataKey{}
	for _, k := range out.WrappedKeys {
		raw, _ := base64.StdEncoding.DecodeString(k.WrappedKey)
		var wk seal.WrappedKey
		if err := wk.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		if _, err := seal.UnwrapKey(platform.Recipient, wk); err == nil {
			t.Error("released key unwraps with the platform key: not re-wrapped")
		}
		dk, err := seal.UnwrapKey(nodePriv, wk)
		if err != nil {
			t.Fatalf("node cannot unwrap: %v", err)
		}
		got[k.Layer] = dk
	}
	// The keys unseal the image back to the plain one.
	opened, err := image.Unseal(ctx, sealed, func(c image.Chip, h seal.Header) (seal.DataKey, error) {
		k, ok := got[c.Layer.String()]
		if !ok {
			return seal.DataKey{}, fmt.Errorf("no key for %s", c.Layer)
		}
		return k, nil
	})
	if err != nil {
		t.Fatalf("unsealing with released keys: %v", err)
	}
	od, _ := opened.Digest()
	pd, _ := plain.Digest()
	if od != pd {
		t.Errorf("unsealed image %s, want %s", od, pd)
	}

	var ok, denied, withGrant int
	if err := pool.QueryRow(ctx, `select count(*) filter (where outcome = 'ok'), count(*) filter (where outcome like 'denied%'),
		count(*) filter (where outcome = 'ok' and details->>'grant_id' <> '')
		from audit_log where action = 'keys.release'`).Scan(&ok, &denied, &withGrant); err != nil {
		t.Fatal(err)
	}
	if ok != 1 || withGrant != 1 || denied != 13 {
		t.Errorf("audit: %d ok (%d naming their grant), %d denied; want 1 (1) and 13", ok, withGrant, denied)
	}
	// An entitlement revoked after the grant stops the release.
	g = grant(tenant, nodeID)
	exec(t, pool, `update entitlements set revoked_at = now()`)
	if code, _ := post("node1", "pw-node", body(nodeID, tenant.ID, g)); code != http.StatusForbidden {
		t.Errorf("entitlement revoked after the grant: %d, want 403", code)
	}
}

func addNode(t *testing.T, pool *pgxpool.Pool, account, name string, pub *ecdh.PublicKey) string {
	t.Helper()
	pemText, _ := seal.MarshalPublicKeyPEM(pub)
	var id string
	if err := pool.QueryRow(t.Context(), `insert into nodes (account_id, name, public_key) values ($1::uuid, $2, $3) returning id::text`,
		account, name, string(pemText)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
