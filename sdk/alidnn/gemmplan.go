package alidnn

import "fmt"

// gemmPlan is how a GEMM layer runs on the engine: the tile shape, how many
// input blocks load at once, the buffering, and the micro-ops and constants
// that every tile shares.
type gemmPlan struct {
	cv  *convSpec
	in  *value
	out *value
	lay layout // the output's

	inBlocks, outBlocks int // 16-channel blocks of the input and the output
	// blocks lists, for each output block, the input blocks whose weights
	// are not all zero, the only ones it multiplies; a batch's weights of
	// output block ob start at block wstart[ob].
	blocks [][]int
	wstart []int
	maxKB  int // the longest list of blocks

	ie      elem
	zx      bool // the input has a zero point that padding makes per-pixel
	regions int  // inp regions per input block: 2 with the ones image of zx's correction
	taps    int  // kernel taps
	parts   int  // int8 parts of the widest weight

	// A tile is th output rows of tw columns of nb images; kbc input blocks
	// load at once, each stride inp elements; bufs load buffers and accBufs
	// acc buffers, whose epilogues are eps.
	nb, th, tw    int
	kbc, stride   int
	bufs, accBufs int
	eps           []*epilogue
	u             *uopTable

	inpCap, wgtCap int // inp and wgt elements of one load buffer
	wp             int // SRAM pitch of an input row
	pix            int // acc rows of one image's tile
	n              int // acc rows of a tile
	ist            int // inp elements of one image's chunk
	zbase          int // the zero-point correction's acc region

	uops    gemmUops
	waddr   uint64 // the weights' constant, unless they are on the device (cv.wT)
	ones    uint64 // zx's ones image
	storeEl elem

	chunks, tiles int // emitted so far: they pick the load and acc buffer
	// held is what input each load buffer holds (see chunkLoads).
	held []string
}

// gemmUops are the micro-ops of a GEMM layer's tiles. They name SRAM
// indices, so each buffer has its own.
type gemmUops struct {
	reset  []uint32   // [acc buffer]
	resetZ uint32     // the zero-point correction's region
	first  [][]uint32 // [load buffer][acc buffer]: the taps of each input block
	firstZ []uint32   // [load buffer]: the correction's taps over the ones image
	mulZ   uint32     // the correction times −zx
	addZ   []uint32   // [acc buffer]: the correction added to the tile
}

// planGemm checks l's output layout and chooses its tiles and buffering.
func (e *emitter) planGemm(l *layer) (*gemmPlan, error) {
	cv, out := l.conv, l.out
	p := &gemmPlan{cv: cv, in: l.in, out: out, lay: out.lay,
		inBlocks: (cv.ic + lanes - 1) / lanes, outBlocks: (cv.oc + lanes - 1) / lanes,
		ie: i8, zx: cv.zx != 0, regions: 1, taps: cv.kh * cv.kw, parts: cv.parts()}
	if p.lay.cb() != p.outBlocks || cv.scatter == nil && p.lay.s() != cv.oh*cv.ow {
		return nil, fmt.Errorf("layer %s: output layout %d blocks × %d rows, want %d × %d", out, p.lay.cb(), p.lay.s(), p.outBlocks, cv.oh*cv.ow)
	}
	p.blocks = cv.blockLists()
	p.wstart = make([]int, p.outBlocks+1)
	for ob, bl := range p.blocks {
		p.wstart[ob+1] = p.wstart[ob] + len(bl)
		p.maxKB = max(p.maxKB, len(bl))
	}
	if cv.fp {
		p.ie = f32
	}
	if p.zx {
		p.regions = 2
	}
	if p.taps*p.parts > hw.WgtSize {
		return nil, fmt.Errorf("layer %s: a %dx%d kernel exceeds the weight SRAM: %w", out, cv.kh, cv.kw, ErrUnsupported)
	}
	// Images share a tile, and so each load of weights, when a layer's
	// output is one row high (fully connected layers, where weights
	// dominate).
	p.nb = 1
	if cv.oh == 1 && !cv.batched && !p.zx && cv.scatter == nil {
		p.nb = min(p.lay.o(), 16)
	}
	fits, err := e.fitTiles(l, p)
	if err != nil {
		return nil, err
	}
	if !fits {
		return nil, fmt.Errorf("layer %s: a %dx%d kernel on an input row %d wide does not fit the engine's SRAMs: %w", out, cv.kh, cv.kw, cv.iw, ErrUnsupported)
	}
	p.inpCap, p.wgtCap = hw.InpSize/p.bufs, hw.WgtSize/p.bufs
	p.wp = cv.inCols(p.tw)
	p.pix = p.th * p.tw
	p.n = p.pix * p.nb
	p.ist = p.kbc * p.stride
	p.zbase = p.accBufs * p.n
	if p.tw > 2047 || cv.sh*p.wp > 2047 || cv.sw > 2047 || p.ist > 2047 {
		return nil, fmt.Errorf("layer %s: loop factors exceed 11 bits: %w", out, ErrUnsupported)
	}
	p.storeEl = l.storeElem()
	return p, nil
}

