package loader_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/shell"
)

// TestRefusals checks that every refusal of a load (the phases 1–4 of the
// package comment) names its cause and leaves every slot as it was.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	reg := f.reg
	a := newAgent(t, reg, agentOptions{boards: 2})
	if _, err := a.load("alice", f.loop.ref, nil); err != nil {
		t.Fatal(err)
	}

	// Images for the refusals.
	// Other bytes than the loopback image's layer, which the node has cached.
	img, _ := reg.buildImage("loopback", images.SmallFrameBytes+4096, shell.PartVU9P, true)
	tampered := reg.publish("tampered", "1.0.0", img, nil, reg.isvKey, "available")
	reg.subscribe("alice", tampered)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	reg.tamper(ld.String())

	key2, key2ID := reg.addKeyID()
	img, keys := reg.buildImageYAML("alidnn-dual", images.SmallFrameBytes, shell.PartVU9P, false, "description: signed with a key revoked later\n")
	revoked := reg.publish("revoked", "1.0.0", img, keys, key2, "available")
	reg.subscribe("alice", revoked)
	if _, err := reg.as("acme").RevokeSigningKey(context.Background(), key2ID); err != nil {
		t.Fatal(err)
	}

	// An ISV-signed image in an entitled repository that never went
	// through validation: no countersignature.
	img, _ = reg.buildImageYAML("loopback", images.SmallFrameBytes, shell.PartVU9P, true, "description: never validated\n")
	tag, _ := name.NewTag(reg.host+"/acme/loopback:unvalidated", name.Insecure)
	if err := remote.Write(tag, img, reg.isvAuth()); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if err := sign.Sign(context.Background(), tag.Context().Digest(d.String()), reg.isvKey, sign.WithRemoteOptions(reg.isvAuth())); err != nil {
		t.Fatal(err)
	}
	unvalidated := tag.String()

	img, keys = reg.buildImageYAML("alidnn-dual", images.SmallFrameBytes, shell.PartVU9P, false, "shell: \">=1.0,<1.1\"\n")
	shell10 := reg.publish("shell10", "1.0.0", img, keys, reg.isvKey, "available")
	reg.subscribe("alice", shell10)

	newer := newAgent(t, reg, agentOptions{shellMinor: 1})
	ku := newAgent(t, reg, agentOptions{model: shell.ModelKU15PDual})
	small := newAgent(t, reg, agentOptions{cacheMax: 512 << 10})
	pending := newAgent(t, reg, agentOptions{unapproved: true})

	cases := []struct {
		name   string
		agent  *agent
		tenant string
		ref    string
		slot   *int
		setup  func()
		want   agentapi.Code
		text   string
		// wipes are the target slots a failure after programming began
		// clears; every other slot stays as it was.
		wipes []int
		after func()
	}{
		{"not entitled", a, "bob", f.dual.ref, nil, nil, agentapi.CodeNotEntitled, "granted no load", nil, nil},
		{"node not approved", pending, "alice", f.dual.ref, nil, nil, agentapi.CodeUnavailable, "does not trust this node", nil, nil},
		// A layer not cached streams into its chip as it arrives: its
		// digest is known only at its end, so the target is wiped.
		{"tampered layer", a, "alice", tampered.ref, intp(0), nil, agentapi.CodeSignature, "does not match its digest", []int{0}, nil},
		{"ISV key revoked", a, "alice", revoked.ref, nil, nil, agentapi.CodeSignature, "no valid signature", nil, nil},
		{"missing countersignature", a, "alice", unvalidated, nil, nil, agentapi.CodeCountersign, "countersignature", nil, nil},
		{"wrong shell version", newer, "alice", shell10.ref, nil, nil, agentapi.CodeIncompatible, "runs faas-shell 1.1", nil, nil},
		{"wrong part", ku, "alice", f.dual.ref, nil, nil, agentapi.CodeIncompatible, "xcku15p", nil, nil},
		{"second chip fails to program", a, "alice", f.dual.ref, intp(2), func() { a.sims[1].Chip(1).FailNextProgram() }, agentapi.CodeProgram, "programming slot 3", []int{2, 3}, nil},
		{"cache full", small, "alice", f.dual.ref, nil, nil, agentapi.CodeCacheFull, "cache full", nil, nil},
		// A spend limit of nothing is reached at once: no load grant.
		{"spend limit reached", a, "alice", f.dual.ref, nil, func() { spendLimit(t, reg, "alice", new(int64)) },
			agentapi.CodeSpendLimit, "alice has spent 0.000000 USD of its spend limit of 0.000000 USD", nil,
			func() { spendLimit(t, reg, "alice", nil) }},
		{"registry unreachable", a, "alice", f.dual.ref, nil, reg.stop, agentapi.CodeUnavailable, "registry is unreachable", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.agent.states()
			if c.setup != nil {
				c.setup()
			}
			_, err := c.agent.load(c.tenant, c.ref, c.slot)
			if err == nil {
				t.Fatal("load succeeded")
			}
			if code(err) != c.want || !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q (code %q), want code %q mentioning %q", err, code(err), c.want, c.text)
			}
			var le interface{ Unwrap() error }
			if !errors.As(err, &le) {
				t.Errorf("error %T does not wrap its cause", err)
			}
			for _, i := range c.wipes {
				before[i] = slotState{State: "cleared", RoleID: blank.ID}
			}
			if after := c.agent.states(); !reflect.DeepEqual(after, before) {
				t.Errorf("slots changed:\n before %+v\n after  %+v", before, after)
			}
			if c.after != nil {
				c.after()
			}
		})
	}

	// The registry is back: the same load works.
	reg.start()
	if _, err := a.load("alice", f.dual.ref, nil); err != nil {
		t.Fatalf("load after the registry returned: %v", err)
	}
}

// spendLimit sets tenant's hard spend limit in USD (nil: none).
func spendLimit(t *testing.T, reg *registry, tenant string, limit *int64) {
	t.Helper()
	if _, err := reg.as(tenant).SetSpendLimit(context.Background(), tenant, "USD", registryapi.SpendLimitUpdate{LimitMicros: limit}); err != nil {
		t.Fatal(err)
	}
}
