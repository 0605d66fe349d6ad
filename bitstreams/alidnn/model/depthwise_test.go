package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// dwCase is a depthwise POOL over an h×w image of ch channel blocks, padded
// by the LOAD into inp.
type dwCase struct {
	h, w, ch          int
	kh, kw, sh, sw    int
	gh, gw            int
	pt, pb, pl, pr    int
	bias, accum, fp32 bool
	clamp, inClamp    bool
}

func (c dwCase) String() string {
	return fmt.Sprintf("%dx%dx%d_k%dx%d_s%d,%d_g%d,%d_p%d,%d,%d,%d_bias%v_acc%v_fp32%v_clamp%v,%v",
		c.h, c.w, c.ch, c.kh, c.kw, c.sh, c.sw, c.gh, c.gw, c.pt, c.pb, c.pl, c.pr, c.bias, c.accum, c.fp32, c.clamp, c.inClamp)
}

// dwData is a case's operands: the unpadded image (pixel-major, channel
// blocks inside), the param rows and the acc's initial output.
type dwData struct {
	x      []float64 // h × w × ch × lanes
	prm    []float64 // ch × rows × lanes
	acc0   []float64 // out pixels × ch × lanes
	ih, iw int       // padded
	oh, ow int
	rows   int
}

func (c dwCase) data(rng *rand.Rand) dwData {
	d := dwData{ih: c.h + c.pt + c.pb, iw: c.w + c.pl + c.pr, rows: c.pre() + c.kh*c.kw}
	d.oh = (d.ih-((c.kh-1)*(c.gh+1)+1))/c.sh + 1
	d.ow = (d.iw-((c.kw-1)*(c.gw+1)+1))/c.sw + 1
	val := func(r int) float64 {
		if c.fp32 {
			return float64(float32(rng.NormFloat64()))
		}
		return float64(rng.IntN(2*r) - r)
	}
	d.x = make([]float64, c.h*c.w*c.ch*lanes)
	for i := range d.x {
		d.x[i] = val(128)
	}
	d.prm = make([]float64, c.ch*d.rows*lanes)
	for i := range d.prm {
		d.prm[i] = val(128)
		switch r := i / lanes % d.rows; {
		case c.bias && r == 0:
			d.prm[i] = val(1 << 20)
		case c.clamp && r == boolN(c.bias):
			// A low bound some sums fall under; the high one some exceed.
			d.prm[i] = float64(float32(val(4) - 1))
			if !c.fp32 {
				d.prm[i] *= 300
			}
		case c.clamp && r == boolN(c.bias)+1:
			d.prm[i] = float64(float32(d.prm[i-lanes] + math.Abs(val(4))))
			if !c.fp32 {
				d.prm[i] = d.prm[i-lanes] + math.Abs(val(128))*100
			}
		case c.inClamp && r == c.pre()-2:
			// Input bounds some inputs (and, above 0, the padding) pass.
			d.prm[i] = float64(float32(val(1) / 2))
			if !c.fp32 {
				d.prm[i] = val(64)
			}
		case c.inClamp && r == c.pre()-1:
			d.prm[i] = float64(float32(d.prm[i-lanes] + math.Abs(val(1))))
			if !c.fp32 {
				d.prm[i] = d.prm[i-lanes] + math.Abs(val(64))
			}
		}
	}
	d.acc0 = make([]float64, d.oh*d.ow*c.ch*lanes)
	for i := range d.acc0 {
		d.acc0[i] = val(1 << 20)
	}
	return d
}

