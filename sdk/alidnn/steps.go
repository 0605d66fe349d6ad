package alidnn

// A layer's epilogue: its element-wise steps planned into accumulator and
// parameter SRAM, and emitted as ALU instructions for each tile.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// epilogue is a layer's steps, placed in acc and param SRAM.
type epilogue struct {
	steps []plannedStep
	rows  int // acc rows the steps need besides the tile
	tiles int // tile-sized acc regions the steps need
}

type plannedStep struct {
	step
	table uint64 // constant table (rows, params) in the constant segment
	reg   int    // acc row or region base, or param row
	uop   uint32
	// For sSelf: the scratch region is reg; copy's uop writes it from the
	// tile, rows[k] holds chain[k]'s constant (tables[k]; −1 for exp and
	// log, which have none) and uops[k] applies it; row fill holds rowF
	// (table), which fillU adds to the cleared tile.
	copyU  uint32
	rows   []int
	tables []uint64
	uops   []uint32
	fill   int
	fillU  uint32
	// blockU are, for a parameter step whose rows for every output block
	// load at once, the micro-op of each block (reading its row).
	blockU []uint32
	// loaded says a tensor step's operand is already in its region: an
	// earlier step of the epilogue reads the same tensor the same way
	// (erf's polynomial multiplies by t four times), and no step writes
	// an operand's region, so one load a tile serves both.
	loaded bool
}

// scalarRow is a row of ob blocks of lanes fp32 lanes, all v.
func scalarRow(ob int, v float32) []byte {
	b := make([]byte, ob*lanes*4)
	for k := range ob * lanes {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
	}
	return b
}

// plan lays out the steps of l for tiles of at most n acc rows starting at
// acc row base, with free acc from row free.
func (e *emitter) plan(l *layer, u *uopTable, base, n, free int) (*epilogue, error) {
	// Rows may now be laid out anew: forget what they held.
	clear(e.rowHolds)
	clear(e.paramHolds)
	ep := &epilogue{}
	ob := l.out.lay.cb()
	param := 0
	// Each tile would load its block's parameter row, paying the DDR
	// latency for 128 bytes; when every block's rows fit the param SRAM
	// (below what the layer keeps there itself, see paramTop), they load
	// once for the layer.
	preload := paramRows(l.steps, ob) <= cmp.Or(e.paramTop, hw.ParamSize)
	for _, s := range l.steps {
		p := plannedStep{step: s}
		switch s.kind {
		case sAddRow, sMulRow, sMinRow, sMaxRow, sLtRow, sEqRow:
			b := make([]byte, ob*lanes*4)
			for k := range ob * lanes {
				var w uint32
				switch {
				case k >= len(s.rowF) && k >= len(s.rowI):
				case s.fp:
					w = math.Float32bits(s.rowF[k])
				case s.rowI != nil:
					v := s.rowI[k]
					if v < math.MinInt32 || v > math.MaxInt32 {
						return nil, fmt.Errorf("integer constant %d overflows int32", v)
					}
					w = uint32(int32(v))
				}
				binary.LittleEndian.PutUint32(b[4*k:], w)
			}
			p.table = e.blob(b)
			p.reg = free
			free++
			ep.rows++
			p.uop = u.addALU(base, p.reg)
		case sAddTensor, sMulTensor, sMinTensor, sMaxTensor, sDivTensor, sLtTensor, sEqTensor, sGtTensor:
			if q := ep.operand(s); q != nil && s.kind != sGtTensor {
				p.reg, p.loaded = q.reg, true
			} else {
				p.reg = free
				free += n
				ep.tiles++
			}
			p.uop = u.addALU(base, p.reg)
			if s.kind == sGtTensor {
				p.copyU = u.addALU(p.reg, 0) // negates the operand's copy
			}
		case sSelf, sFloor:
			free = e.planSelf(&p, ep, u, ob, base, n, free)
		case sRelu, sExp, sLog, sRound:
			p.uop = u.addALU(base, 0)
		case sSquare:
			p.uop = u.addALU(base, base)
		case sRequant, sQuantize, sDequantize:
			b := make([]byte, ob*lanes*8)
			for k := range ob * lanes {
				var lo, hi uint32
				switch s.kind {
				case sRequant:
					if k < len(s.rowI) {
						lo, hi = uint32(int32(s.rowI[k])), uint32(uint8(int8(s.shift[k])))
					}
				default:
					if k < len(s.rowF) {
						lo = math.Float32bits(s.rowF[k])
					}
				}
				binary.LittleEndian.PutUint32(b[8*k:], lo)
				binary.LittleEndian.PutUint32(b[8*k+4:], hi)
			}
			p.table = e.constOnce(b)
			p.reg = param
			if !preload {
				param++
				p.uop = u.addALU(base, p.reg)
				break
			}
			param += ob
			p.blockU = make([]uint32, ob)
			for k := range p.blockU {
				p.blockU[k] = u.addALU(base, p.reg+k)
			}
		case sLut:
			p.table = e.constOnce(lutRows(s.lut))
			p.reg = param
			param += isa.LutRows
			p.uop = u.addALU(base, p.reg)
		}
		ep.steps = append(ep.steps, p)
	}
	if param > hw.ParamSize {
		return nil, fmt.Errorf("%d parameter rows: %w", param, ErrUnsupported)
	}
	return ep, nil
}

