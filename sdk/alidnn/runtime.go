package alidnn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Device is an AliDNN engine with device memory: the in-process simulator,
// or (later) a slot through the node agent.
type Device interface {
	alidnn.Port
	WriteAt(ctx context.Context, p []byte, addr uint64) error
	ReadAt(ctx context.Context, p []byte, addr uint64) error
	// Window is the tenant window the engine's DDR accesses go through:
	// device memory [base, base+size), window index win.
	Window() (base, size uint64, win int)
}

// Session is a program loaded on a device: constants and instructions
// uploaded once, run any number of times. A Session runs one inference at a
// time.
type Session struct {
	dev  Device
	prog *Program
	base uint64
	win  int
}

// ErrInput is wrapped by errors about the inputs given to Run.
var ErrInput = errors.New("bad input")

// Load uploads p to dev at the start of its window.
func Load(ctx context.Context, dev Device, p *Program) (*Session, error) {
	base, size, win := dev.Window()
	if p.MemSize() > size {
		return nil, fmt.Errorf("program needs %d bytes of device memory, the window has %d", p.MemSize(), size)
	}
	s := &Session{dev: dev, prog: p, base: base, win: win}
	if len(p.Consts) > 0 {
		if err := dev.WriteAt(ctx, padTo(p.Consts, 64), base); err != nil {
			return nil, fmt.Errorf("uploading constants: %w", err)
		}
	}
	if len(p.Insns) > 0 {
		reloc := make([]isa.Insn, len(p.Insns))
		for k, i := range p.Insns {
			if i.Op == isa.OpLoad || i.Op == isa.OpStore {
				i.DRAM += base
			}
			reloc[k] = i
		}
		b, err := isa.EncodeProgram(reloc)
		if err != nil {
			return nil, fmt.Errorf("relocating: %w", err)
		}
		if err := dev.WriteAt(ctx, b, base+p.insnBase()); err != nil {
			return nil, fmt.Errorf("uploading instructions: %w", err)
		}
	}
	return s, nil
}

func padTo(b []byte, a int) []byte {
	if len(b)%a == 0 {
		return b
	}
	return append(append([]byte(nil), b...), make([]byte, a-len(b)%a)...)
}

// Result is the outputs of a run and what it cost.
type Result struct {
	Outputs  []*onnx.Tensor
	Stats    alidnn.Stats  // engine counters; DeviceNS the modeled device time
	HostTime time.Duration // wall time of Run on this host
}

// Run runs one inference. inputs are matched to the program's inputs by
// name.
func (s *Session) Run(ctx context.Context, inputs ...*onnx.Tensor) (*Result, error) {
	start := time.Now()
	byName := map[string]*onnx.Tensor{}
	for _, t := range inputs {
		byName[t.Name] = t
	}
	host := map[string]*onnx.Tensor{}
	for _, b := range s.prog.Inputs {
		t, ok := byName[b.Name]
		if !ok {
			return nil, fmt.Errorf("%w: input %q missing", ErrInput, b.Name)
		}
		host[b.Name] = t
		data, err := packInput(b, t)
		if err != nil {
			return nil, err
		}
		if err := s.dev.WriteAt(ctx, data, s.base+b.Addr); err != nil {
			return nil, fmt.Errorf("writing input %q: %w", b.Name, err)
		}
	}
	res := &Result{}
	if len(s.prog.Insns) > 0 {
		st, err := alidnn.Exec(ctx, s.dev, alidnn.Run{Insns: s.base + s.prog.insnBase(), Count: len(s.prog.Insns), Window: s.win})
		if err != nil {
			return nil, err
		}
		res.Stats = st
	}
	for _, b := range s.prog.Outputs {
		t, err := s.output(ctx, b, host)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", b.Name, err)
		}
		res.Outputs = append(res.Outputs, t)
	}
	res.HostTime = time.Since(start)
	return res, nil
}