// pre is the param rows before a block's taps: bias, low, high, input
// low, input high.
func (c dwCase) pre() int { return boolN(c.bias) + 2*boolN(c.clamp) + 2*boolN(c.inClamp) }

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reference is the case computed by a direct loop over the padded image,
// in float64 rounding each operation to fp32 in the order ISA.md fixes
// (round32), or in int64 (the int8 sums fit in int32).
func (c dwCase) reference(d dwData, round32 bool) []float64 {
	rnd := func(v float64) float64 {
		if round32 {
			return float64(float32(v))
		}
		return v
	}
	px := func(y, x, cb, l int) float64 {
		y, x = y-c.pt, x-c.pl
		if y < 0 || y >= c.h || x < 0 || x >= c.w {
			return 0
		}
		return d.x[((y*c.w+x)*c.ch+cb)*lanes+l]
	}
	out := make([]float64, len(d.acc0))
	for oy := range d.oh {
		for ox := range d.ow {
			for cb := range c.ch {
				for l := range lanes {
					o := ((oy*d.ow+ox)*c.ch+cb)*lanes + l
					w := func(r int) float64 { return d.prm[(cb*d.rows+r)*lanes+l] }
					var s float64
					started := false
					add := func(v float64) {
						if started {
							s = rnd(s + v)
						} else {
							s = v
						}
						started = true
					}
					if c.accum {
						add(d.acc0[o])
					}
					if c.bias {
						add(w(0))
					}
					for ky := range c.kh {
						for kx := range c.kw {
							x := px(oy*c.sh+ky*(c.gh+1), ox*c.sw+kx*(c.gw+1), cb, l)
							if c.inClamp {
								x = math.Min(math.Max(x, w(c.pre()-2)), w(c.pre()-1))
							}
							add(rnd(x * w(c.pre()+ky*c.kw+kx)))
						}
					}
					if c.clamp {
						s = math.Min(math.Max(s, w(boolN(c.bias))), w(boolN(c.bias)+1))
					}
					out[o] = s
				}
			}
		}
	}
	return out
}

// program is the case's instructions: the weights into param row wgt, the
// padded image into inp from src (LOAD counts in elements, so a padded
// pixel is ch elements), the initial output into acc for dwacc, the POOL.
func (c dwCase) program(d dwData, wgt, src, dst int) string {
	dt, kind, flags := "int32", "dw", ""
	if c.fp32 {
		dt, flags = "fp32", " fp32"
	}
	if c.accum {
		kind = "dwacc"
	}
	if c.bias {
		flags += " bias"
	}
	if c.clamp {
		flags += " clamp"
	}
	if c.inClamp {
		flags += " in_clamp"
	}
	s := fmt.Sprintf("load.param %s sram=%d dram=0x1000 y=1 x=%d stride=%d\n", dt, wgt, c.ch*d.rows, c.ch*d.rows)
	idt := "int8"
	if c.fp32 {
		idt = "fp32"
	}
	s += fmt.Sprintf("load.inp %s sram=%d dram=0x8000 y=%d x=%d stride=%d pad=%d,%d,%d,%d ; push_next\n",
		idt, src, c.h, c.w*c.ch, c.w*c.ch, c.pt, c.pb, c.pl*c.ch, c.pr*c.ch)
	if c.accum {
		s += fmt.Sprintf("load.acc %s sram=%d dram=0x40000 y=1 x=%d stride=%d\n", dt, dst, d.oh*d.ow*c.ch, d.oh*d.ow*c.ch)
	}
	s += fmt.Sprintf("pool.%s win=%d,%d stride=%d,%d dst=%d src=%d ch=%d in=%d,%d gap=%d,%d wgt=%d%s ; pop_prev\nfinish job=1\n",
		kind, c.kh, c.kw, c.sh, c.sw, dst, src, c.ch, d.ih, d.iw, c.gh, c.gw, wgt, flags)
	return s
}

// put writes the case's operands into d's DRAM: param lanes as 64 bits.
func (c dwCase) put(dd *memDDR, d dwData) {
	enc := func(v float64) uint32 {
		if c.fp32 {
			return math.Float32bits(float32(v))
		}
		return uint32(int32(v))
	}
	for i, v := range d.prm {
		u := uint64(enc(v)) | uint64(0xdead)<<40 // bits 63:32 are ignored
		for k := range 8 {
			dd.mem[0x1000+8*i+k] = byte(u >> (8 * k))
		}
	}
	for i, v := range d.x {
		if c.fp32 {
			u := math.Float32bits(float32(v))
			for k := range 4 {
				dd.mem[0x8000+4*i+k] = byte(u >> (8 * k))
			}
		} else {
			dd.mem[0x8000+i] = byte(int8(v))
		}
	}
	for i, v := range d.acc0 {
		u := enc(v)
		for k := range 4 {
			dd.mem[0x40000+4*i+k] = byte(u >> (8 * k))
		}
	}
}

