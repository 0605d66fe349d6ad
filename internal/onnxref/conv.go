package onnxref

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// window holds a 2-D convolution's or pooling's geometry.
type window struct {
	kh, kw, sh, sw, dh, dw int
	pt, pl, pb, pr         int
}

// windowOf reads kernel_shape (or the weights' kh, kw), strides, dilations
// and pads; auto_pad other than NOTSET is refused.
func windowOf(n *onnx.Node, kh, kw int) (window, error) {
	w := window{kh: kh, kw: kw, sh: 1, sw: 1, dh: 1, dw: 1}
	if ap, err := n.String("auto_pad", "NOTSET"); err != nil || ap != "NOTSET" {
		return w, fmt.Errorf("auto_pad %q is not implemented (%v)", ap, err)
	}
	get := func(name string, want int, dst ...*int) error {
		v, err := n.Ints(name)
		if err != nil || v == nil {
			return err
		}
		if len(v) != want {
			return fmt.Errorf("%s %v: want %d values (2-D only)", name, v, want)
		}
		for k, p := range dst {
			*p = int(v[k])
		}
		return nil
	}
	for _, err := range []error{get("kernel_shape", 2, &w.kh, &w.kw), get("strides", 2, &w.sh, &w.sw),
		get("dilations", 2, &w.dh, &w.dw), get("pads", 4, &w.pt, &w.pl, &w.pb, &w.pr)} {
		if err != nil {
			return w, err
		}
	}
	if w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1 {
		return w, fmt.Errorf("window %+v", w)
	}
	return w, nil
}

func (w window) out(h, wd int) (int, int) {
	return (h+w.pt+w.pb-w.dh*(w.kh-1)-1)/w.sh + 1, (wd+w.pl+w.pr-w.dw*(w.kw-1)-1)/w.sw + 1
}

// convOperands reads a Conv's or ConvTranspose's input and weights, both
// of rank 4, and its group count.
func convOperands(e *evaluator, n *onnx.Node) (x, wt Tensor, g int, err error) {
	if x, err = e.need(n, 0); err != nil {
		return
	}
	if wt, err = e.need(n, 1); err != nil {
		return
	}
	if len(x.Dims) != 4 || len(wt.Dims) != 4 {
		return x, wt, 0, fmt.Errorf("%s of %v by %v (2-D only)", n.OpType, x.Dims, wt.Dims)
	}
	g64, err := n.Int("group", 1)
	return x, wt, int(g64), err
}

func conv(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, wt, g, err := convOperands(e, n)
	if err != nil {
		return Tensor{}, err
	}
	N, C, H, W := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	M, cg := wt.Dims[0], wt.Dims[1]
	if g < 1 || C != cg*g || M%g != 0 {
		return Tensor{}, fmt.Errorf("Conv of %v by %v in %d groups", x.Dims, wt.Dims, g)
	}
	w, err := windowOf(n, wt.Dims[2], wt.Dims[3])
	if err != nil {
		return Tensor{}, err
	}
	if w.kh != wt.Dims[2] || w.kw != wt.Dims[3] {
		return Tensor{}, fmt.Errorf("kernel_shape %dx%d, weights %v", w.kh, w.kw, wt.Dims)
	}
	bias, hasBias, err := e.in(n, 2)
	if err != nil {
		return Tensor{}, err
	}
	OH, OW := w.out(H, W)
	y := Tensor{Dims: []int{N, M, OH, OW}, V: make([]float64, N*M*OH*OW)}
	mg := M / g
	for b := range N {
		for m := range M {
			out := y.V[(b*M+m)*OH*OW : (b*M+m+1)*OH*OW]
			if hasBias {
				for k := range out {
					out[k] = bias.V[m]
				}
			}
			c0 := m / mg * cg
			for c := range cg {
				xc := x.V[(b*C+c0+c)*H*W : (b*C+c0+c+1)*H*W]
				wc := wt.V[(m*cg+c)*w.kh*w.kw:]
				for ky := range w.kh {
					for kx := range w.kw {
						w.accumulate(out, xc, wc[ky*w.kw+kx], ky, kx, H, W, OH, OW)
					}
				}
			}
		}
	}
	return y, nil
}

// accumulate adds tap (ky, kx) of weight v over the input plane x [H, W]
// to the output plane out [OH, OW], skipping the padding.
func (w window) accumulate(out, x []float64, v float64, ky, kx, H, W, OH, OW int) {
	// Output columns whose input column ox·sw − pl + kx·dw is inside.
	off := kx*w.dw - w.pl
	lo := 0
	if off < 0 {
		lo = (-off + w.sw - 1) / w.sw
	}
	hi := OW
	if last := W - 1 - off; last < 0 {
		hi = 0
	} else {
		hi = min(hi, last/w.sw+1)
	}
	for oy := range OH {
		iy := oy*w.sh - w.pt + ky*w.dh
		if iy < 0 || iy >= H {
			continue
		}
		row, xr := out[oy*OW:(oy+1)*OW], x[iy*W:(iy+1)*W]
		for ox := lo; ox < hi; ox++ {
			row[ox] += v * xr[ox*w.sw+off]
		}
	}
}