func dims64(shape []int) []int64 {
	d := make([]int64, len(shape))
	for k, v := range shape {
		d[k] = int64(v)
	}
	return d
}

func packInput(b Binding, t *onnx.Tensor) ([]byte, error) {
	own := b.Shape
	if b.Bcast != nil {
		own = b.Bcast
	}
	if len(t.Dims) != len(own) {
		return nil, fmt.Errorf("%w: input %q has shape %v, want %v", ErrInput, b.Name, t.Dims, own)
	}
	for k, d := range t.Dims {
		if int(d) != own[k] {
			return nil, fmt.Errorf("%w: input %q has shape %v, want %v", ErrInput, b.Name, t.Dims, own)
		}
	}
	if t.DataType != b.Type {
		return nil, fmt.Errorf("%w: input %q is %v, want %v", ErrInput, b.Name, t.DataType, b.Type)
	}
	el, err := elemOf(b.Elem)
	if err != nil {
		return nil, err
	}
	lay := b.Lay.internal()
	var bc []int
	if b.Bcast != nil {
		bc = broadcastIndex(b.Shape, b.Bcast)
	}
	if el == f32 {
		f, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		return packF32(lay, f, bc), nil
	}
	iv, err := t.Int64s()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if b.Shift {
		iv = mapI(iv, func(x int64) int64 { return x - 128 })
	}
	return packInt(lay, el, iv, bc), nil
}

func mapI(v []int64, f func(int64) int64) []int64 {
	out := make([]int64, len(v))
	for k, x := range v {
		out[k] = f(x)
	}
	return out
}

func (s *Session) output(ctx context.Context, b Binding, host map[string]*onnx.Tensor) (*onnx.Tensor, error) {
	if b.IsConst {
		if b.ConstI != nil {
			return onnx.NewInt(b.Name, b.Type, dims64(b.Shape), b.ConstI)
		}
		return onnx.NewFloat32(b.Name, dims64(b.Shape), b.ConstF), nil
	}
	if b.Host != "" {
		src, err := s.output(ctx, *b.Src, host)
		if err != nil {
			return nil, err
		}
		f, err := src.Float32s()
		if err != nil {
			return nil, err
		}
		softmax(f, b.Shape, b.Axis, b.Host == "Softmax-1")
		return onnx.NewFloat32(b.Name, dims64(b.Shape), f), nil
	}
	el, err := elemOf(b.Elem)
	if err != nil {
		return nil, err
	}
	lay := b.Lay.internal()
	buf := make([]byte, lay.bytes(el))
	if err := s.dev.ReadAt(ctx, buf, s.base+b.Addr); err != nil {
		return nil, err
	}
	if el == f32 {
		return onnx.NewFloat32(b.Name, dims64(b.Shape), unpackF32(lay, buf)), nil
	}
	iv := unpackInt(lay, el, buf)
	if b.Shift {
		iv = mapI(iv, func(x int64) int64 { return x + 128 })
	}
	return onnx.NewInt(b.Name, b.Type, dims64(b.Shape), iv)
}

// softmax normalises f in place along axis (opset 13), or over all axes
// from axis on (opset < 13, flat).
func softmax(f []float32, shape []int, axis int, flat bool) {
	outer, n, inner := 1, 1, 1
	for k, d := range shape {
		switch {
		case k < axis:
			outer *= d
		case k == axis || (flat && k > axis):
			n *= d
		default:
			inner *= d
		}
	}
	for o := range outer {
		for i := range inner {
			at := func(j int) *float32 { return &f[(o*n+j)*inner+i] }
			m := float32(math.Inf(-1))
			for j := range n {
				m = max(m, *at(j))
			}
			var sum float64
			for j := range n {
				v := math.Exp(float64(*at(j) - m))
				*at(j) = float32(v)
				sum += v
			}
			for j := range n {
				*at(j) = float32(float64(*at(j)) / sum)
			}
		}
	}
}
