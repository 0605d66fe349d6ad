package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/publish"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/validation"
)

// The pool tests run the registry's accelerator pool against a faasd in
// process: an ISV publishes the sealed AliDNN reference image, tenant
// alice subscribes and attaches, and the agent, given a node id, loads it
// under the pool's grant, installs the credential and reports ready.

// poolTimeout bounds every wait of the pool tests: loads take well under a
// second here, so reaching it means the agent or the registry is stuck.
const poolTimeout = 2 * time.Minute

// publishAliDNN publishes the one-chip AliDNN image, sealed and signed, as
// ISV acme's public listing acme/alidnn, and waits for its validation. It
// returns the listing's id and the image's digest.
func publishAliDNN(t *testing.T, reg *registry) (listing, digest string) {
	t.Helper()
	if _, err := reg.srv.CreateUser(t.Context(), "acme", auth.RoleISV, password); err != nil {
		t.Fatal(err)
	}
	recipient, err := os.ReadFile(filepath.Join(reg.platformDir, validation.RecipientPubFile))
	if err != nil {
		t.Fatal(err)
	}
	img, err := publish.AliDNN(t.Context(), publish.ISV{URL: reg.url, User: "acme", Password: password, Recipient: recipient,
		Validation: poolTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return img.Listing, img.Digest
}

// poll calls done until it reports true, failing the test after
// poolTimeout.
func poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(poolTimeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", poolTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startPoolNode starts an agent that serves remote attach with its own
// certificate and takes part in the pool, and waits until the registry
// may place attachments on it.
func startPoolNode(t *testing.T, reg *registry, keepWarm time.Duration) *agent {
	t.Helper()
	a := startAgent(t, reg, options{tls: true, nodeCert: true, heartbeat: 50 * time.Millisecond, keepWarm: keepWarm})
	poll(t, "the node's endpoint in the registry", func() bool {
		var nodes struct {
			Items []struct {
				ID             string
				Endpoint       string
				TLSCertificate string `json:"tls_certificate"`
			}
		}
		reg.api(t, "admin", "GET", "/nodes", nil, &nodes)
		for _, n := range nodes.Items {
			if n.ID == a.nodeID && n.Endpoint != "" && n.TLSCertificate != "" {
				return true
			}
		}
		return false
	})
	return a
}

// attach creates an attachment of listing for who.
func attach(t *testing.T, reg *registry, who, listing string, share bool) poolapi.Attachment {
	t.Helper()
	var att poolapi.Attachment
	reg.api(t, who, "POST", "/attachments", poolapi.AttachRequest{Listing: listing, Share: share, LeaseSeconds: poolapi.MaxLeaseSeconds}, &att)
	if att.ID == "" || !strings.HasPrefix(att.Credential, poolapi.CredentialPrefix+att.ID+"_") {
		t.Fatalf("attachment as created: %+v", att)
	}
	return att
}

// waitReady long-polls attachment id until it is ready; failing the test
// if it ends.
func waitReady(t *testing.T, reg *registry, who, id string) poolapi.Attachment {
	t.Helper()
	var att poolapi.Attachment
	deadline := time.Now().Add(poolTimeout)
	for att.State != poolapi.Ready {
		if att.State != "" && !att.State.Live() {
			t.Fatalf("attachment %s ended %s: %s", id, att.State, att.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("attachment %s still %s after %v", id, att.State, poolTimeout)
		}
		reg.api(t, who, "GET", "/attachments/"+id+"?wait=5s&since="+string(att.State), nil, &att)
	}
	return att
}

// released waits until the node reported attachment id released, and
// returns whether it said the slot was scrubbed.
func released(t *testing.T, reg *registry, id string) bool {
	t.Helper()
	var scrubbed bool
	poll(t, "the node's release of attachment "+id, func() bool {
		var page struct {
			Items []struct{ Details map[string]any }
		}
		reg.api(t, "admin", "GET", "/audit?action=attachment.released&target_type=attachment&target_id="+id, nil, &page)
		if len(page.Items) == 0 {
			return false
		}
		scrubbed, _ = page.Items[0].Details["scrubbed"].(bool)
		return true
	})
	return scrubbed
}

// reported is the state and digest of slot in the node's last heartbeat.
func reported(t *testing.T, reg *registry, a *agent, slot int) string {
	t.Helper()
	var nodes struct {
		Items []struct {
			ID     string
			Boards []struct {
				Slots []struct {
					Index  int
					State  string
					Digest string
				}
			}
		}
	}
	reg.api(t, "admin", "GET", "/nodes", nil, &nodes)
	for _, n := range nodes.Items {
		for _, b := range n.Boards {
			for _, s := range b.Slots {
				if n.ID == a.nodeID && s.Index == slot {
					return s.State + " " + s.Digest
				}
			}
		}
	}
	return ""
}

// assigned lists the attachments the registry still assigns the node.
func assigned(t *testing.T, reg *registry, a *agent) []string {
	t.Helper()
	var as poolapi.Assignments
	reg.api(t, "node1", "GET", "/nodes/"+a.nodeID+"/assignments", nil, &as)
	var ids []string
	for _, x := range as.Assignments {
		ids = append(ids, x.ID)
	}
	return ids
}

// openAttached opens a session on att's slot over TLS 1.3, trusting only
// the node certificate the registry pinned, with att's credential.
func openAttached(t *testing.T, att poolapi.Attachment, cred string) (*faas.Client, *faas.Device) {
	t.Helper()
	tc, err := faas.PinnedTLS(att)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, att.Endpoint, faas.WithTLSConfig(tc), faas.WithToken(cred))
	d, err := c.Open(context.Background(), att.Slot)
	if err != nil {
		t.Fatalf("session on attachment %s (slot %d at %s): %v", att.ID, att.Slot, att.Endpoint, err)
	}
	t.Cleanup(func() { d.Close() })
	return c, d
}

// TestPoolAttachment: a tenant's attachment is loaded by the node under
// the pool's grant, becomes ready, and its credential opens a session over
// TLS verified against the pin; a detach ends the session and the
// credential, clears and scrubs the slot, and the registry records the
// release.
func TestPoolAttachment(t *testing.T) {
	reg := startRegistry(t)
	listing, digest := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, -1)
	ctx := context.Background()

	att := attach(t, reg, "alice", listing, false)
	if att.NodeID != a.nodeID || att.Warm {
		t.Fatalf("attachment placed as %+v, want a cold one on node %s", att, a.nodeID)
	}
	cred := att.Credential
	ready := waitReady(t, reg, "alice", att.ID)
	rec := a.table.Record(ready.Slot)
	if rec.State != agentapi.Loaded || rec.Tenant != "alice" || rec.Image == nil || rec.Image.Digest != digest || rec.GrantID == "" {
		t.Fatalf("slot %d of a ready attachment: %+v, want the image loaded for alice under a grant", ready.Slot, rec)
	}
	c, d := openAttached(t, ready, cred)
	roundTrip(t, d)
	// The pool loaded as alice: `faas` shows her the slot as hers.
	mine, err := dial(t, a.socket, faas.WithToken(reg.tokens["alice"])).Slot(ctx, ready.Slot)
	if err != nil || mine.Tenant != "alice" || mine.Image == nil {
		t.Errorf("alice's view of the attachment's slot: %+v, %v", mine, err)
	}

	var detached poolapi.Attachment
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, &detached)
	if detached.State != poolapi.Detached {
		t.Fatalf("detach answered %+v", detached)
	}
	if !released(t, reg, att.ID) {
		t.Error("the node reported the release of a detached attachment unscrubbed, with keep-warm off")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared || rec.Image != nil || rec.Tenant != "" {
		t.Errorf("slot %d after the release: %+v, want cleared", ready.Slot, rec)
	}
	if _, err := d.Alloc(ctx, 4096); err == nil {
		t.Error("the attachment's session still allocates after its release")
	}
	if _, err := c.Slots(ctx); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("the credential after the release: %v, want ErrPermission", err)
	}
	if ids := assigned(t, reg, a); len(ids) != 0 {
		t.Errorf("the registry still assigns %v to the node", ids)
	}
}

// TestPoolShares: two tenants' share attachments of the same image run on
// one chip, loaded once, each as a tenant of its own; one's detach ends
// only its sessions; the tenant whose attach loaded the chip cannot clear
// it under the other's live share.
func TestPoolShares(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	for _, who := range []string{"alice", "bob"} {
		reg.api(t, who, "POST", "/listings/"+listing+"/subscribe", nil, nil)
	}
	a := startPoolNode(t, reg, -1)
	ctx := context.Background()

	first := attach(t, reg, "alice", listing, true)
	ofAlice := waitReady(t, reg, "alice", first.ID)
	loadedAt := a.table.Record(ofAlice.Slot).LoadedAt
	// The registry shares a chip it knows runs the image: from a heartbeat.
	poll(t, "a heartbeat with the loaded chip", func() bool { return reported(t, reg, a, ofAlice.Slot) == "loaded "+ofAlice.Digest })
	second := attach(t, reg, "bob", listing, true)
	if second.Slot != ofAlice.Slot || !second.Warm {
		t.Fatalf("bob's share placed on slot %d warm %v (%s), want it warm on alice's chip (slot %d)", second.Slot, second.Warm, second.State, ofAlice.Slot)
	}
	ofBob := waitReady(t, reg, "bob", second.ID)
	if got := a.table.Record(ofBob.Slot).LoadedAt; !got.Equal(loadedAt) {
		t.Errorf("the chip was loaded again for bob's share (at %v, first at %v)", got, loadedAt)
	}
	_, dAlice := openAttached(t, ofAlice, first.Credential)
	_, dBob := openAttached(t, ofBob, second.Credential)
	for _, d := range []*faas.Device{dAlice, dBob} {
		if _, err := d.Alloc(ctx, 4096); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{first.ID, second.ID} {
		if u := usageOf(a.srv, ofBob.Slot, "alloc/"+id); u.Sessions != 1 {
			t.Errorf("share %s: %+v, want one session of its own", id, a.srv.SessionUsage(ofBob.Slot))
		}
	}

	// Alice's registry token reaches the node too, but the chip is the
	// pool's while bob's share lives on it.
	tc, err := faas.PinnedTLS(ofAlice)
	if err != nil {
		t.Fatal(err)
	}
	aliceTok := dial(t, ofAlice.Endpoint, faas.WithTLSConfig(tc), faas.WithToken(reg.tokens["alice"]))
	if _, err := aliceTok.Clear(ctx, ofAlice.Slot); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("alice clearing the chip of bob's live share: %v, want ErrPermission", err)
	}
	ref := strings.TrimPrefix(reg.url, "http://") + "/acme/alidnn@" + ofAlice.Digest
	if _, err := aliceTok.Load(ctx, ref, faas.OnSlot(ofAlice.Slot)); !errors.Is(err, faas.ErrBusy) {
		t.Errorf("alice reloading the chip of bob's live share: %v, want ErrBusy", err)
	}
	// Sessions on the pool's chip go through attachments, which the pool
	// accounts and ends; her token is none.
	if _, err := aliceTok.Open(ctx, ofAlice.Slot); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("alice's token opening a session on the pool's chip: %v, want ErrPermission", err)
	}

	reg.api(t, "alice", "DELETE", "/attachments/"+first.ID, nil, nil)
	if !released(t, reg, first.ID) {
		t.Error("a share's release reported unscrubbed")
	}
	if _, err := dAlice.Alloc(ctx, 4096); err == nil {
		t.Error("alice's share session still allocates after her detach")
	}
	if _, err := dBob.Alloc(ctx, 4096); err != nil {
		t.Errorf("bob's share session after alice's detach: %v", err)
	}
	if rec := a.table.Record(ofBob.Slot); rec.State != agentapi.Loaded {
		t.Errorf("the chip under bob's live share after alice's detach: %+v", rec)
	}

	// The last share's release clears the chip the pool loaded for them.
	reg.api(t, "bob", "DELETE", "/attachments/"+second.ID, nil, nil)
	if !released(t, reg, second.ID) {
		t.Error("the last share's release reported unscrubbed")
	}
	if rec := a.table.Record(ofBob.Slot); rec.State != agentapi.Cleared {
		t.Errorf("the pool's chip after its last share ended: %+v", rec)
	}
}

