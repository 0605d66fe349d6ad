package alidnn

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

func (e *emitter) gemm(l *layer) error {
	cv, in, out := l.conv, l.in, l.out
	lay := out.lay
	KB := (cv.ic + lanes - 1) / lanes
	OB := (cv.oc + lanes - 1) / lanes
	if lay.cb() != OB || cv.scatter == nil && lay.s() != cv.oh*cv.ow {
		return fmt.Errorf("layer %s: output layout %d blocks × %d rows, want %d × %d", out, lay.cb(), lay.s(), OB, cv.oh*cv.ow)
	}
	// Output block ob multiplies only the input blocks blocks[ob] whose
	// weights are not all zero; a batch's weights of block ob start at
	// block wstart[ob].
	blocks := cv.blockLists()
	wstart := make([]int, OB+1)
	maxKB := 0
	for ob, bl := range blocks {
		wstart[ob+1] = wstart[ob] + len(bl)
		maxKB = max(maxKB, len(bl))
	}
	ie := i8
	if cv.fp {
		ie = f32
	}
	zx := cv.zx != 0
	regions := 1
	if zx {
		regions = 2
	}
	taps := cv.kh * cv.kw
	parts := cv.parts()
	if taps*parts > hw.WgtSize {
		return fmt.Errorf("layer %s: a %dx%d kernel exceeds the weight SRAM: %w", out, cv.kh, cv.kw, ErrUnsupported)
	}
	// Choose the tiles and buffering. A tile is th output rows of tw
	// columns (the whole width, unless one row's input does not fit: then
	// one row of column strips) of nb images: images share a tile, and so
	// each load of weights, when a layer's output is one row high (fully
	// connected layers, where weights dominate). kbc input blocks load at
	// once. Two load buffers, each half of inp and wgt, let the next chunk
	// load while the GEMM computes; two acc buffers let the next tile
	// compute while the last one is stored. Layers whose smallest tile does
	// not fit give up the acc buffer, then the load buffer.
	inRows := func(th int) int { return (th-1)*cv.sh + (cv.kh-1)*cv.dh + 1 }
	inCols := func(tw int) int { return (tw-1)*cv.sw + (cv.kw-1)*cv.dw + 1 }
	nb := 1
	if cv.oh == 1 && !cv.batched && !zx && cv.scatter == nil {
		nb = min(lay.o(), 16)
	}
	type shape struct{ th, tw int }
	var shapes []shape
	for th := cv.oh; th >= 1; th-- {
		shapes = append(shapes, shape{th, cv.ow})
	}
	for tw := cv.ow - 1; tw >= 1; tw-- {
		// The last strip is narrower; it loads the full strip width,
		// padding what lies past the image, which must fit the padding.
		last := (cv.ow - 1) / tw * tw
		if _, err := spanOf(last*cv.sw-cv.pl, inCols(tw), cv.iw); err == nil {
			shapes = append(shapes, shape{1, tw})
		}
	}
	var th, tw, kbc, stride, bufs, accBufs int
	var eps []*epilogue
	var err error
	var u *uopTable
	fits := false
	for _, b := range [][2]int{{2, 2}, {2, 1}, {1, 1}} {
		bufs, accBufs = b[0], b[1]
		inpCap, wgtCap := hw.InpSize/bufs, hw.WgtSize/bufs
		for _, sh := range shapes {
			th, tw = sh.th, sh.tw
			stride = inRows(th) * inCols(tw)
			if stride*regions*nb > inpCap {
				continue
			}
			// Tap micro-ops: one set per load and acc buffer, and one
			// per load buffer for the zero-point correction.
			sets := bufs * (accBufs + regions - 1)
			kbc = min(maxKB, inpCap/(stride*regions*nb), wgtCap/(taps*parts), (uopALU-2*accBufs-2)/(sets*taps*parts))
			if kbc < 1 {
				continue
			}
			n := th * tw * nb
			u = &uopTable{}
			// The tile's acc buffers come first, then the correction's
			// region and the steps' rows, which only the compute queue
			// touches and the buffers share.
			free := accBufs*n + (regions-1)*n
			eps = eps[:0]
			var ep *epilogue
			for ab := range accBufs {
				if ep, err = e.plan(l, u, ab*n, n, free); err != nil {
					return err
				}
				eps = append(eps, ep)
			}
			if free+ep.rows+ep.tiles*n <= hw.AccSize {
				fits = true
				break
			}
		}
		if fits {
			break
		}
	}
	if !fits {
		return fmt.Errorf("layer %s: a %dx%d kernel on an input row %d wide does not fit the engine's SRAMs: %w", out, cv.kh, cv.kw, cv.iw, ErrUnsupported)
	}
	inpCap, wgtCap := hw.InpSize/bufs, hw.WgtSize/bufs
	wp := inCols(tw)     // SRAM pitch of an input row
	pix := th * tw       // acc rows of one image's tile
	n := pix * nb        // acc rows of a tile
	ist := kbc * stride  // inp elements of one image's chunk
	zbase := accBufs * n // the zero-point correction's acc region
	if tw > 2047 || cv.sh*wp > 2047 || cv.sw > 2047 || ist > 2047 {
		return fmt.Errorf("layer %s: loop factors exceed 11 bits: %w", out, ErrUnsupported)
	}
	// Micro-ops: resets, the taps of each input block, and the zero-point
	// correction's taps reading the ones image into its own region. They
	// name SRAM indices, so each buffer has its own.
	reset := make([]uint32, accBufs)
	for ab := range accBufs {
		reset[ab] = u.addGemm(ab*n, 0, 0)
	}
	var resetZ uint32
	if zx {
		resetZ = u.addGemm(zbase, 0, 0)
	}
	taps4 := func(acc, inp, wgt int) uint32 {
		at := uint32(len(u.gemm))
		for kb := range kbc {
			for part := range parts {
				for y := range cv.kh {
					for x := range cv.kw {
						u.addGemm(acc, inp+kb*stride+y*cv.dh*wp+x*cv.dw, wgt+(kb*parts+part)*taps+y*cv.kw+x)
					}
				}
			}
		}
		return at
	}
	first := make([][]uint32, bufs) // [load buffer][acc buffer]
	firstZ := make([]uint32, bufs)
	for b := range bufs {
		for ab := range accBufs {
			first[b] = append(first[b], taps4(ab*n, b*inpCap, b*wgtCap))
		}
		if zx {
			firstZ[b] = taps4(zbase, b*inpCap+kbc*stride, b*wgtCap)
		}
	}
	var mulZ uint32
	addZ := make([]uint32, accBufs)
	if zx {
		mulZ = u.addALU(zbase, 0)
		for ab := range accBufs {
			addZ[ab] = u.addALU(ab*n, zbase)
		}
	}
	wb := lanes * lanes * ie.size()
	var waddr uint64
	if cv.wT == nil {
		waddr = e.blob(cv.weightBlob(ie, lay.o(), blocks, wstart))
	}
	var ones uint64
	if zx {
		b := make([]byte, KB*cv.ih*cv.iw*lanes)
		for kb := range KB {
			for p := range cv.ih * cv.iw {
				for c := range lanes {
					if kb*lanes+c < cv.ic {
						b[(kb*cv.ih*cv.iw+p)*lanes+c] = 1
					}
				}
			}
		}
		ones = e.blob(b)
	}
	if err := e.loadUops(u); err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	ieb := ie.size() * lanes
	se := l.storeElem()
	e.buffers(bufs, accBufs)
	S := cv.oh * cv.ow
	chunk, tile := 0, 0
	for o0 := 0; o0 < lay.o(); o0 += nb {
		ni := min(nb, lay.o()-o0)
		for ob := range OB {
			for r0 := 0; r0 < cv.oh; r0 += th {
				t := min(th, cv.oh-r0)
				ys, err := spanOf(r0*cv.sh-cv.pt, inRows(t), cv.ih)
				if err != nil {
					return fmt.Errorf("layer %s: %w", out, err)
				}
				for c0 := 0; c0 < cv.ow; c0 += tw {
					w := min(tw, cv.ow-c0)
					xs, err := spanOf(c0*cv.sw-cv.pl, wp, cv.iw)
					if err != nil {
						return fmt.Errorf("layer %s: %w", out, err)
					}
					ab := tile % accBufs
					tile++
					e.beginTile()
					bl := blocks[ob]
					for kb0 := 0; kb0 < len(bl); kb0 += kbc {
						kn := min(kbc, len(bl)-kb0)
						buf := chunk % bufs
						chunk++
						var loads []isa.Insn
						for i := range ni {
							for kb := range kn {
								ld := load(isa.MemInp, ie, buf*inpCap+i*ist+kb*stride,
									in.addr+uint64((((o0+i)*KB+bl[kb0+kb])*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*ieb), ys.real, xs.real, cv.iw)
								ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
								loads = append(loads, ld)
								if zx {
									z := ld
									z.SRAM = uint32(buf*inpCap + (kbc+kb)*stride)
									z.DRAM = ones + uint64((bl[kb0+kb]*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes)
									loads = append(loads, z)
								}
							}
						}
						wsel := 0
						if cv.batched {
							wsel = o0
						}
						if cv.wT != nil {
							// Rows ob·16… of Bᵀ's lane blocks bl[kb0…], N rows apart.
							src := cv.wT.addr + uint64(((o0*KB+bl[kb0])*cv.oc+ob*lanes)*lanes*4)
							loads = append(loads, load(isa.MemWgt, ie, buf*wgtCap, src, kn, 1, cv.oc/lanes))
						} else {
							loads = append(loads, load(isa.MemWgt, ie, buf*wgtCap, waddr+uint64((wsel*wstart[OB]+wstart[ob]+kb0)*parts*taps*wb), 1, kn*parts*taps, kn*parts*taps))
						}
						e.loadBatch(loads...)
						// Rows of one image, or the images of a one-row tile.
						g := isa.Insn{Op: isa.OpGEMM, IterOut: uint32(t), IterIn: uint32(w), DstOut: uint32(tw), DstIn: 1,
							SrcOut: uint32(cv.sh * wp), SrcIn: uint32(cv.sw), FP32: cv.fp}
						if nb > 1 {
							g.IterOut, g.DstOut, g.SrcOut = uint32(ni), uint32(pix), uint32(ist)
						}
						pop := true
						if kb0 == 0 {
							r := g
							r.SrcOut, r.SrcIn = 0, 0
							r.Reset, r.UopBegin, r.UopEnd = true, reset[ab], reset[ab]+1
							e.compute(r, true)
							pop = false
							if zx {
								r.UopBegin, r.UopEnd = resetZ, resetZ+1
								e.compute(r, false)
							}
						}
						g.UopBegin, g.UopEnd = first[buf][ab], first[buf][ab]+uint32(kn*parts*taps)
						e.compute(g, pop)
						if zx {
							g.UopBegin, g.UopEnd = firstZ[buf], firstZ[buf]+uint32(kn*parts*taps)
							e.compute(g, false)
						}
						e.release()
					}
					if zx {
						e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, Imm: -cv.zx, UopBegin: mulZ, UopEnd: mulZ + 1, IterOut: 1, IterIn: uint32(t * tw), DstIn: 1}, false)
						e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, UopBegin: addZ[ab], UopEnd: addZ[ab] + 1, IterOut: 1, IterIn: uint32(t * tw), DstIn: 1, SrcIn: 1}, false)
					}
					tr := tileRef{o: o0, nb: ni, ob: ob, y0: r0, h: t, x0: c0, w: w, pitch: cv.ow, span: pix, sc: cv.scatter}
					e.runTile(eps[ab], out, tr)
					if sc := cv.scatter; sc != nil {
						// A STORE a row, every step-th pixel.
						var sts []isa.Insn
						for y := range t {
							px := ((r0+y)*sc.step+sc.y0)*sc.w + c0*sc.step + sc.x0
							sts = append(sts, isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(ab*n + y*tw),
								DRAM: out.addr + uint64(((o0*OB+ob)*lay.s()+px)*se.size()*lanes), YSize: uint32(w), XSize: 1, XStride: uint32(sc.step)})
						}
						e.store(sts...)
						continue
					}
					// One STORE: the tile's rows, or its images' one row.
					st := isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(ab * n),
						DRAM: out.addr + uint64(((o0*OB+ob)*S+r0*cv.ow+c0)*se.size()*lanes), YSize: uint32(t), XSize: uint32(w), XStride: uint32(cv.ow)}
					if nb > 1 {
						st.YSize, st.XSize, st.XStride = uint32(ni), uint32(w), uint32(OB*S)
					}
					e.store(st)
				}
			}
		}
	}
	return nil
}

