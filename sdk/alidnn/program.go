package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Program is a compiled model: engine instructions, the constants they read
// (weights, micro-ops, parameter tables) and where the runtime puts inputs
// and finds outputs. Addresses in the instructions are relative to the
// program's base in device memory; the runtime relocates them when it
// loads the program.
type Program struct {
	Insns   []isa.Insn
	Consts  []byte // at offset 0
	ActBase uint64 // activations start here
	ActSize uint64
	Inputs  []Binding
	Outputs []Binding
	// Derived are device tensors the runtime computes from the inputs as
	// it packs a run: the embedding rows a Gather picks by token ids (see
	// embed.go). They are no inputs of the model's.
	Derived []Binding
	// Strings are the STRING constants Equal reads, string k having id k
	// in every run's dictionary of its STRING inputs (see intern.go).
	Strings [][]byte `json:",omitempty"`
	Layers  int
	MACs    uint64 // multiply-accumulates of the model's operators, one run
	Name    string
	// Batch is the number of samples a run holds when compiled with
	// ForBatch (the leading dimension of its inputs and outputs); 0
	// otherwise.
	Batch int
}

// MemSize is the device memory a loaded program needs: constants,
// activations and the instruction stream.
func (p *Program) MemSize() uint64 {
	return p.insnBase() + uint64(len(p.Insns))*isa.InsnBytes
}

func (p *Program) insnBase() uint64 { return align(p.ActBase+p.ActSize, 4096) }

func align(x, a uint64) uint64 { return (x + a - 1) / a * a }

// Binding ties a graph input or output to device memory.
type Binding struct {
	Name  string
	Shape []int
	Type  onnx.DataType // logical element type

	// Where the data is: a device tensor, or nothing for outputs computed
	// on the host from another binding's data (Host) or constants.
	Addr  uint64
	Elem  string // "int8", "int32", "fp32"
	Lay   Layout
	Bcast []int // inputs: the input's own shape, broadcast on upload
	Shift bool  // uint8 data is held as int8 shifted by −128
	// NoSaturate is, for an output the host converts to float8, the
	// Cast's saturate=0: out-of-range values become NaN or infinity.
	NoSaturate bool `json:",omitempty"`
	// RoundMode is, for an output the host converts to FLOAT8E8M0, the
	// Cast's round_mode ("" for "up").
	RoundMode string `json:",omitempty"`

	Host    string     // "Softmax", "Softmax-1", "QuantizeLinear" or "Cast" (of a DOUBLE input): applied to Src on the host
	Quant   *HostQuant `json:",omitempty"` // QuantizeLinear's parameters
	Axis    int
	Src     *Binding  `json:",omitempty"`
	ConstF  []float32 `json:",omitempty"`
	ConstI  []int64   `json:",omitempty"`
	IsConst bool      `json:",omitempty"`
	// HostOnly says the runtime reads this input on the host only, not
	// uploading it: a Gather's data (see gatherinput.go).
	HostOnly bool `json:",omitempty"`
	// Gather says the runtime fills this derived tensor with rows of a
	// table in the constant segment, chosen by an input's ids (see
	// embed.go).
	Gather *GatherRows `json:",omitempty"`
	// Word says the runtime fills this derived tensor with one 32-bit word
	// of a 64-bit integer input (see wide.go).
	Word *InputWord `json:",omitempty"`
	// High is, for an output the host joins from two 32-bit words (Host
	// "Words"), the high word's binding; Src is the low word's.
	High *Binding `json:",omitempty"`
}

// Layout is a device layout in its serialised form.
type Layout struct {
	Shape []int
	Outer []int
	Lane  int
	Rows  []int
}

func (l layout) export() Layout { return Layout{l.shape, l.outer, l.lane, l.rows} }
func (l Layout) internal() layout {
	return layout{shape: l.Shape, outer: l.Outer, lane: l.Lane, rows: l.Rows}
}

func elemOf(s string) (elem, error) {
	switch s {
	case "int8":
		return i8, nil
	case "int32":
		return i32, nil
	case "fp32":
		return f32, nil
	}
	return 0, fmt.Errorf("element type %q", s)
}

