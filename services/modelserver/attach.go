package modelserver

// The engines the command opens through the SDK: slots of this host's
// faasd and attachments from the registry's pool.

import (
	"context"
	"fmt"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
)

// FaasdSlot opens slot of the faasd at agent (a faas.Dial target), which
// must have the AliDNN engine loaded, with opts (faas.WithToken). The
// engine fails when its session ends (faasd stopped or restarted); it is
// reopened by dialing faasd again.
func FaasdSlot(agent string, slot int, opts ...faas.Option) EngineOpener {
	return slotOpener{agent: agent, slot: slot, opts: opts}
}

type slotOpener struct {
	agent string
	slot  int
	opts  []faas.Option
}

func (o slotOpener) String() string { return fmt.Sprintf("slot %d of faasd %s", o.slot, o.agentName()) }

func (o slotOpener) agentName() string {
	if o.agent == "" {
		return "(default)"
	}
	return o.agent
}

func (o slotOpener) OpenEngine(ctx context.Context) (*OpenedEngine, error) {
	c, err := faas.Dial(ctx, o.agent, o.opts...)
	if err != nil {
		return nil, err
	}
	dev, err := c.Open(ctx, o.slot)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("opening slot %d: %w", o.slot, err)
	}
	return &OpenedEngine{Engine: alidnn.Agent(dev), Done: dev.Done(), Where: fmt.Sprintf("slot %d of %s", o.slot, c.Target()),
		Close: func() {
			dev.Close()
			c.Close()
		}}, nil
}

// PoolAttachment attaches an accelerator running listing
// ("LISTING[:VERSION]", an AliDNN image) from the pool of the registry at
// registryURL, with opts (faas.WithRegistryToken, faas.WithLease, ...).
// The SDK renews the lease; the engine fails when the attachment is lost
// or its session ends (the node's faasd died), and a new attachment
// replaces it. The old one is detached, which the registry accepts for a
// lost attachment too.
func PoolAttachment(registryURL, listing string, opts ...faas.AttachOption) EngineOpener {
	return attachOpener{registry: registryURL, listing: listing, opts: opts}
}

type attachOpener struct {
	registry, listing string
	opts              []faas.AttachOption
}

func (o attachOpener) String() string {
	return fmt.Sprintf("attachment of %s from %s", o.listing, o.registry)
}

func (o attachOpener) OpenEngine(ctx context.Context) (*OpenedEngine, error) {
	a, err := faas.Attach(ctx, o.registry, o.listing, o.opts...)
	if err != nil {
		return nil, err
	}
	info := a.Info()
	return &OpenedEngine{Engine: alidnn.Agent(a.Device()), Done: a.Device().Done(),
		Where: fmt.Sprintf("attachment %s on node %s slot %d", a.ID(), info.Node, info.Slot),
		Close: func() { _ = a.Close() }}, nil
}