// split returns part j of w divided into n int8 parts that sum to w.
func split(w int64, n, j int) int64 {
	q, r := w/int64(n), w%int64(n)
	if int64(j) < abs(r) {
		if r < 0 {
			return q - 1
		}
		return q + 1
	}
	return q
}

// blockLists returns, for each output block, the input blocks it must
// multiply: those where some weight of some tap, part or batch is not zero
// (a grouped convolution's blocks outside its groups, a permutation's
// blocks off its pattern), and at least one, so every tile is computed.
// Skipping a zero block changes nothing but 0 × ±Inf or NaN inputs.
func (cv *convSpec) blockLists() [][]int {
	OB, KB := (cv.oc+lanes-1)/lanes, (cv.ic+lanes-1)/lanes
	if cv.wT != nil { // weights computed on the device: every block
		lists := make([][]int, OB)
		for ob := range lists {
			for kb := range KB {
				lists[ob] = append(lists[ob], kb)
			}
		}
		return lists
	}
	taps := cv.kh * cv.kw
	batches := 1
	if cv.batched {
		batches = max(1, len(cv.wF)+len(cv.wI)) / (cv.oc * cv.icg() * taps)
	}
	nz := make([]bool, OB*KB)
	for b := range batches {
		for o := range cv.oc {
			for k := range cv.ic {
				if nz[(o/lanes)*KB+k/lanes] {
					continue
				}
				for t := range taps {
					src := cv.weight(b, o, k, t)
					if src >= 0 && (cv.fp && cv.wF[src] != 0 || !cv.fp && cv.wI[src] != 0) {
						nz[(o/lanes)*KB+k/lanes] = true
						break
					}
				}
			}
		}
	}
	lists := make([][]int, OB)
	for ob := range OB {
		for kb := range KB {
			if nz[ob*KB+kb] {
				lists[ob] = append(lists[ob], kb)
			}
		}
		if lists[ob] == nil {
			lists[ob] = []int{0}
		}
	}
	return lists
}

