package model

import (
	"fmt"
	"sync/atomic"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/shell/sim"
)

// lanes is BLOCK_IN = BLOCK_OUT of the supported configurations; BATCH is
// 1. The fast paths are written for these sizes, so newEngine refuses others.
const (
	lanes   = 16
	wgtSize = lanes * lanes // int8 weights per wgt element
	pairs   = lanes / 2     // output lanes packed two per int64 in wgtPair
)

// engine is the functional state of the accelerator: its SRAMs. It persists
// across runs like the hardware's memories do.
type engine struct {
	cfg alidnn.Config

	uop  []uint32  // UopSize micro-ops
	inp  []int8    // InpSize × lanes
	inpF []float32 // fp32 bank of inp, same indices
	wgt  []int8    // WgtSize × (BLOCK_OUT rows × BLOCK_IN columns)
	wgtF []float32 // fp32 bank of wgt
	acc  []int32   // AccSize × lanes, int32 values or fp32 bit patterns
	prm  []uint64  // ParamSize × lanes

	// wgtPair is a shadow of wgt kept in step by LOAD for the int8 GEMM:
	// for element e, column k and output pair p it holds
	// w[2p][k] + w[2p+1][k]·2³², so one 64-bit multiply by an input value
	// computes two products (see gemmInt8).
	wgtPair []int64

	// stop is polled by long instructions so that ABORT and Close end a run
	// promptly.
	stop *atomic.Bool
}

func newEngine(cfg alidnn.Config, stop *atomic.Bool) (*engine, error) {
	if cfg.Batch != 1 || cfg.BlockIn != lanes || cfg.BlockOut != lanes {
		return nil, fmt.Errorf("alidnn model: block sizes %d×%d×%d: only BATCH 1 and 16×16 blocks are modeled", cfg.Batch, cfg.BlockIn, cfg.BlockOut)
	}
	if cfg.UopSize <= 0 || cfg.InpSize <= 0 || cfg.WgtSize <= 0 || cfg.AccSize <= 0 || cfg.ParamSize <= 0 ||
		cfg.DDRBytesPerCycle <= 0 || cfg.DDRLatency < 0 || cfg.FP32Rate <= 0 {
		return nil, fmt.Errorf("alidnn model: invalid configuration %+v", cfg)
	}
	return &engine{
		cfg:     cfg,
		uop:     make([]uint32, cfg.UopSize),
		inp:     make([]int8, cfg.InpSize*lanes),
		inpF:    make([]float32, cfg.InpSize*lanes),
		wgt:     make([]int8, cfg.WgtSize*wgtSize),
		wgtF:    make([]float32, cfg.WgtSize*wgtSize),
		acc:     make([]int32, cfg.AccSize*lanes),
		prm:     make([]uint64, cfg.ParamSize*lanes),
		wgtPair: make([]int64, cfg.WgtSize*lanes*pairs),
		stop:    stop,
	}, nil
}

// fault is an instruction's failure: the cause the engine reports.
type fault struct {
	cause alidnn.Cause
	msg   string
}

func (f *fault) Error() string { return fmt.Sprintf("%s: %s", f.cause, f.msg) }

func faultf(c alidnn.Cause, format string, args ...any) *fault {
	return &fault{cause: c, msg: fmt.Sprintf(format, args...)}
}

// errStopped ends an instruction when the run is aborted or the role closed.
var errStopped = &fault{cause: alidnn.CauseAborted, msg: "stopped"}

// ddrPort is what instructions need of the shell: DDR through a tenant
// window. *sim.Env satisfies it; benchmarks substitute plain memory.
type ddrPort interface {
	ReadAt(win int, p []byte, addr uint64) error
	WriteAt(win int, p []byte, addr uint64) error
}

var _ ddrPort = (*sim.Env)(nil)
