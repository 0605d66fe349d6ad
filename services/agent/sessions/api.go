// Package sessions shares one chip running the AliDNN engine between tenant
// processes: each session gets its own shell DDR window, buffers allocated
// inside it, checked programs and a queue of jobs, and the engine is shared
// between sessions at job (FINISH) boundaries by weighted fair scheduling
// with per-tenant quotas. Transport-agnostic: services/agent/server carries
// sessions over the unix socket (shared memory) and TCP+TLS.
//
// # Isolation
//
// A session owns one shell tenant window over a contiguous DDR region. The
// region's low part holds the session's buffers; its top
// Config.ProgramBytes hold the session's instruction streams and are never
// handed out by Alloc. Program accepts a stream only if every LOAD and
// STORE lies wholly inside one buffer of the session (isa.Insn.DRAMSpan),
// so no instruction can reach another session's memory nor rewrite its own
// programs. Every run also names the session's window to the engine, so the
// shell refuses a DRAM access outside the region even if this check were
// wrong: the window is the second line of defence.
//
// Memory a session allocates is zeroed on Alloc, so a tenant never reads
// bytes it did not write itself, whatever DDR held before; Close zeroes the
// whole region, so a tenant's data does not outlive its session.
//
// # Scheduling
//
// One goroutine, Engine.Run, runs jobs one at a time. Between jobs it picks
// the tenant with the least virtual time (stride scheduling): a job's wall
// time in alidnn.Exec, divided by the tenant's Quota.Share, is added to the
// tenant's virtual time. A tenant that becomes busy again starts no earlier
// than the virtual time of the tenants already busy, so idleness banks no
// credit; an engine with one busy tenant runs its jobs back to back. Within
// a tenant, jobs run in submit order.
//
// # SRAM between sessions
//
// The engine's SRAMs (uop, inp, wgt, acc, param, and the fp32 banks of inp
// and wgt) keep their contents between runs, and the model resets nothing
// at START; a program that reads SRAM it has not loaded would see what the
// previous job left there. So before a job runs, if the SRAMs may hold data
// of another session (another session, not only another tenant: sessions
// of one tenant are separate processes), the scheduler first runs a scrub:
// an agent program of LOADs that overwrite that data with zeros. Token
// FIFOs, counters and the job id are per run or read only by the agent, so
// the SRAMs are the whole state a run hands to the next.
//
// The scrub clears only what can be dirty. LOAD is the only writer of uop,
// inp, wgt and param, with its SRAM range in the instruction, so Program
// records per bank the element range a program's LOADs may write; GEMM,
// ALU and POOL write acc at indices taken from micro-op data, so they
// dirty the whole accumulator. The engine keeps the union of what jobs
// wrote since the last scrub and whose they were: consecutive jobs of one
// session never scrub, nor does a switch when the jobs since the last
// scrub wrote nothing (FINISH-only programs, say). At start the SRAMs hold
// what an unknown earlier user left, so the first job scrubs every bank.
// Were a scrub to fail, its job completes with the error and does not
// run, and the next job of any other session scrubs again.
//
// The scrub runs through the incoming session's own window and reads zeros
// from its agent area: 68 KiB of its region, between its buffers and its
// program area, holding the scrub program (rewritten before each scrub)
// and 64 KiB of zeros written at Open. No buffer lies there, so no tenant
// instruction or transfer reaches it, and no extra shell window is needed
// (window 0 stays the self-test's). inp and acc are cleared by padding,
// which costs no DRAM read (a whole 2048-element bank is one LOAD reading
// 68 elements); wgt, uop and param take no padding and are read from the
// zeros in 64 KiB LOADs. inp/wgt LOADs run on the load queue and the
// others on the compute queue, in parallel. A full scrub of the default
// configuration is 26 instructions and about 22,000 cycles (88 µs at
// 250 MHz), nearly all of it the 1.25 MiB of the two wgt banks at 64
// bytes a cycle, which the ISA offers no cheaper way to clear; a scrub
// after a job that loaded a few elements costs a few hundred cycles.
// Scrubs are the agent's cost: Usage reports them by the tenant whose job
// they preceded, outside BusyNS and the fair share.
package sessions

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