// operand returns the planned tensor step that loads s's operand, read
// the same way, or nil.
func (ep *epilogue) operand(s step) *plannedStep {
	for k := range ep.steps {
		q := &ep.steps[k]
		switch q.kind {
		case sAddTensor, sMulTensor, sMinTensor, sMaxTensor, sDivTensor, sLtTensor, sEqTensor:
			if q.t == s.t && !q.loaded && (q.tlay == s.tlay || q.tlay != nil && s.tlay != nil && q.tlay.equal(*s.tlay)) {
				return q
			}
		}
	}
	return nil
}

// planSelf places sSelf step p: its scratch tile, a row for each constant
// of its chain, and one for the values the tile is set to; it returns the
// free acc row after them.
func (e *emitter) planSelf(p *plannedStep, ep *epilogue, u *uopTable, ob, base, n, free int) int {
	p.reg = free
	free += n
	ep.tiles++
	p.copyU = u.addALU(p.reg, base)
	for _, c := range p.chain {
		if c.op.Unary() {
			p.rows, p.tables = append(p.rows, -1), append(p.tables, 0)
			p.uops = append(p.uops, u.addALU(p.reg, 0))
			continue
		}
		p.rows = append(p.rows, free)
		p.tables = append(p.tables, e.blob(scalarRow(ob, c.c)))
		p.uops = append(p.uops, u.addALU(p.reg, free))
		free++
		ep.rows++
	}
	if p.rowF != nil {
		b := make([]byte, ob*lanes*4)
		for k, v := range p.rowF {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
		}
		p.table = e.blob(b)
		p.fill = free
		p.fillU = u.addALU(base, free)
		free++
		ep.rows++
	}
	p.uop = u.addALU(base, p.reg)
	return free
}

// uniformSteps reports whether ep's steps act alike on each of the ob
// output blocks, so that a tile may hold several blocks: every constant
// row the same in each block, tensor operands laid out like the output,
// no per-channel parameters.
func (e *emitter) uniformSteps(ep *epilogue, ob int) bool {
	same := func(table uint64) bool {
		row := e.consts[table : table+lanes*4]
		for b := 1; b < ob; b++ {
			at := table + uint64(b*lanes*4)
			if !bytes.Equal(row, e.consts[at:at+lanes*4]) {
				return false
			}
		}
		return true
	}
	for _, p := range ep.steps {
		switch p.kind {
		case sAddRow, sMulRow, sMinRow, sMaxRow, sLtRow, sEqRow:
			if !same(p.table) {
				return false
			}
		case sAddTensor, sMulTensor, sMinTensor, sMaxTensor, sDivTensor, sLtTensor, sEqTensor, sGtTensor:
			if p.tlay != nil && !p.spread {
				return false
			}
		case sSelf, sFloor:
			for k, r := range p.rows {
				if r >= 0 && !same(p.tables[k]) {
					return false
				}
			}
			if p.rowF != nil && !same(p.table) {
				return false
			}
		case sRelu, sExp, sLog, sRound, sLut, sSquare:
		default:
			return false
		}
	}
	return true
}

