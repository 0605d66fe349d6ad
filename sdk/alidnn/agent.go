package alidnn

import (
	"context"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

// Agent returns dev, a slot with the AliDNN engine opened through the node
// agent (faas.Client.Open), as an Engine: buffers are dev's, streams are
// checked and uploaded by the agent, jobs go through dev's queue.
func Agent(dev *faas.Device) Engine { return agent{dev} }

type agent struct{ dev *faas.Device }

func (a agent) Alloc(ctx context.Context, size int64) (Buffer, error) {
	b, err := a.dev.Alloc(ctx, size)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (a agent) Program(ctx context.Context, insns []isa.Insn) (Code, error) {
	p, err := a.dev.Program(ctx, insns)
	if err != nil {
		return nil, err
	}
	return agentCode{q: a.dev.Queue(), p: p}, nil
}

type agentCode struct {
	q *faas.Queue
	p *faas.Program
}

// Free releases the stream from the session's program area (see
// codeFreer).
func (c agentCode) Free(ctx context.Context) error { return c.p.Free(ctx) }

func (c agentCode) Submit(ctx context.Context) (Job, error) {
	j, err := c.q.Submit(ctx, c.p)
	if err != nil {
		return nil, err
	}
	return j, nil
}