// convTranspose scatters each input pixel times the kernel into the
// output, stride apart (dilation 1).
func convTranspose(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, wt, g, err := convOperands(e, n)
	if err != nil {
		return Tensor{}, err
	}
	if out, err := n.Ints("output_shape"); err != nil || out != nil {
		return Tensor{}, fmt.Errorf("output_shape is not implemented (%v)", err)
	}
	N, C, H, W := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	mg := wt.Dims[1]
	if g < 1 || wt.Dims[0] != C || C%g != 0 {
		return Tensor{}, fmt.Errorf("ConvTranspose of %v by %v in %d groups", x.Dims, wt.Dims, g)
	}
	w, err := windowOf(n, wt.Dims[2], wt.Dims[3])
	if err != nil {
		return Tensor{}, err
	}
	if w.dh != 1 || w.dw != 1 {
		return Tensor{}, fmt.Errorf("ConvTranspose dilations %dx%d (only 1)", w.dh, w.dw)
	}
	op := []int{0, 0}
	if v, err := n.Ints("output_padding"); err != nil {
		return Tensor{}, err
	} else if v != nil {
		if len(v) != 2 {
			return Tensor{}, fmt.Errorf("output_padding %v", v)
		}
		op = []int{int(v[0]), int(v[1])}
	}
	M := mg * g
	OH := (H-1)*w.sh - w.pt - w.pb + w.kh + op[0]
	OW := (W-1)*w.sw - w.pl - w.pr + w.kw + op[1]
	y := Tensor{Dims: []int{N, M, OH, OW}, V: make([]float64, N*M*OH*OW)}
	if bias, ok, err := e.in(n, 2); err != nil {
		return Tensor{}, err
	} else if ok {
		for k := range y.V {
			y.V[k] = bias.V[k/(OH*OW)%M]
		}
	}
	cg := C / g
	for b := range N {
		for c := range C {
			for m := range mg {
				om := c/cg*mg + m
				for iy := range H {
					for ix := range W {
						v := x.V[((b*C+c)*H+iy)*W+ix]
						for ky := range w.kh {
							oy := iy*w.sh - w.pt + ky
							if oy < 0 || oy >= OH {
								continue
							}
							for kx := range w.kw {
								ox := ix*w.sw - w.pl + kx
								if ox >= 0 && ox < OW {
									y.V[((b*M+om)*OH+oy)*OW+ox] += v * wt.V[((c*mg+m)*w.kh+ky)*w.kw+kx]
								}
							}
						}
					}
				}
			}
		}
	}
	return y, nil
}

// pool applies f to each window's values inside the image (padding
// excluded; ceil_mode refused).
func pool(e *evaluator, n *onnx.Node, f func(vals []float64, window int) float64) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	if len(x.Dims) != 4 {
		return Tensor{}, fmt.Errorf("%s of %v (2-D only)", n.OpType, x.Dims)
	}
	if c, err := n.Int("ceil_mode", 0); err != nil || c != 0 {
		return Tensor{}, fmt.Errorf("ceil_mode %d is not implemented (%v)", c, err)
	}
	w, err := windowOf(n, 0, 0)
	if err != nil {
		return Tensor{}, err
	}
	N, C, H, W := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	OH, OW := w.out(H, W)
	y := Tensor{Dims: []int{N, C, OH, OW}, V: make([]float64, N*C*OH*OW)}
	vals := make([]float64, 0, w.kh*w.kw)
	for p := range N * C {
		xp := x.V[p*H*W:]
		for oy := range OH {
			for ox := range OW {
				vals = vals[:0]
				for ky := range w.kh {
					for kx := range w.kw {
						iy, ix := oy*w.sh-w.pt+ky*w.dh, ox*w.sw-w.pl+kx*w.dw
						if iy >= 0 && iy < H && ix >= 0 && ix < W {
							vals = append(vals, xp[iy*W+ix])
						}
					}
				}
				y.V[(p*OH+oy)*OW+ox] = f(vals, w.kh*w.kw)
			}
		}
	}
	return y, nil
}

func maxPool(e *evaluator, n *onnx.Node) (Tensor, error) {
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		return Tensor{}, fmt.Errorf("MaxPool's Indices output is not implemented")
	}
	return pool(e, n, func(v []float64, _ int) float64 {
		m := math.Inf(-1)
		for _, x := range v {
			m = math.Max(m, x)
		}
		return m
	})
}

func averagePool(e *evaluator, n *onnx.Node) (Tensor, error) {
	inc, err := n.Int("count_include_pad", 0)
	if err != nil {
		return Tensor{}, err
	}
	return pool(e, n, func(v []float64, window int) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		if inc != 0 {
			return s / float64(window)
		}
		return s / float64(len(v))
	})
}

func globalAveragePool(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	if len(x.Dims) < 3 {
		return Tensor{}, fmt.Errorf("GlobalAveragePool of %v", x.Dims)
	}
	dims := append([]int(nil), x.Dims[:2]...)
	for range x.Dims[2:] {
		dims = append(dims, 1)
	}
	px := size(x.Dims[2:])
	y := Tensor{Dims: dims, V: make([]float64, size(dims))}
	for p := range y.V {
		for _, v := range x.V[p*px : (p+1)*px] {
			y.V[p] += v
		}
		y.V[p] /= float64(px)
	}
	return y, nil
}

// batchNorm is inference batch normalisation over axis 1.
func batchNorm(e *evaluator, n *onnx.Node) (Tensor, error) {
	var in [5]Tensor
	for k := range in {
		t, err := e.need(n, k)
		if err != nil {
			return Tensor{}, err
		}
		in[k] = t
	}
	if len(n.Outputs) > 1 {
		return Tensor{}, fmt.Errorf("training outputs are not implemented")
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return Tensor{}, err
	}
	x, scale, bias, mean, vr := in[0], in[1], in[2], in[3], in[4]
	if len(x.Dims) < 2 {
		return Tensor{}, fmt.Errorf("BatchNormalization of %v", x.Dims)
	}
	C, inner := x.Dims[1], size(x.Dims[2:])
	y := Tensor{Dims: x.Dims, V: make([]float64, len(x.V))}
	for k, v := range x.V {
		c := k / inner % C
		y.V[k] = (v-mean.V[c])/math.Sqrt(vr.V[c]+float64(eps))*scale.V[c] + bias.V[c]
	}
	return y, nil
}