// weightBlob lays the weights out as the weight SRAM holds them: for each
// batch (outer index, if the weights are batched), output block ob and
// input block of blocks[ob], parts × kh × kw blocks of 16×16, output
// channels on the rows; a batch's blocks of ob start at block wstart[ob].
func (cv *convSpec) weightBlob(ie elem, outer int, blocks [][]int, wstart []int) []byte {
	OB := len(blocks)
	parts := cv.parts()
	batches := 1
	if cv.batched {
		batches = outer
	}
	taps := cv.kh * cv.kw
	wb := lanes * lanes * ie.size()
	wblob := make([]byte, batches*wstart[OB]*parts*taps*wb)
	for b := range batches {
		for o := range cv.oc {
			for j, kb := range blocks[o/lanes] {
				for k := kb * lanes; k < min(kb*lanes+lanes, cv.ic); k++ {
					for t := range taps {
						src := cv.weight(b, o, k, t)
						if src < 0 {
							continue
						}
						for part := range parts {
							el := (b*wstart[OB]+wstart[o/lanes]+j)*parts*taps + part*taps + t
							off := el*wb + ((o%lanes)*lanes+k%lanes)*ie.size()
							if cv.fp {
								binary.LittleEndian.PutUint32(wblob[off:], math.Float32bits(cv.wF[src]))
							} else {
								wblob[off] = byte(int8(split(cv.wI[src], parts, part)))
							}
						}
					}
				}
			}
		}
	}
	return wblob
}

// parts is how many int8 parts the widest weight needs (see convSpec.wI).
func (cv *convSpec) parts() int {
	parts := 1
	for _, w := range cv.wI {
		switch {
		case w < -256 || w > 254:
			parts = 3
		case (w < -128 || w > 127) && parts < 2:
			parts = 2
		}
	}
	return parts
}