// loadRow loads the constant row at src of the constant segment, of
// elements el, into acc row reg, unless the row holds those bytes already:
// a step's scalar is the same in every output block, and tiles of one
// block each (an element-wise layer's) would otherwise load it before
// every ALU pass. Only loads write an epilogue's rows, and plan, laying
// them out, forgets what they held.
func (e *emitter) loadRow(el elem, reg int, src uint64) {
	key := string(append([]byte{byte(el)}, e.consts[src:src+lanes*4]...))
	if e.rowHolds[reg] == key {
		return
	}
	if e.rowHolds == nil {
		e.rowHolds = map[int]string{}
	}
	e.rowHolds[reg] = key
	e.compute(load(isa.MemAcc, el, reg, src, 1, 1, 1), false)
}

// lutRows lays out a table the same in every lane, as ISA.md's lut reads
// it: entry e is byte e mod 8 of each lane of row e/8.
func lutRows(table []int8) []byte {
	b := make([]byte, isa.LutRows*lanes*8)
	for e, v := range table {
		for l := range lanes {
			b[((e/8)*lanes+l)*8+e%8] = byte(v)
		}
	}
	return b
}

// constOnce places b in the constant segment once: each acc buffer's
// epilogue plans its parameter rows and tables, and one copy lets
// loadParams see them held.
func (e *emitter) constOnce(b []byte) uint64 {
	if at, ok := e.placed[string(b)]; ok {
		return at
	}
	if e.placed == nil {
		e.placed = map[string]uint64{}
	}
	at := e.blob(b)
	e.placed[string(b)] = at
	return at
}

// loadParams loads rows param rows of elements el from src of the
// constant segment into param from row reg, unless they hold them: a
// layer's parameter rows and tables are the same for every tile, and only
// these loads write them.
func (e *emitter) loadParams(el elem, reg int, src uint64, rows int) {
	if t, ok := e.paramHolds[reg]; ok && t == src {
		return
	}
	if e.paramHolds == nil {
		e.paramHolds = map[int]uint64{}
	}
	e.paramHolds[reg] = src
	e.compute(load(isa.MemParam, el, reg, src, 1, rows, rows), false)
}

// paramRows is the number of param rows steps take for ob output blocks
// when every block's rows load at once.
func paramRows(steps []step, ob int) int {
	n := 0
	for _, s := range steps {
		switch s.kind {
		case sRequant, sQuantize, sDequantize:
			n += ob
		case sLut:
			n += isa.LutRows
		}
	}
	return n
}

// runSelf emits sSelf step p on a tile of n rows of output block ob.
func (e *emitter) runSelf(p plannedStep, ob, n int) {
	// The scratch region may hold any bits: an integer multiply by zero
	// clears it (fp32 0 × NaN would not), an integer add copies.
	cp := isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.copyU, UopEnd: p.copyU + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, UseImm: true}
	e.compute(cp, false)
	// The copy adds the bits as integers, which keeps a −0 (an fp32
	// +0 + −0 is +0: 1/−0 would be +Inf, ⌊−0⌋ +0).
	cp.Alu, cp.UseImm, cp.SrcIn = isa.AluAdd, false, 1
	e.compute(cp, false)
	for k, c := range p.chain {
		// Exp, log and round take no operand row.
		if p.rows[k] >= 0 {
			e.loadRow(f32, p.rows[k], p.tables[k]+uint64(ob*lanes*4))
		}
		e.compute(isa.Insn{Op: isa.OpALU, Alu: c.op, UopBegin: p.uops[k], UopEnd: p.uops[k] + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, FP32: true}, false)
	}
	if p.rowF != nil {
		// The tile, cleared as the scratch was, gets the row.
		e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.fillU, UopEnd: p.fillU + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, UseImm: true}, false)
		e.loadRow(f32, p.fill, p.table+uint64(ob*lanes*4))
		e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, UopBegin: p.fillU, UopEnd: p.fillU + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, FP32: true}, false)
	}
	for range max(p.combs, 1) {
		e.compute(isa.Insn{Op: isa.OpALU, Alu: p.comb, UopBegin: p.uop, UopEnd: p.uop + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, SrcIn: 1, FP32: true}, false)
	}
}

