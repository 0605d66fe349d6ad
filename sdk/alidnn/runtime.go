package alidnn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Device is an AliDNN engine with device memory at register level: the
// in-process simulator, or a chip the caller drives itself. Load runs
// programs on one; NewLocal makes it an Engine.
type Device interface {
	alidnn.Port
	WriteAt(ctx context.Context, p []byte, addr uint64) error
	ReadAt(ctx context.Context, p []byte, addr uint64) error
	// Window is the tenant window the engine's DDR accesses go through:
	// device memory [base, base+size), window index win.
	Window() (base, size uint64, win int)
}

// ErrInput is wrapped by errors about the inputs given to Run.
var ErrInput = errors.New("bad input")

// ErrClosed is returned by Run on a closed Session.
var ErrClosed = errors.New("session closed")

// Load uploads p to dev at the start of its window and returns a session
// that runs one inference per job, one job at a time. It is Open on
// NewLocal(dev) with WithBatch(1) and WithPipeline(1): the program takes the
// device memory its compiled layout says (MemSize), and a later Load on dev
// overwrites it.
func Load(ctx context.Context, dev Device, p *Program) (*Session, error) {
	if _, size, _ := dev.Window(); p.MemSize() > size {
		return nil, fmt.Errorf("program needs %d bytes of device memory, the window has %d", p.MemSize(), size)
	}
	return Open(ctx, NewLocal(dev), p, WithBatch(1), WithPipeline(1))
}

// Result is the outputs of a run and what it cost.
type Result struct {
	Outputs []*onnx.Tensor
	// Stats are the engine's counters of the job the run was part of
	// (DeviceNS its modeled device time); Batch runs shared that job.
	Stats    alidnn.Stats
	Batch    int
	HostTime time.Duration // wall time of Run on this host
	// Started is when the run's job was formed: its wait for a job slot,
	// and any hold (WithMaxDelay), ended there.
	Started time.Time
}

// Run runs one inference. inputs are matched to the program's inputs by
// name, each of the input's element type: FLOAT (onnx.NewFloat32), for
// token ids and masks INT64, INT32 or BOOL (onnx.NewInt), STRING
// (onnx.NewString) for a model comparing strings, any other type the
// graph declares (onnx.NewRaw holds every value of UINT64); a tensor of
// another type is refused with ErrInput, never converted. Outputs come
// back in their graph types. Run may be called from many goroutines at
// once: see Session.
func (s *Session) Run(ctx context.Context, inputs ...*onnx.Tensor) (*Result, error) {
	start := time.Now()
	r, err := s.request(ctx, inputs)
	if err != nil {
		return nil, err
	}
	if err := s.enqueue(r); err != nil {
		return nil, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		// Still waiting, r is withdrawn; given to a job already, the job
		// runs on and r's outputs are dropped.
		s.withdraw(r)
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	r.res.HostTime = time.Since(start)
	return r.res, nil
}

// request checks and packs the inputs of one run, on the caller's
// goroutine so that concurrent callers pack in parallel.
func (s *Session) request(ctx context.Context, inputs []*onnx.Tensor) (*request, error) {
	byName := map[string]*onnx.Tensor{}
	for _, t := range inputs {
		byName[t.Name] = t
	}
	r := &request{ctx: ctx, host: map[string]*onnx.Tensor{}, done: make(chan struct{})}
	d := newDict(s.prog.Strings)
	for _, b := range s.prog.Inputs {
		t, ok := byName[b.Name]
		if !ok {
			return nil, fmt.Errorf("%w: input %q missing", ErrInput, b.Name)
		}
		r.host[b.Name] = t
		if s.batched() {
			// Packed with the job's other samples; an empty input (see
			// empty.go) is only checked.
			if err := checkSample(b, t); err != nil {
				return nil, err
			}
			continue
		}
		data, err := packInput(b, t, d)
		if err != nil {
			return nil, err
		}
		r.packed = append(r.packed, data)
	}
	for _, b := range s.prog.Derived {
		if b.Word != nil {
			data, err := packWord(b, byName[b.Word.From])
			if err != nil {
				return nil, err
			}
			r.packed = append(r.packed, data)
			continue
		}
		if b.Gather == nil {
			return nil, fmt.Errorf("derived tensor %q without a rule", b.Name)
		}
		t, ok := byName[b.Gather.From]
		if !ok {
			return nil, fmt.Errorf("%w: input %q missing", ErrInput, b.Gather.From)
		}
		var rows *onnx.Tensor
		if b.Gather.Data != "" {
			if rows, ok = byName[b.Gather.Data]; !ok {
				return nil, fmt.Errorf("%w: input %q missing", ErrInput, b.Gather.Data)
			}
		}
		data, err := packGathered(b, t, s.prog.Consts, rows)
		if err != nil {
			return nil, err
		}
		r.packed = append(r.packed, data)
	}
	return r, nil
}

func dims64(shape []int) []int64 {
	d := make([]int64, len(shape))
	for k, v := range shape {
		d[k] = int64(v)
	}
	return d
}

// packInput packs the input t for binding b, STRING ones as their ids in
// the run's dictionary d.
func packInput(b Binding, t *onnx.Tensor, d *dict) ([]byte, error) {
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
	if b.IsConst || b.HostOnly {
		return nil, nil // an empty input, folded (see empty.go), or a Gather's data (see gatherinput.go)
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
	if b.Type == onnx.String {
		f, err := d.stage(t)
		if err != nil {
			return nil, err
		}
		return packF32(lay, f, bc), nil
	}
	if el == f32 {
		f, err := stagedFloats(t) // converted as boundary.go says
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

// output reads binding b of the run in lane k (host holds the run's inputs).
func (s *Session) output(ctx context.Context, k int, b Binding, host map[string]*onnx.Tensor) (*onnx.Tensor, error) {
	if b.IsConst {
		if b.ConstI != nil {
			return onnx.NewInt(b.Name, b.Type, dims64(b.Shape), b.ConstI)
		}
		return typedTensor(b.Name, b.Type, dims64(b.Shape), b.ConstF, !b.NoSaturate, b.RoundMode)
	}
	if b.Host == castOp {
		return hostCastOutput(b, host)
	}
	if b.Host == wordsOp {
		lo, err := s.output(ctx, k, *b.Src, host)
		if err != nil {
			return nil, err
		}
		hi, err := s.output(ctx, k, *b.High, host)
		if err != nil {
			return nil, err
		}
		return joinWords(b, lo, hi)
	}
	if b.Host != "" {
		src, err := s.output(ctx, k, *b.Src, host)
		if err != nil {
			return nil, err
		}
		f, err := src.Float32s()
		if err != nil {
			return nil, err
		}
		if b.Quant != nil {
			return b.Quant.apply(b.Name, b.Type, b.Shape, f)
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
	if err := s.buf.Read(ctx, buf, int64(s.lay.act(k)+b.Addr-s.prog.ActBase)); err != nil {
		return nil, err
	}
	if el == f32 {
		// Converted to the output's type as boundary.go says.
		return typedTensor(b.Name, b.Type, dims64(b.Shape), unpackF32(lay, buf), !b.NoSaturate, b.RoundMode)
	}
	iv := unpackInt(lay, el, buf)
	if b.Shift {
		iv = mapI(iv, func(x int64) int64 { return x + 128 })
	}
	if b.Type != onnx.Bool {
		// An int32 result of a narrower type, or a UINT32's bit pattern,
		// wraps around the type's range (see intpath.go).
		iv = mapI(iv, func(x int64) int64 { return castInt(x, b.Type) })
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
