// Package alidnn is the contract of the AliDNN deep-learning engine role:
// its identity, registers, error causes, hardware configuration and a
// reference bitstream, plus Exec, the driver sequence that runs an
// instruction stream on a loaded engine. The instruction set is in the isa
// subpackage; the simulator's functional and cycle model is in model.
//
// Registers, at byte offsets from the role window (shell.RoleBase):
//
//	0x00 MAGIC        RO  0x41444e4e ("ADNN")
//	0x04 CONTROL      WO  bit 0 START (doorbell), bit 1 ABORT
//	0x08 STATUS       RO  bit 0 busy, bit 1 done, bit 2 error; bits 15:8 error cause
//	0x0c INSN_ADDR    RW  device address of the instruction stream, low word (0x10 high word)
//	0x14 INSN_COUNT   RW  number of 16-byte instructions
//	0x18 WINDOW       RW  tenant window index used for every DDR access
//	0x1c JOB_ID       RO  job id of the last FINISH that completed
//	0x20 ERROR_PC     RO  index in the stream of the instruction that failed
//	0x24 CYCLES       RO  modeled cycles of the last run, low word (0x28 high word)
//	0x2c INSNS        RO  instructions completed in the last run
//	0x30 MACS         RO  multiply-accumulates of the last run, low word (0x34 high word)
//	0x38 LOAD_BYTES   RO  DRAM bytes read by LOAD and fetch, low word (0x3c high word)
//	0x40 STORE_BYTES  RO  DRAM bytes written by STORE, low word (0x44 high word)
//	0x48 BUSY_LOAD    RO  cycles the load queue was busy (0x4c compute, 0x50 store)
//	0x54 STALL_LOAD   RO  cycles the load queue, free, waited for a dependency token (0x58 compute, 0x5c store)
//	0x60 CONFIG       RO  bits 7:0 BLOCK_IN, 15:8 BLOCK_OUT, 23:16 BATCH, 31:24 clock in 10 MHz units
//
// A run starts when CONTROL.START is written while the engine is idle: the
// engine fetches INSN_COUNT instructions from INSN_ADDR through WINDOW,
// dispatches them to the load, compute and store queues and runs the queues
// concurrently under their dependency tokens. Each FINISH raises role
// interrupt 0 (user IRQ line shell.IRQRole0) and updates JOB_ID; the stream
// must end with a FINISH, so the last interrupt of a run comes with
// STATUS.done. An error stops the run, sets STATUS.error with the cause and
// ERROR_PC and raises the interrupt too. The counters describe the last run.
package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// Role identity.
const (
	Name    = "alidnn"
	ID      = 0x41444e4e // "ADNN"
	Version = 1<<16 | 0  // 1.0
)

// Register offsets from the role window.
const (
	RegMagic      = 0x00
	RegControl    = 0x04
	RegStatus     = 0x08
	RegInsnAddr   = 0x0c
	RegInsnCount  = 0x14
	RegWindow     = 0x18
	RegJobID      = 0x1c
	RegErrorPC    = 0x20
	RegCycles     = 0x24
	RegInsns      = 0x2c
	RegMACs       = 0x30
	RegLoadBytes  = 0x38
	RegStoreBytes = 0x40
	RegBusyLoad   = 0x48
	RegBusyComp   = 0x4c
	RegBusyStore  = 0x50
	RegStallLoad  = 0x54
	RegStallComp  = 0x58
	RegStallStore = 0x5c
	RegConfig     = 0x60
)

// CONTROL and STATUS bits.
const (
	Start = 1 << 0
	Abort = 1 << 1

	StatusBusy  = 1 << 0
	StatusDone  = 1 << 1
	StatusError = 1 << 2
)

// Cause is an error cause reported in STATUS bits 15:8.
type Cause uint8

// Error causes.
const (
	CauseNone      Cause = 0
	CauseIllegal   Cause = 1 // an instruction does not decode, or breaks a run-time rule
	CauseWindow    Cause = 2 // a DRAM address outside the tenant window
	CauseDeadlock  Cause = 3 // every unfinished queue waits for a token nobody will send
	CauseSRAM      Cause = 4 // an SRAM index beyond the memory space
	CauseBusy      Cause = 5 // START while a run was in progress
	CauseStream    Cause = 6 // INSN_COUNT is 0, too large, or the stream does not end with FINISH
	CauseDecoupled Cause = 7 // the role region was decoupled or DDR failed during the run
	CauseAborted   Cause = 8 // CONTROL.ABORT stopped the run
)

var causeText = [...]string{
	CauseNone:      "no error",
	CauseIllegal:   "illegal instruction",
	CauseWindow:    "DRAM address outside the tenant window",
	CauseDeadlock:  "deadlock: every queue waits for a token",
	CauseSRAM:      "SRAM index out of range",
	CauseBusy:      "started while busy",
	CauseStream:    "bad instruction stream",
	CauseDecoupled: "role decoupled or DDR error",
	CauseAborted:   "aborted",
}

func (c Cause) String() string {
	if int(c) < len(causeText) {
		return causeText[c]
	}
	return fmt.Sprintf("cause %d", uint8(c))
}

// MaxInsns is the longest instruction stream a run accepts.
const MaxInsns = 1 << 24

// Config is the engine's hardware configuration. The simulator's cycle model
// is parameterised by it; Default is what the reference bitstreams build.
type Config struct {
	ClockMHz int // engine clock
	Batch    int // rows of an inp/acc element
	BlockIn  int // lanes of an inp element; columns of a wgt element
	BlockOut int // lanes of an acc element; rows of a wgt element

	// SRAM sizes in elements of each memory space.
	UopSize, InpSize, WgtSize, AccSize, ParamSize int

	// DDRBytesPerCycle is the engine's DRAM bandwidth per clock; DDRLatency
	// the cycles before the first byte of a LOAD or STORE moves.
	DDRBytesPerCycle int
	DDRLatency       int

	// FP32Rate is how many fp32 multiply-accumulate lanes the GEMM array
	// retires per cycle for every int8 one, as a divisor: 4 means fp32 GEMM
	// takes four times the cycles of int8.
	FP32Rate int
}

// Default is the configuration of the reference bitstreams: a 16×16 int8
// GEMM array at 250 MHz (64 G MAC/s) fed by one 512-bit DDR4 port, with
// VTA's default SRAM sizes (32 KiB inp, 256 KiB wgt, 128 KiB acc).
var Default = Config{
	ClockMHz: 250, Batch: 1, BlockIn: 16, BlockOut: 16,
	UopSize: 8192, InpSize: 2048, WgtSize: 1024, AccSize: 2048, ParamSize: 256,
	DDRBytesPerCycle: 64, DDRLatency: 64, FP32Rate: 4,
}

// ConfigWord is the value of the CONFIG register for c.
func (c Config) ConfigWord() uint32 {
	return uint32(c.BlockIn) | uint32(c.BlockOut)<<8 | uint32(c.Batch)<<16 | uint32(c.ClockMHz/10)<<24
}

// Header is the .bit header of the engine's partial bitstream for part.
func Header(part shell.Part) bitfile.Header { return bitfile.RoleHeader(Name, part) }

// Bitstream returns a partial bitstream of the engine for part with
// frameBytes bytes of configuration frames (see bitfile.Simulated).
func Bitstream(part shell.Part, frameBytes int) ([]byte, error) {
	return bitfile.Simulated(Name, part, frameBytes)
}
