package alidnn

import (
	"encoding/binary"
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// hw is the engine configuration programs are compiled for.
var hw = alidnn.Default

// uopALU is where a layer's ALU micro-ops start in the uop SRAM; GEMM
// micro-ops take the space below.
const uopALU = 4096

// emitter builds the instruction stream and the constant segment, keeping
// the dependency-token protocol between the queues:
//
//   - load → compute: each batch of inp/wgt LOADs pushes one token that the
//     GEMM using it pops; the GEMM pushes one back when it is done with the
//     SRAMs. A layer's inp and wgt SRAMs hold one or two buffers: the first
//     batches of a layer fill the free ones without waiting, later batches
//     pop the token of the batch that used their buffer before, so with two
//     buffers the loads of the next batch run while the GEMM computes.
//   - compute → store: a tile's last compute instruction pushes a token the
//     tile's first STORE pops; the last STORE pushes one back, popped by the
//     first compute instruction of the next tile that reuses its acc.
//   - at the end of a layer compute NOPs pop the store tokens still due, so
//     the compute queue (whose acc LOADs read activations) is behind every
//     STORE so far. The next layer that loads through the load queue first
//     puts that queue behind them too: a compute NOP pushes one token to
//     the load queue, whose NOPs pop the release tokens still due and then
//     that one. Layers without load batches (element-wise, fp32 pooling)
//     push no such token, so they never pile up in the FIFO.
//
// So no FIFO holds more than three tokens on any timing, within the
// hardware's isa.TokenDepth (Compile checks every program with
// isa.TokenBound), and every FIFO is empty at FINISH.
type emitter struct {
	insns  []isa.Insn
	consts []byte

	loadFree    int  // load buffers the next batches may fill without a token
	loadTokens  int  // compute → load tokens pushed and not yet popped
	accFree     int  // acc buffers the next tiles may use without a token
	storeTokens int  // store → compute tokens pushed and not yet popped
	lastCompute int  // index of the last compute instruction, −1 none
	tileOpen    bool // the next compute instruction starts a tile
	loadsBehind bool // no STORE since the load queue was last synchronised
	// rowHolds is what the constant rows of the epilogues planned last
	// hold, by acc row (see loadRow).
	rowHolds map[int]string
	// paramHolds is what the param rows from a row hold (a constant-
	// segment offset), for the epilogues planned last (see loadParams).
	paramHolds map[int]uint64
	// placed are the parameter rows and tables placed in the constant
	// segment, by their bytes (see constOnce).
	placed map[string]uint64
	// paramTop, when not 0, is the param row from which a layer keeps
	// its own data (the depthwise unit's weights): epilogues stay below.
	paramTop int
}

func (e *emitter) blob(b []byte) uint64 {
	for len(e.consts)%64 != 0 {
		e.consts = append(e.consts, 0)
	}
	off := uint64(len(e.consts))
	e.consts = append(e.consts, b...)
	return off
}

// buffers sets how many load buffers and acc buffers the current layer
// rotates through; it must precede the layer's first load batch and tile.
func (e *emitter) buffers(load, acc int) { e.loadFree, e.accFree = load, acc }

func (e *emitter) loadBatch(loads ...isa.Insn) {
	if !e.loadsBehind {
		e.syncLoads()
	}
	if e.loadFree > 0 {
		e.loadFree--
	} else {
		loads[0].PopNext = true
		e.loadTokens--
	}
	loads[len(loads)-1].PushNext = true
	e.insns = append(e.insns, loads...)
}

// compute appends a compute-queue instruction; popPrev consumes a load
// batch's token.
func (e *emitter) compute(i isa.Insn, popPrev bool) {
	i.PopPrev = i.PopPrev || popPrev
	if e.tileOpen {
		e.tileOpen = false
		if e.accFree > 0 {
			e.accFree--
		} else {
			i.PopNext = true
			e.storeTokens--
		}
	}
	e.lastCompute = len(e.insns)
	e.insns = append(e.insns, i)
}

// release marks the last compute instruction as done with the load batch.
func (e *emitter) release() {
	e.insns[e.lastCompute].PushPrev = true
	e.loadTokens++
}

func (e *emitter) beginTile() { e.tileOpen = true }

// store ends a tile with its STOREs.
func (e *emitter) store(st ...isa.Insn) {
	e.insns[e.lastCompute].PushNext = true
	st[0].PopPrev = true
	st[len(st)-1].PushPrev = true
	e.insns = append(e.insns, st...)
	e.storeTokens++
}

// drainStores pops the store tokens still due in the compute queue, the
// last one with n's own pop.
func (e *emitter) drainStores(n *isa.Insn) {
	for ; e.storeTokens > 1; e.storeTokens-- {
		e.insns = append(e.insns, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute, PopNext: true})
	}
	if e.storeTokens == 1 {
		n.PopNext = true
		e.storeTokens--
	}
}

