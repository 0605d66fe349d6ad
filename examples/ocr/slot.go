package main

import (
	"context"
	"fmt"

	"github.com/fpga-faas/faas/sdk/faas"
)

// open opens slot of the faasd at agent, or with listing attaches an
// accelerator of the registry's pool running it; where says which, and
// closeDev lets it go.
func open(ctx context.Context, agent string, slot int, listing, registry string) (dev *faas.Device, where string, closeDev func(), err error) {
	if listing != "" {
		a, err := faas.Attach(ctx, registry, listing, faas.WithAttachUserAgent("examples/ocr"))
		if err != nil {
			return nil, "", nil, err
		}
		info := a.Info()
		return a.Device(), fmt.Sprintf("slot %d of node %s (attachment %s)", info.Slot, info.Node, info.ID), func() { a.Close() }, nil
	}
	// The credential faasd knows the caller by (see faas.AgentToken); on
	// faasd's own unix socket it may know the caller by its uid instead.
	tok, err := faas.AgentToken()
	if err != nil {
		return nil, "", nil, err
	}
	c, err := faas.Dial(ctx, agent, faas.WithToken(tok), faas.WithUserAgent("examples/ocr"))
	if err != nil {
		return nil, "", nil, err
	}
	d, err := c.Open(ctx, slot)
	if err != nil {
		c.Close()
		return nil, "", nil, fmt.Errorf("opening slot %d: %w", slot, err)
	}
	return d, fmt.Sprintf("slot %d", slot), func() { d.Close(); c.Close() }, nil
}
