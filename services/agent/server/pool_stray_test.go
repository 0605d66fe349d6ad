package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/agent/server"
)

// The chip an attachment leaves to another placed on it, whose load then
// fails. Found by the chaos soak (internal/e2e TestSoak): a two-chip
// attachment placed over a chip the pool had loaded, its load failing as
// the registry's replica was killed, left the chip loaded for nobody — the
// last share on it (or its keep-warm clear) had left it to that
// attachment, and that attachment's release found another image there and
// left it too.

// failing is the two-chip attachment of bob placed on slot i whose load
// fails: it never replaces what the slot holds.
func failing(i int) poolapi.Assignment {
	return poolapi.Assignment{ID: "bob-dual", Slot: i, Chips: 2, Tenant: "bob", Digest: "sha256:" + strings.Repeat("0", 64)}
}

// TestPoolLastShareUnderAFailedAttach: the last share ends while another
// attachment is placed on its chip; that attachment's load fails, and its
// release clears the chip.
func TestPoolLastShareUnderAFailedAttach(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, -1)

	share := attach(t, reg, "alice", listing, true)
	ready := waitReady(t, reg, "alice", share.ID)
	release := server.PlacePoolAttachment(a.srv, failing(ready.Slot))
	reg.api(t, "alice", "DELETE", "/attachments/"+share.ID, nil, nil)
	released(t, reg, share.ID)
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Loaded {
		t.Fatalf("the chip the last share left to the attachment placed on it: %s, want still loaded", rec.State)
	}
	if !release(t.Context()) {
		t.Error("the failed attachment's release reported something of its own on the chip")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared {
		t.Errorf("the chip after the failed attachment's release: %s for %q (pool %+v), want cleared", rec.State, rec.Tenant, rec.Pool)
	}
}

// TestPoolWarmSlotUnderAFailedAttach: a slot's keep-warm runs out while
// another attachment is placed on it, and is left to it; that attachment's
// load fails, and its release arms the slot's clear again.
func TestPoolWarmSlotUnderAFailedAttach(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, time.Hour)

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	released(t, reg, att.ID)
	release := server.PlacePoolAttachment(a.srv, failing(ready.Slot))
	if !server.CoolPoolSlot(a.srv, ready.Slot) {
		t.Fatal("no clear armed for the slot kept warm")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Loaded {
		t.Fatalf("the slot kept warm, left to the attachment placed on it: %s, want still loaded", rec.State)
	}
	if !release(t.Context()) {
		t.Error("the failed attachment's release reported something of its own on the chip")
	}
	if !server.CoolPoolSlot(a.srv, ready.Slot) {
		t.Fatal("after the failed attachment's release, no clear is armed for the image it was left")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared {
		t.Errorf("the slot kept warm at its deadline: %s for %q, want cleared", rec.State, rec.Tenant)
	}
}
