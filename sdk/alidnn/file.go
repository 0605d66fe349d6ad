package alidnn

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// A compiled program file is:
//
//	magic      8 bytes  "ADNNPRG1"
//	header     4 bytes  little-endian length H, then H bytes of JSON (fileHeader)
//	constants  fileHeader.ConstBytes bytes
//	insns      fileHeader.Insns × 16 bytes, encoded instructions
//
// The header records the SHA-256 of the constants and the instructions, so
// a damaged or truncated file is refused rather than run.
const magic = "ADNNPRG1"

// Limits on program files, which are outside input.
const (
	maxHeader = 16 << 20
	maxConsts = 4 << 30
)

// ErrProgram is wrapped by every error about a malformed program file.
var ErrProgram = errors.New("malformed program file")

type fileHeader struct {
	Name        string
	ConstBytes  uint64
	ConstSHA256 string
	Insns       int
	InsnSHA256  string
	ActBase     uint64
	ActSize     uint64
	Layers      int
	MACs        uint64
	Batch       int `json:",omitempty"`
	Inputs      []Binding
	Outputs     []Binding
	Derived     []Binding `json:",omitempty"`
	Strings     [][]byte  `json:",omitempty"`
}

// WriteTo writes the program in its file form.
func (p *Program) WriteTo(w io.Writer) (int64, error) {
	insns, err := isa.EncodeProgram(p.Insns)
	if err != nil {
		return 0, err
	}
	cs, is := sha256.Sum256(p.Consts), sha256.Sum256(insns)
	h, err := json.Marshal(fileHeader{Name: p.Name, ConstBytes: uint64(len(p.Consts)), ConstSHA256: hex.EncodeToString(cs[:]),
		Insns: len(p.Insns), InsnSHA256: hex.EncodeToString(is[:]), ActBase: p.ActBase, ActSize: p.ActSize,
		Layers: p.Layers, MACs: p.MACs, Batch: p.Batch, Inputs: p.Inputs, Outputs: p.Outputs, Derived: p.Derived, Strings: p.Strings})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, b := range [][]byte{[]byte(magic), binary.LittleEndian.AppendUint32(nil, uint32(len(h))), h, p.Consts, insns} {
		k, err := w.Write(b)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteFile writes the program to path atomically (a temporary file renamed
// into place).
func (p *Program) WriteFile(path string) error {
	return atomicfile.WriteWith(path, 0o600, func(w io.Writer) error {
		_, err := p.WriteTo(w)
		return err
	})
}

// ReadFile reads a program file.
func ReadFile(path string) (*Program, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ReadProgram(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProgram, fmt.Sprintf(format, args...))
}

// ReadProgram decodes a program file, checking its digests and that every
// binding lies inside the program's memory.
func ReadProgram(r io.Reader) (*Program, error) {
	var pre [12]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, bad("header: %v", err)
	}
	if string(pre[:8]) != magic {
		return nil, bad("magic %q, want %q", pre[:8], magic)
	}
	hl := binary.LittleEndian.Uint32(pre[8:])
	if hl > maxHeader {
		return nil, bad("header of %d bytes exceeds %d", hl, maxHeader)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, bad("header (%d bytes): %v", hl, err)
	}
	var h fileHeader
	dec := json.NewDecoder(bytes.NewReader(hb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, bad("header: %v", err)
	}
	if h.ConstBytes > maxConsts || h.Insns < 0 || h.Insns > 1<<24 {
		return nil, bad("%d constant bytes and %d instructions exceed the limits", h.ConstBytes, h.Insns)
	}
	consts, err := readN(r, h.ConstBytes)
	if err != nil {
		return nil, bad("constants: %v", err)
	}
	if s := sha256.Sum256(consts); hex.EncodeToString(s[:]) != h.ConstSHA256 {
		return nil, bad("constants: SHA-256 mismatch")
	}
	ib, err := readN(r, uint64(h.Insns)*isa.InsnBytes)
	if err != nil {
		return nil, bad("instructions: %v", err)
	}
	if s := sha256.Sum256(ib); hex.EncodeToString(s[:]) != h.InsnSHA256 {
		return nil, bad("instructions: SHA-256 mismatch")
	}
	insns, err := isa.DecodeProgram(ib)
	if err != nil {
		return nil, bad("instructions: %v", err)
	}
	// A stream that can deadlock or overflow a token FIFO would only fail
	// on the engine; refuse it here, naming why.
	bound, err := isa.TokenBound(insns)
	if err != nil {
		return nil, bad("instructions: %v", err)
	}
	for f, n := range bound {
		if n > isa.TokenDepth {
			return nil, bad("instructions may hold %d tokens in the %s FIFO, beyond the engine's %d", n, isa.Fifo(f), isa.TokenDepth)
		}
	}
	p := &Program{Insns: insns, Consts: consts, ActBase: h.ActBase, ActSize: h.ActSize, Inputs: h.Inputs, Outputs: h.Outputs, Derived: h.Derived, Strings: h.Strings,
		Layers: h.Layers, MACs: h.MACs, Name: h.Name, Batch: h.Batch}
	if h.Batch < 0 || h.Batch > maxBatch {
		return nil, bad("batch %d outside 0..%d", h.Batch, maxBatch)
	}
	if h.ActBase < uint64(len(consts)) || h.ActSize > 1<<35 || h.ActBase > 1<<35 {
		return nil, bad("activation segment [%d, +%d) overlaps the constants or exceeds 32 GiB", h.ActBase, h.ActSize)
	}
	mem := p.MemSize()
	for _, i := range insns {
		if (i.Op == isa.OpLoad || i.Op == isa.OpStore) && i.DRAM >= mem {
			return nil, bad("instruction reads or writes address %#x beyond the program's %d bytes", i.DRAM, mem)
		}
	}
	for k := range p.Inputs {
		if p.Inputs[k].Gather != nil || p.Inputs[k].Word != nil {
			return nil, bad("input %d: a derived tensor's rule on a graph input", k)
		}
		if err := checkBinding(&p.Inputs[k], p, 0); err != nil {
			return nil, bad("input %d: %v", k, err)
		}
	}
	for k := range p.Outputs {
		if err := checkBinding(&p.Outputs[k], p, 0); err != nil {
			return nil, bad("output %d: %v", k, err)
		}
	}
	for k := range p.Derived {
		if err := checkDerived(&p.Derived[k], p); err != nil {
			return nil, bad("derived tensor %d: %v", k, err)
		}
	}
	if err := checkFileStrings(p); err != nil {
		return nil, bad("%v", err)
	}
	return p, nil
}

func readN(r io.Reader, n uint64) ([]byte, error) {
	var buf bytes.Buffer
	k, err := io.CopyN(&buf, r, int64(n))
	if err != nil {
		return nil, fmt.Errorf("%d of %d bytes: %v", k, n, err)
	}
	return buf.Bytes(), nil
}

// checkBinding validates a binding read from a file: a sane shape and
// layout, and device data inside the activation segment.
func checkBinding(b *Binding, p *Program, depth int) error {
	if depth > 2 {
		return fmt.Errorf("host operators nest too deep")
	}
	if b.HostOnly {
		if _, err := checkShape(b.Shape); err != nil || b.Type != onnx.Float && b.Type != onnx.Double && b.Type != onnx.Uint64 {
			return fmt.Errorf("host-only input %v %v", b.Type, b.Shape)
		}
		return nil
	}
	if b.IsConst {
		total, err := checkConstShape(b.Shape)
		if err != nil {
			return err
		}
		if len(b.ConstF)+len(b.ConstI) != total {
			return fmt.Errorf("constant of %d values for shape %v", len(b.ConstF)+len(b.ConstI), b.Shape)
		}
		return nil
	}
	total, err := checkShape(b.Shape)
	if err != nil {
		return err
	}
	if b.Host != "" {
		return checkHostBinding(b, p, depth)
	}
	return checkDeviceData(b, p, total)
}

// checkHostBinding validates an output the host computes from other
// bindings (Host): the operator, its parameters and its sources.
func checkHostBinding(b *Binding, p *Program, depth int) error {
	switch b.Host {
	case wordsOp:
		if err := checkWords(b); err != nil {
			return err
		}
		if err := checkBinding(b.Src, p, depth+1); err != nil {
			return err
		}
		return checkBinding(b.High, p, depth+1)
	case castOp:
		if b.Src == nil || !b.Src.HostOnly || b.Src.Type != onnx.Double || !narrowFloat(b.Type) || b.Quant != nil || !eqInts(b.Src.Shape, b.Shape) {
			return fmt.Errorf("host Cast to %v of no DOUBLE input of shape %v", b.Type, b.Shape)
		}
		return checkBinding(b.Src, p, depth+1)
	}
	if b.Src == nil || (b.Host != "Softmax" && b.Host != "Softmax-1" && b.Host != quantizeOp) || b.Axis < 0 || b.Axis >= max(len(b.Shape), 1) {
		return fmt.Errorf("host operator %q on axis %d", b.Host, b.Axis)
	}
	if (b.Host == quantizeOp) != (b.Quant != nil) {
		return fmt.Errorf("host operator %q with QuantizeLinear parameters %v", b.Host, b.Quant != nil)
	}
	if b.Quant != nil {
		if err := b.Quant.check(b.Type, b.Shape); err != nil {
			return err
		}
	}
	if !eqInts(b.Src.Shape, b.Shape) {
		return fmt.Errorf("host operator changes the shape %v to %v", b.Src.Shape, b.Shape)
	}
	return checkBinding(b.Src, p, depth+1)
}

// checkDeviceData validates a device tensor's binding of total elements:
// its layout's axes cover its shape, and its data lies inside the
// activation segment.
func checkDeviceData(b *Binding, p *Program, total int) error {
	el, err := elemOf(b.Elem)
	if err != nil {
		return err
	}
	l := b.Lay.internal()
	if _, err := checkShape(l.shape); err != nil {
		return err
	}
	if !eqInts(l.shape, b.Shape) {
		if b.Bcast == nil {
			// reshaped outputs keep their storage's layout
			if n, _ := checkShape(l.shape); n != total {
				return fmt.Errorf("layout of %v for shape %v", l.shape, b.Shape)
			}
		}
	}
	seen := map[int]bool{}
	axes := append(append([]int(nil), l.outer...), l.rows...)
	if l.lane >= 0 {
		axes = append(axes, l.lane)
	}
	for _, a := range axes {
		if a < 0 || a >= len(l.shape) || seen[a] {
			return fmt.Errorf("layout axes %v for rank %d", axes, len(l.shape))
		}
		seen[a] = true
	}
	if len(seen) != len(l.shape) {
		return fmt.Errorf("layout axes %v do not cover rank %d", axes, len(l.shape))
	}
	if b.Bcast != nil {
		if _, err := broadcastShape(l.shape, b.Bcast); err != nil || len(b.Bcast) > len(l.shape) {
			return fmt.Errorf("broadcast of %v to %v", b.Bcast, l.shape)
		}
	}
	end := b.Addr + uint64(l.bytes(el))
	if b.Addr < p.ActBase || end > p.ActBase+p.ActSize || end < b.Addr {
		return fmt.Errorf("data [%#x, %#x) outside the activation segment", b.Addr, end)
	}
	return nil
}

func checkShape(s []int) (int, error) {
	if len(s) > 8 {
		return 0, fmt.Errorf("rank %d", len(s))
	}
	n := 1
	for _, d := range s {
		if d < 1 || d > 1<<30 {
			return 0, fmt.Errorf("dimension %d in %v", d, s)
		}
		n *= d
		if n > 1<<30 {
			return 0, fmt.Errorf("shape %v too large", s)
		}
	}
	return n, nil
}