// inRows and inCols are the input rows and columns under th output rows or
// tw output columns.
func (cv *convSpec) inRows(th int) int { return (th-1)*cv.sh + (cv.kh-1)*cv.dh + 1 }
func (cv *convSpec) inCols(tw int) int { return (tw-1)*cv.sw + (cv.kw-1)*cv.dw + 1 }

// tileShapes lists the candidate tiles, largest first: th output rows of the
// whole width, then, for rows whose input does not fit, one row of column
// strips.
func (cv *convSpec) tileShapes() [][2]int {
	var shapes [][2]int
	for th := cv.oh; th >= 1; th-- {
		shapes = append(shapes, [2]int{th, cv.ow})
	}
	for tw := cv.ow - 1; tw >= 1; tw-- {
		// The last strip is narrower; it loads the full strip width,
		// padding what lies past the image, which must fit the padding.
		last := (cv.ow - 1) / tw * tw
		if _, err := spanOf(last*cv.sw-cv.pl, cv.inCols(tw), cv.iw); err == nil {
			shapes = append(shapes, [2]int{1, tw})
		}
	}
	return shapes
}

// fitTiles chooses the largest tile and buffering that fit the SRAMs and
// the micro-op table, and plans the epilogues of its acc buffers. Two load
// buffers, each half of inp and wgt, let the next chunk load while the GEMM
// computes; two acc buffers let the next tile compute while the last one is
// stored. Layers whose smallest tile does not fit give up the acc buffer,
// then the load buffer.
func (e *emitter) fitTiles(l *layer, p *gemmPlan) (bool, error) {
	cv := p.cv
	shapes := cv.tileShapes()
	for _, b := range [][2]int{{2, 2}, {2, 1}, {1, 1}} {
		p.bufs, p.accBufs = b[0], b[1]
		inpCap, wgtCap := hw.InpSize/p.bufs, hw.WgtSize/p.bufs
		for _, sh := range shapes {
			p.th, p.tw = sh[0], sh[1]
			p.stride = cv.inRows(p.th) * cv.inCols(p.tw)
			if p.stride*p.regions*p.nb > inpCap {
				continue
			}
			// Tap micro-ops: one set per load and acc buffer, and one
			// per load buffer for the zero-point correction.
			sets := p.bufs * (p.accBufs + p.regions - 1)
			p.kbc = min(p.maxKB, inpCap/(p.stride*p.regions*p.nb), wgtCap/(p.taps*p.parts), (uopALU-2*p.accBufs-2)/(sets*p.taps*p.parts))
			if p.kbc < 1 {
				continue
			}
			fits, err := e.planEpilogues(l, p)
			if err != nil || fits {
				return fits, err
			}
		}
	}
	return false, nil
}

