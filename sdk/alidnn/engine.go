package alidnn

import (
	"context"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// Engine is an AliDNN engine that sessions allocate memory on and submit
// jobs to: a slot served by the node agent (Agent adapts a *faas.Device), or
// the in-process simulator (NewLocal adapts a Device). It is the tenant's
// view of an engine: buffers addressed by device address, instruction
// streams uploaded where the tenant cannot touch them, and a queue that runs
// jobs one after the other in submission order.
//
// The method set follows sdk/faas's device API so that a faas.Device needs
// only a thin adapter; Open is the one consumer.
type Engine interface {
	// Alloc allocates size bytes of device memory.
	Alloc(ctx context.Context, size int64) (Buffer, error)
	// Program uploads an instruction stream ending with FINISH. Every
	// LOAD and STORE must lie inside one buffer of this engine.
	Program(ctx context.Context, insns []isa.Insn) (Code, error)
}

// Buffer is device memory allocated on an Engine. *faas.Buffer satisfies
// it.
type Buffer interface {
	Addr() uint64 // the device address instructions use
	Size() int64
	Write(ctx context.Context, p []byte, off int64) error
	Read(ctx context.Context, p []byte, off int64) error
	Free(ctx context.Context) error
}

// Code is an uploaded instruction stream.
type Code interface {
	// Submit queues one run of the stream behind the engine's earlier
	// jobs and returns at once.
	Submit(ctx context.Context) (Job, error)
}

// codeFreer is the optional capability of a Code whose stream can be
// released from the engine's program area (a faasd session holds 1 MiB of
// programs): Session.Close releases its streams when their Code has it.
type codeFreer interface {
	Free(ctx context.Context) error
}

// Job is a submitted run. *faas.Job satisfies it.
type Job interface {
	// Wait returns the engine's counters once the run has finished.
	Wait(ctx context.Context) (alidnn.Stats, error)
}
