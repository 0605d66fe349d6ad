// Package sessions shares one chip running the AliDNN engine between tenant
// processes: each session gets its own shell DDR window, buffers allocated
// inside it, checked programs and a queue of jobs, and the engine is shared
// between sessions at job (FINISH) boundaries by weighted fair scheduling
// with per-tenant quotas. Transport-agnostic: services/agent/server carries
// sessions over the unix socket (shared memory) and TCP+TLS.
//
// CONTRACT DRAFT: the signatures below are fixed; bodies are being written.
package sessions

import (
	"context"
	"errors"
	"log/slog"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// Error categories, checked with errors.Is.
var (
	ErrClosed     = errors.New("session closed")
	ErrBadHandle  = errors.New("no such buffer or program in this session") // forged, freed or another session's handle
	ErrQuota      = errors.New("quota exceeded")                           // memory quota or no free window
	ErrOutOfRange = errors.New("access outside the buffer")                // Write/Read beyond a buffer
	ErrRefused    = errors.New("program refused")                          // an instruction reaches outside the session's buffers
	ErrInUse      = errors.New("in use")                                   // freeing a buffer a live program references
	ErrEngine     = alidnn.ErrEngine                                       // a job stopped with an engine error cause
)

// Chip is what an Engine needs of a chip with the AliDNN role loaded.
// *device.Chip satisfies it.
type Chip interface {
	alidnn.Port
	Write(ctx context.Context, addr uint64, p []byte) error
	Read(ctx context.Context, addr uint64, p []byte) error
	SetWindow(n int, base, limit uint64) error
}

// Config configures an Engine. Zero values are the documented defaults.
type Config struct {
	Chip Chip
	// Base and Limit bound the DDR the sessions share: [Base, Limit).
	// Zero Limit: the chip's whole DDR from Base (DDRSize must be given).
	Base, Limit uint64
	DDRSize     uint64
	// Quotas by tenant name; a tenant without one gets DefaultQuota.
	Quotas       map[string]Quota
	DefaultQuota Quota
	Logger       *slog.Logger // nil: discard
}

// Quota limits a tenant on one engine.
type Quota struct {
	// Memory is the most device memory the tenant's sessions may hold
	// together. Zero: an equal part of the engine's DDR among windows.
	Memory uint64
	// Share is the tenant's weight of engine time when others are busy, in
	// (0, 1]. Zero: 1/Windows. An idle engine gives a tenant all of it.
	Share float64
}

// Engine is the session manager of one chip. Start runs its scheduler.
type Engine struct{ _ int }

// New checks the chip (role magic) and the config and returns an Engine.
func New(cfg Config) (*Engine, error) { panic("sessions: unimplemented") }

// Run schedules jobs until ctx ends; then every session is closed.
func (e *Engine) Run(ctx context.Context) error { panic("sessions: unimplemented") }

// Open starts a session for tenant; the session owns one shell window.
func (e *Engine) Open(tenant string) (*Session, error) { panic("sessions: unimplemented") }

// Usage is a snapshot of the engine's accounting, by tenant.
type Usage struct {
	Tenant   string
	Sessions int
	Memory   uint64 // bytes allocated
	BusyNS   uint64 // engine time used by the tenant's jobs
	Jobs     uint64
}

// Usage reports every tenant with a session or past engine time.
func (e *Engine) Usage() []Usage { panic("sessions: unimplemented") }

// Session is one tenant process's view of the engine.
type Session struct{ _ int }

// Handle names a buffer or program of a session: random, unguessable, and
// never valid in another session or after Free.
type Handle uint64

// Buffer is a device-memory allocation.
type Buffer struct {
	Handle Handle
	Addr   uint64 // device address: programs address buffers by it
	Size   uint64
}

// Tenant is the session's tenant.
func (s *Session) Tenant() string { panic("sessions: unimplemented") }

// Alloc allocates size bytes (rounded up to 64) inside the session's window.
func (s *Session) Alloc(size uint64) (Buffer, error) { panic("sessions: unimplemented") }

// Free releases a buffer.
func (s *Session) Free(h Handle) error { panic("sessions: unimplemented") }

// Write copies p into buffer h at off; Read the reverse.
func (s *Session) Write(ctx context.Context, h Handle, off uint64, p []byte) error {
	panic("sessions: unimplemented")
}
func (s *Session) Read(ctx context.Context, h Handle, off uint64, p []byte) error {
	panic("sessions: unimplemented")
}

// Program checks insns (every DRAM access inside one of the session's
// buffers, the stream ending with FINISH) and uploads them to memory of the
// session that no instruction may touch. It returns the program's handle.
func (s *Session) Program(ctx context.Context, insns []isa.Insn) (Handle, error) {
	panic("sessions: unimplemented")
}

// Completion is the end of a job.
type Completion struct {
	Job   uint64 // the id given to Submit
	Stats alidnn.Stats
	Err   error // nil, *alidnn.EngineError, ErrClosed or a context error
}

// Submit queues a run of program p as job id; the completion arrives on
// the session's Completions channel, in the order jobs ran.
func (s *Session) Submit(p Handle, id uint64) error { panic("sessions: unimplemented") }

// Completions delivers the session's completions; closed after Close.
func (s *Session) Completions() <-chan Completion { panic("sessions: unimplemented") }

// Close cancels queued jobs (their completions carry ErrClosed), waits for
// or aborts the running one, zeroes and frees the session's memory and
// disables its window.
func (s *Session) Close() error { panic("sessions: unimplemented") }