// planEpilogues plans the steps of each acc buffer for p's tile and reports
// whether the acc SRAM holds them. The tile's acc buffers come first, then
// the correction's region and the steps' rows, which only the compute queue
// touches and the buffers share.
func (e *emitter) planEpilogues(l *layer, p *gemmPlan) (bool, error) {
	n := p.th * p.tw * p.nb
	p.u = &uopTable{}
	free := p.accBufs*n + (p.regions-1)*n
	p.eps = p.eps[:0]
	var ep *epilogue
	for ab := range p.accBufs {
		var err error
		if ep, err = e.plan(l, p.u, ab*n, n, free); err != nil {
			return false, err
		}
		p.eps = append(p.eps, ep)
	}
	return free+ep.rows+ep.tiles*n <= hw.AccSize, nil
}

// addUops adds the micro-ops of p's tiles to its table: resets, the taps of
// each input block, and the zero-point correction's taps reading the ones
// image into its own region.
func (p *gemmPlan) addUops() {
	u, n := p.u, p.n
	p.uops.reset = make([]uint32, p.accBufs)
	for ab := range p.accBufs {
		p.uops.reset[ab] = u.addGemm(ab*n, 0, 0)
	}
	if p.zx {
		p.uops.resetZ = u.addGemm(p.zbase, 0, 0)
	}
	p.uops.first = make([][]uint32, p.bufs)
	p.uops.firstZ = make([]uint32, p.bufs)
	for b := range p.bufs {
		for ab := range p.accBufs {
			p.uops.first[b] = append(p.uops.first[b], p.addTaps(ab*n, b*p.inpCap, b*p.wgtCap))
		}
		if p.zx {
			p.uops.firstZ[b] = p.addTaps(p.zbase, b*p.inpCap+p.kbc*p.stride, b*p.wgtCap)
		}
	}
	p.uops.addZ = make([]uint32, p.accBufs)
	if p.zx {
		p.uops.mulZ = u.addALU(p.zbase, 0)
		for ab := range p.accBufs {
			p.uops.addZ[ab] = u.addALU(ab*n, p.zbase)
		}
	}
}

// addTaps adds the GEMM micro-ops of a chunk of kbc input blocks at inp and
// their weights at wgt into acc, and returns the first.
func (p *gemmPlan) addTaps(acc, inp, wgt int) uint32 {
	cv := p.cv
	at := uint32(len(p.u.gemm))
	for kb := range p.kbc {
		for part := range p.parts {
			for y := range cv.kh {
				for x := range cv.kw {
					p.u.addGemm(acc, inp+kb*p.stride+y*cv.dh*p.wp+x*cv.dw, wgt+(kb*p.parts+part)*p.taps+y*cv.kw+x)
				}
			}
		}
	}
	return at
}

// addConstants adds the layer's weights, unless they are on the device, and
// the ones image of the zero-point correction to the program's constants.
func (e *emitter) addConstants(p *gemmPlan) {
	if p.cv.wT == nil {
		p.waddr = e.blob(p.cv.weightBlob(p.ie, p.lay.o(), p.blocks, p.wstart))
	}
	if p.zx {
		p.ones = e.blob(p.cv.onesImage(p.inBlocks))
	}
}

// onesImage is the input's shape of 1s in its real channels, 0s in the
// block's padding: a GEMM over it sums the weights a pixel meets, which
// times the zero point is what to subtract.
func (cv *convSpec) onesImage(inBlocks int) []byte {
	b := make([]byte, inBlocks*cv.ih*cv.iw*lanes)
	for kb := range inBlocks {
		for px := range cv.ih * cv.iw {
			for c := range lanes {
				if kb*lanes+c < cv.ic {
					b[(kb*cv.ih*cv.iw+px)*lanes+c] = 1
				}
			}
		}
	}
	return b
}