// Error categories, checked with errors.Is.
var (
	ErrClosed     = errors.New("session closed")
	ErrBadHandle  = errors.New("no such buffer or program in this session") // forged, freed or another session's handle
	ErrQuota      = errors.New("quota exceeded")                            // memory quota or no free window
	ErrOutOfRange = errors.New("access outside the buffer")                 // Write/Read beyond a buffer
	ErrRefused    = errors.New("program refused")                           // an instruction reaches outside the session's buffers
	ErrInUse      = errors.New("in use")                                    // freeing a buffer a live program references
	ErrEngine     = alidnn.ErrEngine                                        // a job stopped with an engine error cause
	ErrCanceled   = errors.New("job cancelled")                             // Cancel removed or aborted the job
	ErrTimeout    = errors.New("job time limit exceeded")                   // the agent aborted a job after Config.JobTimeout
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

	// Windows lists the shell tenant windows sessions may use, one each.
	// Nil: windows 1 to shell.Windows-1. Window 0 is left to the self-test
	// (services/agent/selftest.Run opens it over its buffers and leaves it
	// open); the loopback check of selftest.Loaded borrows window 7 but runs
	// only while the loopback role, not AliDNN, is loaded.
	Windows []int
	// ProgramBytes is the program area at the top of each session's region:
	// the most encoded instructions (16 bytes each) a session may hold at
	// once. Zero: 1 MiB (65536 instructions). Rounded up to 4 KiB.
	ProgramBytes uint64
	// Engine is the configuration of the chip's engine: the SRAM sizes the
	// scrub between sessions clears and the DDR timing it is planned with.
	// Zero: alidnn.Default, what the reference bitstreams build.
	Engine alidnn.Config
	// MaxJobs bounds a session's jobs submitted and not yet handed to its
	// Completions channel; Submit beyond it fails with ErrQuota. This is
	// the backpressure on a client that submits faster than it reads.
	// Zero: 65536.
	MaxJobs int
	// JobTimeout is the longest a job may hold the engine: scheduling is
	// fair only at job boundaries, so without a limit one tenant's endless
	// program would starve every other. A job still running then is
	// aborted and completes with ErrTimeout. Zero: DefaultJobTimeout;
	// negative: no limit.
	JobTimeout time.Duration
}

// DefaultJobTimeout is Config.JobTimeout's default: far beyond any job of
// a real engine (milliseconds) and of the simulated one on the models we
// ship (seconds), yet short enough that a runaway program is cut off.
const DefaultJobTimeout = time.Minute

// Quota limits a tenant on one engine.
type Quota struct {
	// Memory is the most device memory the tenant's sessions may hold
	// together. Zero: an equal part of the engine's DDR among windows.
	//
	// Each session of the tenant reserves a region of Memory (rounded up to
	// 4 KiB) plus Config.ProgramBytes plus the 68 KiB agent area (see
	// Isolation), so the default part is (Limit-Base)/len(Windows) rounded
	// down to 4 KiB, less ProgramBytes and 68 KiB: every window can then
	// hold a session of a default tenant.
	Memory uint64
	// Share is the tenant's weight of engine time when others are busy, in
	// (0, 1]. Zero: 1/Windows. An idle engine gives a tenant all of it.
	Share float64
}

// Activity is what an engine did, for metrics: jobs run and the host time
// it was busy with them since it started, and jobs queued now.
type Activity struct {
	Jobs   uint64
	Busy   time.Duration
	Queued int
}

// Usage is a snapshot of the engine's accounting, by tenant.
type Usage struct {
	Tenant   string
	Sessions int
	Memory   uint64 // bytes allocated
	BusyNS   uint64 // engine time used by the tenant's jobs
	Jobs     uint64
	Running  bool // a job of the tenant (or its scrub) holds the engine
	// Scrubs counts the SRAM scrubs run before the tenant's jobs because
	// another session's data could be in SRAM; ScrubNS is their wall time
	// and ScrubDeviceNS their device time. Scrubs are the agent's cost:
	// they are not in BusyNS nor in the tenant's fair share.
	Scrubs        uint64
	ScrubNS       uint64
	ScrubDeviceNS uint64
}

// Handle names a buffer or program of a session: random, unguessable, and
// never valid in another session or after Free.
type Handle uint64

// Buffer is a device-memory allocation.
type Buffer struct {
	Handle Handle
	Addr   uint64 // device address: programs address buffers by it
	Size   uint64
}

// Completion is the end of a job.
type Completion struct {
	Job   uint64 // the id given to Submit
	Stats alidnn.Stats
	Err   error // nil, *alidnn.EngineError, ErrClosed, ErrCanceled, ErrTimeout or a context error
	// Queued is the time from Submit to the engine's start (the job's
	// turn, and an SRAM scrub before it); Engine the host time of the
	// run. Both are zero for a job that did not run.
	Queued, Engine time.Duration
}
