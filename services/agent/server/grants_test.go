package server_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/agent/server"
)

// poolCredential makes a credential as the registry's pool does for an
// attachment: a UUID id, and of the secret only the SHA-256 for the node.
func poolCredential(t *testing.T) (id, cred string, sum [32]byte) {
	t.Helper()
	var u [16]byte
	rand.Read(u[:])
	id = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	var s [32]byte
	rand.Read(s[:])
	return id, poolapi.CredentialPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(s[:]), sha256.Sum256(s[:])
}

// TestInstalledCredential: a whole-slot credential installed from its
// hash alone opens sessions on its slot as the slot's loader and nowhere
// else; a forged secret is refused with a hint that fits an attachment,
// and End refuses the credential and ends its session.
func TestInstalledCredential(t *testing.T) {
	if server.GrantPrefix != poolapi.CredentialPrefix {
		t.Fatalf("the agent's credential prefix %q differs from the pool's %q", server.GrantPrefix, poolapi.CredentialPrefix)
	}
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()
	id, cred, sum := poolCredential(t)
	if err := a.grants.Install(server.Grant{ID: id, Slots: []int{0}}, sum); err != nil {
		t.Fatalf("Install of attachment %s: %v", id, err)
	}
	c := dial(t, a.socket, faas.WithToken(cred))
	slots, err := c.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slots[0].Tenant != "alice" || slots[0].Image == nil || slots[1].Tenant != "" || slots[1].Image != nil {
		t.Errorf("the credential of slot 0 sees slot 0 as %+v and slot 1 as %+v", slots[0], slots[1])
	}
	d, err := c.Open(ctx, 0)
	if err != nil {
		t.Fatalf("session with the installed credential: %v", err)
	}
	defer d.Close()
	if _, err := d.Alloc(ctx, 4096); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(a.srv, 0, "alice"); u.Sessions != 1 {
		t.Errorf("the credential's session runs as %+v, want one of alice, the slot's loader", a.srv.SessionUsage(0))
	}
	if _, err := c.Open(ctx, 1); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("session on slot 1, which the credential does not name: %v, want ErrPermission", err)
	}

	forged := dial(t, a.socket, faas.WithToken(cred[:strings.LastIndex(cred, "_")+1]+base64.RawURLEncoding.EncodeToString(make([]byte, 32))))
	_, err = forged.Slots(ctx)
	if !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("a forged secret for attachment %s: %v, want ErrPermission", id, err)
	}
	if h := faas.Hint(err); !strings.Contains(h, "attachment") || !strings.Contains(h, "pod") {
		t.Errorf("the hint for a refused credential, %q, should speak of pods and attachments", h)
	}

	a.grants.End(id)
	if _, err := c.Slots(ctx); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("the credential after End: %v, want ErrPermission", err)
	}
	if _, err := d.Alloc(ctx, 4096); err == nil {
		t.Error("the credential's session still allocates after End")
	}
	// The slot itself is untouched: its loader's sessions go on.
	if _, err := openDevice(t, a.socket, "alice", 0).Alloc(ctx, 4096); err != nil {
		t.Errorf("alice's own session after the credential ended: %v", err)
	}
}

// TestInstalledShareCredential: a share credential runs its sessions as a
// tenant of its own, "alloc/<id>", within its windows; End ends those
// sessions (their memory zeroed and freed) and no one else's.
func TestInstalledShareCredential(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()
	id, cred, sum := poolCredential(t)
	if err := a.grants.Install(server.Grant{ID: id, Shares: map[int]int{0: 1}}, sum); err != nil {
		t.Fatal(err)
	}
	mine := openDevice(t, a.socket, "alice", 0)
	c := dial(t, a.socket, faas.WithToken(cred))
	d, err := c.Open(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Alloc(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	share := "alloc/" + id
	if u := usageOf(a.srv, 0, share); u.Sessions != 1 || u.Memory == 0 {
		t.Errorf("share session accounting = %+v, want one session of %s", a.srv.SessionUsage(0), share)
	}
	if _, err := c.Open(ctx, 0); !errors.Is(err, faas.ErrQuota) {
		t.Errorf("a second session on a one-window share: %v, want ErrQuota", err)
	}

	a.grants.End(id)
	deadline := time.Now().Add(30 * time.Second)
	for usageOf(a.srv, 0, share).Sessions != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the share's session outlived End: %+v", a.srv.SessionUsage(0))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if u := usageOf(a.srv, 0, share); u.Memory != 0 {
		t.Errorf("the share's memory after End: %+v", u)
	}
	if _, err := d.Alloc(ctx, 4096); err == nil {
		t.Error("the share's session still allocates after End")
	}
	if _, err := mine.Alloc(ctx, 4096); err != nil {
		t.Errorf("alice's session on the same chip after the share ended: %v", err)
	}
	if u := usageOf(a.srv, 0, "alice"); u.Sessions != 1 {
		t.Errorf("alice's sessions after the share ended: %+v", u)
	}
}

// TestInstallRefuses: a grant naming no slot, or an id that cannot be
// told apart from the secret in a credential, is refused.
func TestInstallRefuses(t *testing.T) {
	gs := server.NewGrants()
	if err := gs.Install(server.Grant{ID: "a"}, [32]byte{1}); !errors.Is(err, server.ErrBadGrant) {
		t.Errorf("a grant without slots: %v, want ErrBadGrant", err)
	}
	for _, id := range []string{"", "a_b", "a b"} {
		if err := gs.Install(server.Grant{ID: id, Slots: []int{0}}, [32]byte{1}); err == nil || !strings.Contains(err.Error(), "grant id") {
			t.Errorf("grant id %q: %v, want an error naming the grant id", id, err)
		}
	}
}