// TestPoolKeepWarm: after a detach the node keeps the image loaded for the
// tenant; her next attach lands on it warm and is ready without a load,
// under a new credential, the old one staying refused.
func TestPoolKeepWarm(t *testing.T) {
	reg := startRegistry(t)
	listing, digest := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, time.Hour)
	ctx := context.Background()

	first := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", first.ID)
	loaded := a.table.Record(ready.Slot)
	oldClient, oldDev := openAttached(t, ready, first.Credential)
	reg.api(t, "alice", "DELETE", "/attachments/"+first.ID, nil, nil)
	if released(t, reg, first.ID) {
		t.Error("a detach kept warm was reported scrubbed")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Loaded || rec.Tenant != "alice" || !rec.LoadedAt.Equal(loaded.LoadedAt) {
		t.Fatalf("slot %d kept warm: %+v", ready.Slot, rec)
	}
	if _, err := oldDev.Alloc(ctx, 4096); err == nil {
		t.Error("the detached attachment's session still allocates while its slot is kept warm")
	}

	second := attach(t, reg, "alice", listing, false)
	if !second.Warm || second.Slot != ready.Slot {
		t.Fatalf("alice's attach after her detach placed on slot %d warm %v, want warm on slot %d", second.Slot, second.Warm, ready.Slot)
	}
	again := waitReady(t, reg, "alice", second.ID)
	if rec := a.table.Record(again.Slot); rec.State != agentapi.Loaded || rec.Image == nil || rec.Image.Digest != digest ||
		!rec.LoadedAt.Equal(loaded.LoadedAt) {
		t.Errorf("slot %d of the warm attachment: %+v, want the image loaded at %v, not reloaded", again.Slot, rec, loaded.LoadedAt)
	}
	_, d := openAttached(t, again, second.Credential)
	roundTrip(t, d)
	if _, err := oldClient.Slots(ctx); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("the first attachment's credential on the warm slot: %v, want ErrPermission", err)
	}
}