// syncLoads puts the load queue behind everything the compute queue has
// issued, its store drains included, and takes back the release tokens
// still due.
func (e *emitter) syncLoads() {
	e.insns = append(e.insns, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute, PushPrev: true})
	for ; e.loadTokens >= 0; e.loadTokens-- {
		e.insns = append(e.insns, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueLoad, PopNext: true})
	}
	e.loadTokens, e.loadsBehind = 0, true
}

// barrier ends a layer: the compute queue waits for its stores, and the
// next layer starts with every SRAM free.
func (e *emitter) barrier() {
	n := isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute}
	e.drainStores(&n)
	if n.PopNext {
		e.insns = append(e.insns, n)
	}
	e.loadsBehind = false
	e.loadFree, e.accFree = 1, 1
	e.lastCompute = -1
}

func (e *emitter) finish(job uint32) {
	f := isa.Insn{Op: isa.OpFinish, JobID: job}
	e.drainStores(&f)
	for ; e.loadTokens > 0; e.loadTokens-- {
		e.insns = append(e.insns, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueLoad, PopNext: true})
	}
	e.insns = append(e.insns, f)
}

func dtypeOf(el elem) isa.DType {
	switch el {
	case i8:
		return isa.Int8
	case i32:
		return isa.Int32
	}
	return isa.FP32
}

func load(mem isa.MemSpace, el elem, sram int, dram uint64, y, x, stride int) isa.Insn {
	return isa.Insn{Op: isa.OpLoad, Mem: mem, DType: dtypeOf(el), SRAM: uint32(sram), DRAM: dram,
		YSize: uint32(y), XSize: uint32(x), XStride: uint32(stride)}
}

// uopTable collects a layer's micro-ops.
type uopTable struct {
	gemm []uint32
	alu  []uint32
	err  error
}

func (u *uopTable) addGemm(acc, inp, wgt int) uint32 {
	w, err := isa.GemmUop{Acc: uint32(acc), Inp: uint32(inp), Wgt: uint32(wgt)}.Encode()
	if err != nil && u.err == nil {
		u.err = err
	}
	u.gemm = append(u.gemm, w)
	return uint32(len(u.gemm) - 1)
}

func (u *uopTable) addALU(dst, src int) uint32 {
	w, err := isa.AluUop{Dst: uint32(dst), Src: uint32(src)}.Encode()
	if err != nil && u.err == nil {
		u.err = err
	}
	u.alu = append(u.alu, w)
	return uopALU + uint32(len(u.alu)-1)
}

// loadUops places the table in the constant segment and loads it.
func (e *emitter) loadUops(u *uopTable) error {
	if u.err != nil {
		return u.err
	}
	if len(u.gemm) > uopALU || len(u.alu) > hw.UopSize-uopALU {
		return fmt.Errorf("%d GEMM and %d ALU micro-ops exceed the uop SRAM: %w", len(u.gemm), len(u.alu), ErrUnsupported)
	}
	put := func(ws []uint32, sram int) {
		if len(ws) == 0 {
			return
		}
		b := make([]byte, 4*len(ws))
		for k, w := range ws {
			binary.LittleEndian.PutUint32(b[4*k:], w)
		}
		off := e.blob(b)
		e.compute(load(isa.MemUop, i32, sram, off, 1, len(ws), len(ws)), false)
	}
	put(u.gemm, 0)
	put(u.alu, uopALU)
	return nil
}

func (l *layer) storeElem() elem {
	switch {
	case l.acc8:
		return i8
	case l.accFP:
		return f32
	}
	return i32
}

func (e *emitter) layer(l *layer) error {
	clear(e.rowHolds)
	clear(e.paramHolds)
	var err error
	switch l.kind {
	case lGemm:
		err = e.gemm(l)
	case lTranspose:
		err = e.transpose(l)
	case lPermute:
		err = e.permute(l)
	case lPool:
		err = e.pool(l)
	case lBlockMax:
		err = e.blockMax(l)
	default:
		err = e.move(l)
	}
	if err != nil {
		return err
	}
	e.barrier()
	return nil
}

// span is the padded input window of a tile: in rows [start, start+rows)
// of an axis of size size, with pads before and after.
type span struct{ y0, real, padB, padE int }

func spanOf(start, rows, size int) (span, error) {
	s := span{y0: max(start, 0)}
	s.padB = s.y0 - start
	end := min(start+rows, size)
	s.real = end - s.y0
	s.padE = start + rows - end
	if s.real <= 0 {
		return s, fmt.Errorf("tile window [%d, %d) misses the input of %d", start, start+rows, size)
	}
	if s.padB > 15 || s.padE > 15 {
		return s, fmt.Errorf("padding %d/%d exceeds the engine's 15: %w", s.padB, s.padE, ErrUnsupported)
	}
	return s, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}