// runSteps emits the steps for a tile of n rows of output block ob, whose
// rows start at element row of the output's block (o, ob).
func (e *emitter) runSteps(ep *epilogue, out *value, o, ob, row, n int) {
	e.runTile(ep, out, tileRef{o: o, nb: 1, ob: ob, h: 1, x0: row, w: n, pitch: n, span: n})
}

// tileRef is what of an output a tile holds in the accumulator: of images
// o..o+nb−1 and output block ob, h rows of w elements from row y0 and
// element x0 of rows pitch elements long; each image's part takes span acc
// rows, its rows w apart.
type tileRef struct {
	o, nb, ob, y0, h, x0, w, pitch, span int
	// sc scatters the tile's pixels over the output (see scatter): a
	// tensor operand is read from the same places.
	sc *scatter
}

// blocks is how many whole output blocks of s rows tile t holds, one
// after the other: more than 1 for a move's tile of short blocks (see
// move), whose one row of w elements starts a block.
func (t tileRef) blocks(s int) int {
	if t.sc == nil && t.h == 1 && t.x0 == 0 && t.w > s {
		return t.w / s
	}
	return 1
}

// runTile emits the steps for tile t.
func (e *emitter) runTile(ep *epilogue, out *value, t tileRef) {
	lay := out.lay
	n := t.nb * t.span
	ob := t.ob
	for _, p := range ep.steps {
		alu := isa.Insn{Op: isa.OpALU, UopBegin: p.uop, UopEnd: p.uop + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, FP32: p.fp}
		switch p.kind {
		case sAddRow, sMulRow, sMinRow, sMaxRow, sLtRow, sEqRow:
			el := i32
			if p.fp {
				el = f32
			}
			e.loadRow(el, p.reg, p.table+uint64(ob*lanes*4))
			alu.Alu = aluOf[p.kind]
		case sAddTensor, sMulTensor, sMinTensor, sMaxTensor, sDivTensor, sLtTensor, sEqTensor, sGtTensor:
			alu.Alu = aluOf[p.kind]
			alu.SrcIn = 1
			if p.spread {
				if k := t.blocks(lay.s()); k > 1 {
					// Each block of the tile reads the operand's rows.
					alu.IterOut, alu.IterIn, alu.DstOut, alu.SrcOut = uint32(k), uint32(n/k), uint32(n/k), 0
				}
			}
			bcast := e.loadOperand(p, lay, t, !p.loaded)
			if bcast {
				// One row per image, read by every row of the image's part.
				alu.IterOut, alu.IterIn, alu.DstOut, alu.SrcOut, alu.SrcIn = uint32(t.nb), uint32(t.span), uint32(t.span), uint32(t.span), 0
			}
			if p.kind == sGtTensor {
				e.negateOperands(p, t, n, bcast)
			}
		case sSelf:
			e.runSelf(p, ob, n)
			continue
		case sFloor:
			e.runSelf(p, ob, n)
			neg := isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.uop, UopEnd: p.uop + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, UseImm: true, Imm: bf16MinusOne, FP32: true}
			e.compute(neg, false)
			neg.Alu, neg.UseImm, neg.Imm, neg.SrcIn = isa.AluAdd, false, 0, 1
			e.compute(neg, false)
			continue
		case sRelu, sExp, sLog, sRound:
			alu.Alu = unaryOf[p.kind]
		case sSquare:
			alu.Alu, alu.SrcIn = isa.AluMul, 1
		case sRequant, sQuantize, sDequantize:
			el := i32
			alu.Alu = isa.AluRequant
			if p.kind != sRequant {
				el = f32
				alu.Alu = isa.AluQuantize
				if p.kind == sDequantize {
					alu.Alu = isa.AluDequantize
				}
			}
			if p.blockU != nil {
				e.loadParams(el, p.reg, p.table, len(p.blockU))
				alu.UopBegin, alu.UopEnd = p.blockU[ob], p.blockU[ob]+1
			} else {
				e.compute(load(isa.MemParam, el, p.reg, p.table+uint64(ob*lanes*8), 1, 1, 1), false)
			}
			alu.PerChannel = true
			alu.Imm = p.zp
			alu.FP32 = false
		case sLut:
			e.loadParams(i32, p.reg, p.table, isa.LutRows)
			alu.Alu = isa.AluLut
		}
		e.compute(alu, false)
	}
}