// emit lays out memory and generates the instruction stream.
func (c *compiler) emit() (*Program, error) {
	e := &emitter{lastCompute: -1, loadFree: 1, accFree: 1, loadsBehind: true}
	p := &Program{}
	// Constant tensors used whole (expanded element-wise operands, a
	// Concat's constant inputs).
	for _, l := range c.layers {
		for _, s := range l.steps {
			if s.t != nil && s.t.isConst {
				s.t.addr = e.blob(packConst(s.t))
			}
		}
		if in := l.in; in != nil && in.isConst && !in.placed {
			in.addr, in.placed = e.blob(packConst(in)), true
		}
	}
	tables := map[*value]*Binding{}
	for _, v := range c.inputs {
		if v.gather != nil {
			tables[v] = &Binding{}
			e.bindGather(tables[v], v.gather)
		}
	}
	act := c.placeActivations()
	c.deferInputClamps()
	for _, l := range c.layers {
		if err := e.layer(l); err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", len(p.Insns), l.out.name, err)
		}
		p.Layers++
		p.MACs += l.macs
	}
	e.finish(1)
	if err := checkTokens(e.insns); err != nil {
		return nil, err
	}
	if c.opts.batch > 1 {
		p.Batch = c.opts.batch
	}
	p.Consts = e.consts
	if c.strs != nil {
		p.Strings = c.strs.strings()
	}
	p.ActBase = align(uint64(len(e.consts)), 4096)
	p.ActSize = act
	for k := range e.insns {
		if i := &e.insns[k]; i.Op == isa.OpLoad || i.Op == isa.OpStore {
			i.DRAM = p.actAddr(i.DRAM)
		}
	}
	p.Insns = e.insns
	if len(c.layers) == 0 {
		p.Insns = nil
	}
	if p.MemSize() >= 1<<35 {
		return nil, fmt.Errorf("program needs %d bytes of device memory: %w", p.MemSize(), ErrUnsupported)
	}
	for _, v := range c.inputs {
		b := inputBinding(p.bind(v), v)
		if v.hostOnly {
			b = Binding{Name: v.name, Shape: v.shape, Type: v.typ, HostOnly: true}
		}
		if t := tables[v]; t != nil {
			b.Gather = t.Gather
			p.Derived = append(p.Derived, b)
			continue
		}
		if v.word != nil {
			b.Word = v.word
			p.Derived = append(p.Derived, b)
			continue
		}
		p.Inputs = append(p.Inputs, b)
	}
	for _, v := range c.emptyInputs {
		p.Inputs = append(p.Inputs, p.bind(v))
	}
	for _, o := range c.g.Outputs {
		v := c.vals[o.Name]
		var b Binding
		if v.words != nil {
			lo, hi := p.bind(v.words[0]), p.bind(v.words[1])
			b = Binding{Name: v.name, Shape: v.shape, Type: v.typ, Host: wordsOp, Src: &lo, High: &hi}
		} else if v.host != nil {
			src := p.bind(v.host.src)
			if v.host.op == castOp {
				// The run's own input, which the host reads (see hostcast.go).
				src = Binding{Name: v.host.src.name, Shape: v.host.src.shape, Type: onnx.Double, HostOnly: true}
			}
			b = Binding{Name: v.name, Shape: v.shape, Type: v.typ, Host: v.host.op, Axis: v.host.axis, Src: &src, Quant: v.host.quant,
				NoSaturate: v.noSaturate, RoundMode: v.roundMode}
		} else {
			b = outputBinding(p.bind(v), v)
			b.Name, b.Shape, b.Type, b.NoSaturate, b.RoundMode = v.name, v.shape, v.typ, v.noSaturate, v.roundMode
		}
		p.Outputs = append(p.Outputs, b)
	}
	return p, nil
}

// placeActivations places the graph inputs and layer outputs in the
// activation segment and returns its size. The constant segment grows while
// emitting, so activations are placed at a generous offset (actTag) fixed
// after emission.
func (c *compiler) placeActivations() uint64 {
	var act uint64
	place := func(v *value) {
		if v.placed {
			return
		}
		v.placed = true
		if v.lay.shape == nil {
			v.lay = convLayout(v.shape)
		}
		v.addr = actTag | act
		act = align(act+uint64(v.lay.bytes(v.elem)), 64)
	}
	for _, v := range c.inputs {
		if v.elem == 0 && v.typ == onnx.Float {
			v.elem = f32
		}
		if !v.hostOnly {
			place(v)
		}
	}
	for _, l := range c.layers {
		if !l.out.placed {
			l.out.elem = l.storeElem()
		}
		place(l.out)
	}
	return act
}

// checkTokens checks that the program keeps every FIFO within the
// hardware's depth on any timing, as the emitter's protocol should: a
// program that breaks it is the compiler's bug.
func checkTokens(insns []isa.Insn) error {
	bound, err := isa.TokenBound(insns)
	if err != nil {
		return fmt.Errorf("compiled program: %v", err)
	}
	for f, n := range bound {
		if n > isa.TokenDepth {
			return fmt.Errorf("compiled program may hold %d tokens in the %s FIFO, beyond the engine's %d", n, isa.Fifo(f), isa.TokenDepth)
		}
	}
	return nil
}

// actAddr is address a with the activation segment's base for actTag.
func (p *Program) actAddr(a uint64) uint64 {
	if a&actTag != 0 {
		return p.ActBase + a&^actTag
	}
	return a
}

// bind is where the runtime finds v: its constant values, or its storage.
func (p *Program) bind(v *value) Binding {
	r := v.root()
	b := Binding{Name: v.name, Shape: v.shape, Type: v.typ}
	if r.isConst {
		b.IsConst = true
		b.ConstF, b.ConstI = r.f, r.i
		if b.ConstF == nil && b.ConstI == nil {
			b.ConstF = []float32{}
		}
		return b
	}
	b.Addr = p.actAddr(r.addr)
	b.Elem = r.elem.String()
	b.Lay = r.lay.export()
	b.Bcast = r.bcast
	b.Shift = r.typ == onnx.Uint8 && r.elem == i8
	return b
}

// actTag marks an address in the activation segment until the segment's
// base is known.
const actTag = 1 << 62
