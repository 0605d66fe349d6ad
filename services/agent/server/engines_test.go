package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
)

// TestEngines: the device plugin's on-demand engines load the AliDNN image
// as the account of their token, through the registry as any load of that
// account; an Engines made after a restart knows the engines loaded
// before; another account's neither sees nor clears them.
func TestEngines(t *testing.T) {
	reg := startRegistry(t)
	listing, digest := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startAgent(t, reg, options{})
	ctx := t.Context()
	u, _ := url.Parse(reg.url)
	ref := u.Host + "/acme/alidnn:1.0.0"

	e := a.srv.Engines(ref, reg.tokens["alice"])
	if e.Loaded(ctx, 0) {
		t.Fatal("Loaded(0) on an empty slot")
	}
	if err := e.LoadEngine(ctx, 0); err != nil {
		t.Fatalf("LoadEngine: %v", err)
	}
	rec := a.table.Record(0)
	if rec.State != agentapi.Loaded || rec.Tenant != "alice" || rec.Image == nil || rec.Image.Digest != digest ||
		rec.Role == nil || rec.Role.ID != alidnn.ID {
		t.Fatalf("slot 0 after LoadEngine: %+v, want the AliDNN image loaded by alice", rec)
	}
	if !a.srv.Engines(ref, reg.tokens["alice"]).Loaded(ctx, 0) {
		t.Error("a new Engines of the same account does not know the engine on slot 0")
	}

	bob := a.srv.Engines(ref, reg.tokens["bob"])
	if bob.Loaded(ctx, 0) {
		t.Error("bob's Engines claims alice's engine")
	}
	if err := bob.ClearEngine(ctx, 0); err == nil {
		t.Error("bob's Engines cleared alice's engine")
	}
	if rec := a.table.Record(0); rec.State != agentapi.Loaded || rec.Tenant != "alice" {
		t.Fatalf("slot 0 after bob's clear: %+v", rec)
	}

	if err := e.ClearEngine(ctx, 0); err != nil {
		t.Fatalf("ClearEngine: %v", err)
	}
	if rec := a.table.Record(0); rec.State != agentapi.Cleared || rec.Tenant != "" {
		t.Errorf("slot 0 after ClearEngine: %+v, want cleared", rec)
	}
	err := bob.LoadEngine(ctx, 0)
	if err == nil || !strings.Contains(err.Error(), "slot 0") || !strings.Contains(err.Error(), "as bob") || !strings.Contains(err.Error(), "no entitlement") {
		t.Errorf("LoadEngine as bob, not subscribed: %v; want the load's failure naming slot and account", err)
	}
	if rec := a.table.Record(0); rec.State != agentapi.Cleared {
		t.Errorf("slot 0 after bob's refused load: %+v, want cleared", rec)
	}

	bad := a.srv.Engines(ref, "faas_not-a-token")
	if err := bad.LoadEngine(ctx, 1); err == nil || !strings.Contains(err.Error(), "account that loads engines") {
		t.Errorf("LoadEngine with a token the registry refuses: %v", err)
	}
}