// loadOperand loads (if fetch) the part of a tensor step's operand that
// tile t of an output laid out as lay needs, and reports whether that is
// one row per image broadcast over the tile's rows.
func (e *emitter) loadOperand(p plannedStep, lay layout, t tileRef, fetch bool) bool {
	tl := lay
	if p.tlay != nil {
		tl = *p.tlay
	}
	bcast := tl.s() < lay.s()
	// A spread operand is one block of lanes, which every output block
	// reads; a tile of k whole blocks reads its rows k times.
	ob, w, pitch := t.ob, t.w, t.pitch
	if p.spread {
		ob = 0
		if k := t.blocks(lay.s()); k > 1 {
			w, pitch = w/k, pitch/k
		}
	}
	for i := range t.nb * boolN(fetch) {
		img := p.t.addr + uint64((tl.outerIndex(lay, t.o+i)*tl.cb()+ob)*tl.s()*lanes*4)
		switch sc := t.sc; {
		case bcast:
			e.compute(load(isa.MemAcc, f32, p.reg+i*t.span, img, 1, 1, 1), false)
		case sc != nil:
			for y := range t.h {
				px := ((t.y0+y)*sc.step+sc.y0)*sc.w + t.x0*sc.step + sc.x0
				e.compute(load(isa.MemAcc, f32, p.reg+i*t.span+y*t.w, img+uint64(px*lanes*4), t.w, 1, sc.step), false)
			}
		default:
			e.compute(load(isa.MemAcc, f32, p.reg+i*t.span, img+uint64((t.y0*pitch+t.x0)*lanes*4), t.h, w, pitch), false)
		}
	}
	return bcast
}

// unaryOf is the ALU operation of a step without a second operand.
var unaryOf = map[stepKind]isa.AluOp{sRelu: isa.AluRelu, sExp: isa.AluExp, sLog: isa.AluLog, sRound: isa.AluRound}

// aluOf is the ALU operation of a row or tensor step.
var aluOf = map[stepKind]isa.AluOp{
	sAddRow: isa.AluAdd, sMulRow: isa.AluMul, sMinRow: isa.AluMin, sMaxRow: isa.AluMax,
	sAddTensor: isa.AluAdd, sMulTensor: isa.AluMul, sMinTensor: isa.AluMin, sMaxTensor: isa.AluMax, sDivTensor: isa.AluDiv,
	sLtRow: isa.AluLt, sEqRow: isa.AluEq, sLtTensor: isa.AluLt, sEqTensor: isa.AluEq, sGtTensor: isa.AluLt,
}

// bf16MinusOne is −1.0 as an fp32 ALU immediate (bfloat16 0xbf80).
const bf16MinusOne = -0x4080

// negateOperands negates, before gt's lt, the tile and the copy of the
// operand that step p loaded for tile t (n rows; one row per image when
// bcast): x > y is −x < −y, exact for every value, NaN and ±Inf included.
func (e *emitter) negateOperands(p plannedStep, t tileRef, n int, bcast bool) {
	neg := isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.copyU, UopEnd: p.copyU + 1, IterOut: 1, IterIn: uint32(n), DstIn: 1, UseImm: true, Imm: bf16MinusOne, FP32: true}
	if bcast {
		neg.IterOut, neg.IterIn, neg.DstOut, neg.DstIn = uint32(t.nb), 1, uint32(t.span), 0
	}
	e.compute(neg, false)
	neg.UopBegin, neg.UopEnd = p.uop, p.uop+1
	neg.IterOut, neg.IterIn, neg.DstOut, neg.DstIn = 1, uint32(n), 0, 1
	e.compute(neg, false)
}

// storeElem is the type a layer stores its tiles as.