func TestDepthwise(t *testing.T) {
	cases := []dwCase{
		{h: 5, w: 6, ch: 1, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pb: 1, pl: 1, pr: 1, fp32: true},
		{h: 7, w: 7, ch: 3, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pb: 1, pl: 1, pr: 1, bias: true, fp32: true},
		{h: 6, w: 9, ch: 2, kh: 3, kw: 5, sh: 1, sw: 2, pt: 0, pb: 2, pl: 2, pr: 0, bias: true, accum: true, fp32: true},
		{h: 9, w: 9, ch: 2, kh: 5, kw: 5, sh: 1, sw: 1, gh: 1, gw: 0, pt: 2, pb: 3, pl: 2, pr: 2, fp32: true},
		{h: 5, w: 6, ch: 1, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pb: 1, pl: 1, pr: 1},
		{h: 8, w: 7, ch: 3, kh: 3, kw: 3, sh: 2, sw: 1, pt: 1, pb: 0, pl: 1, pr: 1, bias: true},
		{h: 9, w: 10, ch: 2, kh: 7, kw: 7, sh: 2, sw: 2, gh: 0, gw: 1, pt: 3, pb: 3, pl: 3, pr: 3, bias: true, accum: true},
		{h: 4, w: 4, ch: 1, kh: 1, kw: 1, sh: 1, sw: 1},
		{h: 7, w: 7, ch: 2, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pb: 1, pl: 1, pr: 1, bias: true, clamp: true, fp32: true},
		{h: 6, w: 7, ch: 2, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pb: 1, pl: 1, pr: 1, clamp: true, accum: true, fp32: true},
		{h: 7, w: 6, ch: 3, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pb: 1, pl: 1, pr: 1, bias: true, clamp: true},
		{h: 7, w: 7, ch: 2, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pb: 1, pl: 1, pr: 1, bias: true, clamp: true, inClamp: true, fp32: true},
		{h: 6, w: 5, ch: 2, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pb: 1, pl: 1, pr: 1, inClamp: true, fp32: true},
		{h: 6, w: 5, ch: 3, kh: 5, kw: 5, sh: 1, sw: 1, pt: 2, pb: 2, pl: 2, pr: 2, bias: true, clamp: true, inClamp: true},
	}
	for k, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(k), 9))
			d := c.data(rng)
			e, dd := testEngine(t, uint64(k)), newMemDDR()
			c.put(dd, d)
			const wgt, src, dst = 7, 3, 100
			cnt, pc, f := execText(t, e, dd, c.program(d, wgt, src, dst))
			if f != nil {
				t.Fatalf("%v at %d", f, pc)
			}
			exact, loose := c.reference(d, c.fp32), c.reference(d, false)
			taps := c.kh * c.kw
			for i, want := range exact {
				a := e.acc[dst*lanes+i]
				got := float64(a)
				if c.fp32 {
					got = float64(math.Float32frombits(uint32(a)))
				}
				if got != want {
					t.Fatalf("element %d (pixel %d block %d lane %d) = %v, want %v", i, i/lanes/c.ch, i/lanes%c.ch, i%lanes, got, want)
				}
				// The rounded order stays a convolution: within a few
				// fp32 ulps of the exact sum's magnitude.
				if c.fp32 && math.Abs(got-loose[i]) > 1e-5*float64(taps+2)*(1+math.Abs(loose[i])) {
					t.Fatalf("element %d = %v, exact sum %v", i, got, loose[i])
				}
			}
			if want := uint64(len(exact) * taps); cnt.macs != want {
				t.Errorf("MACs = %d, want %d", cnt.macs, want)
			}
		})
	}
}

// TestDepthwiseOrder: the fp32 sum is sequential, bias first, each product
// rounded on its own: 2²⁴ + 1 rounds back to 2²⁴, so the taps 1, −2²⁴
// after a bias of 2²⁴ give 0, where any other order or a wider
// accumulator gives 1.
func TestDepthwiseOrder(t *testing.T) {
	c := dwCase{h: 1, w: 2, ch: 1, kh: 1, kw: 2, sh: 1, sw: 1, bias: true, fp32: true}
	d := dwData{ih: 1, iw: 2, oh: 1, ow: 1, rows: 3}
	d.x = make([]float64, 2*lanes)
	d.prm = make([]float64, 3*lanes)
	d.acc0 = make([]float64, lanes)
	for l := range lanes {
		d.x[l], d.x[lanes+l] = 1, -1<<24
		d.prm[l], d.prm[lanes+l], d.prm[2*lanes+l] = 1<<24, 1, 1
	}
	e, dd := testEngine(t, 1), newMemDDR()
	c.put(dd, d)
	if _, pc, f := execText(t, e, dd, c.program(d, 0, 0, 0)); f != nil {
		t.Fatalf("%v at %d", f, pc)
	}
	for l := range lanes {
		if got := math.Float32frombits(uint32(e.acc[l])); got != 0 {
			t.Fatalf("lane %d = %v, want 0 (sequential fp32 rounding)", l, got)
		}
	}
}