// TestPoolKeepWarmEnds: a slot kept warm that no attachment takes is
// cleared once the keep-warm time has passed.
func TestPoolKeepWarmEnds(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, 200*time.Millisecond)

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	if released(t, reg, att.ID) {
		t.Error("a detach kept warm was reported scrubbed")
	}
	poll(t, "the slot kept warm to be cleared", func() bool { return a.table.Record(ready.Slot).State == agentapi.Cleared })
}

// TestPoolSharesBackToBack: a second share placed on the first share's
// chip before that chip is loaded (the registry places it from its own
// records, not waiting for a heartbeat) waits for that load and takes the
// chip as loaded, without loading it again.
func TestPoolSharesBackToBack(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	for _, who := range []string{"alice", "bob"} {
		reg.api(t, who, "POST", "/listings/"+listing+"/subscribe", nil, nil)
	}
	a := startPoolNode(t, reg, -1)

	first := attach(t, reg, "alice", listing, true)
	second := attach(t, reg, "bob", listing, true)
	if second.Slot != first.Slot {
		t.Fatalf("bob's share placed on slot %d, alice's on %d: want one chip", second.Slot, first.Slot)
	}
	ofAlice := waitReady(t, reg, "alice", first.ID)
	ofBob := waitReady(t, reg, "bob", second.ID)
	rec := a.table.Record(ofBob.Slot)
	_, dAlice := openAttached(t, ofAlice, first.Credential)
	_, dBob := openAttached(t, ofBob, second.Credential)
	roundTrip(t, dAlice)
	roundTrip(t, dBob)
	if got := a.table.Record(ofBob.Slot).LoadedAt; !got.Equal(rec.LoadedAt) {
		t.Errorf("the chip was loaded again for a share (at %v, first at %v)", got, rec.LoadedAt)
	}
}