func TestDepthwiseFaults(t *testing.T) {
	base := dwCase{h: 3, w: 3, ch: 1, kh: 3, kw: 3, sh: 1, sw: 1}
	for _, c := range []struct {
		name          string
		wgt, src, dst int
		w             float64 // the first weight
		cause         alidnn.Cause
	}{
		{"int8 weight 128", 0, 0, 0, 128, alidnn.CauseIllegal},
		{"int8 weight -129", 0, 0, 0, -129, alidnn.CauseIllegal},
		{"param beyond", alidnn.Default.ParamSize - 8, 0, 0, 1, alidnn.CauseSRAM},
		{"inp beyond", 0, alidnn.Default.InpSize - 8, 0, 1, alidnn.CauseSRAM},
		{"acc beyond", 0, 0, alidnn.Default.AccSize, 1, alidnn.CauseSRAM},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base.data(rand.New(rand.NewPCG(1, 2)))
			d.prm[3] = c.w
			e, dd := testEngine(t, 1), newMemDDR()
			base.put(dd, d)
			// The LOADs fit at 0; the POOL reads beyond.
			text := strings.NewReplacer("wgt=0 ;", fmt.Sprintf("wgt=%d ;", c.wgt),
				"dst=0 src=0 ch", fmt.Sprintf("dst=%d src=%d ch", c.dst, c.src)).Replace(base.program(d, 0, 0, 0))
			_, pc, f := execText(t, e, dd, text)
			if f == nil || f.cause != c.cause || pc != 2 {
				t.Fatalf("fault %v at %d, want %v at 2", f, pc, c.cause)
			}
		})
	}
}

func TestDepthwiseCycles(t *testing.T) {
	e := testEngine(t, 1)
	for _, c := range []struct {
		text string
		want uint64
	}{
		// 4×4 outputs × 2 blocks, one pass.
		{"pool.dw win=3,3 stride=1,1 dst=0 src=0 ch=2 in=6,6 wgt=0", 32},
		{"pool.dw win=3,3 stride=1,1 dst=0 src=0 ch=2 in=6,6 wgt=0 fp32", 32 * 4},
		// 5×5 taps: 3 passes; stride 2 over 9×9: 3×3 outputs.
		{"pool.dwacc win=5,5 stride=2,2 dst=0 src=0 ch=1 in=9,9 wgt=0 bias", 27},
		// Dilation 2 spans 5: 2×2 outputs.
		{"pool.dw win=3,3 stride=1,1 dst=0 src=0 ch=1 in=6,6 gap=1,1 wgt=0", 4},
		{"pool.max win=3,3 stride=1,1 dst=0 src=64 ch=2 in=6,6", 32 * 9},
	} {
		p, err := isa.Assemble(c.text)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.cycles(&p[0]); got != c.want {
			t.Errorf("%s: %d cycles, want %d", c.text, got, c.want)
		}
	}
}

// TestDepthwiseClampNaN: the fused clamp is the ALU's max then min, which
// return the bound when the sum is NaN, so a NaN sum becomes the low bound.
func TestDepthwiseClampNaN(t *testing.T) {
	c := dwCase{h: 1, w: 1, ch: 1, kh: 1, kw: 1, sh: 1, sw: 1, clamp: true, fp32: true}
	d := dwData{ih: 1, iw: 1, oh: 1, ow: 1, rows: 3}
	d.x = make([]float64, lanes)
	d.prm = make([]float64, 3*lanes)
	d.acc0 = make([]float64, lanes)
	for l := range lanes {
		d.x[l] = math.NaN()
		d.prm[l], d.prm[lanes+l], d.prm[2*lanes+l] = -1, 1, 2
	}
	e, dd := testEngine(t, 1), newMemDDR()
	c.put(dd, d)
	if _, pc, f := execText(t, e, dd, c.program(d, 0, 0, 0)); f != nil {
		t.Fatalf("%v at %d", f, pc)
	}
	for l := range lanes {
		if got := math.Float32frombits(uint32(e.acc[l])); got != -1 {
			t.Fatalf("lane %d = %v, want the low bound -1", l, got)
		}
	}
}
