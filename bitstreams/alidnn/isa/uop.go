package isa

import "fmt"

// Micro-ops are 32-bit little-endian words in the uop SRAM, loaded by
// LOAD.uop and run by GEMM and ALU loops (see ISA.md).
const (
	uopAccBits = 11 // GEMM acc index, ALU dst index: bits 10:0
	uopInpBits = 11 // GEMM inp index, ALU src index: bits 21:11
	uopWgtBits = 10 // GEMM wgt index: bits 31:22
)

// GemmUop is a GEMM micro-op: base indices into acc, inp and wgt.
type GemmUop struct{ Acc, Inp, Wgt uint32 }

// AluUop is an ALU micro-op: base indices of the destination (acc) and the
// source (acc, or param for requant/quantize/dequantize).
type AluUop struct{ Dst, Src uint32 }

func checkUop(name string, v uint32, width int) error {
	if v>>width != 0 {
		return fmt.Errorf("isa: uop: %s=%d: does not fit in %d bits", name, v, width)
	}
	return nil
}

// Encode packs a GEMM micro-op.
func (u GemmUop) Encode() (uint32, error) {
	for _, f := range []struct {
		name  string
		v     uint32
		width int
	}{{"acc", u.Acc, uopAccBits}, {"inp", u.Inp, uopInpBits}, {"wgt", u.Wgt, uopWgtBits}} {
		if err := checkUop(f.name, f.v, f.width); err != nil {
			return 0, err
		}
	}
	return u.Acc | u.Inp<<uopAccBits | u.Wgt<<(uopAccBits+uopInpBits), nil
}

// DecodeGemmUop unpacks a GEMM micro-op; every 32-bit word is valid.
func DecodeGemmUop(w uint32) GemmUop {
	return GemmUop{
		Acc: w & (1<<uopAccBits - 1),
		Inp: w >> uopAccBits & (1<<uopInpBits - 1),
		Wgt: w >> (uopAccBits + uopInpBits),
	}
}

// Encode packs an ALU micro-op.
func (u AluUop) Encode() (uint32, error) {
	if err := checkUop("dst", u.Dst, uopAccBits); err != nil {
		return 0, err
	}
	if err := checkUop("src", u.Src, uopInpBits); err != nil {
		return 0, err
	}
	return u.Dst | u.Src<<uopAccBits, nil
}

// DecodeAluUop unpacks an ALU micro-op; bits 31:22 are reserved and must be
// zero.
func DecodeAluUop(w uint32) (AluUop, error) {
	if w>>(uopAccBits+uopInpBits) != 0 {
		return AluUop{}, fmt.Errorf("isa: uop: reserved bits 31:22 set in %#08x", w)
	}
	return AluUop{Dst: w & (1<<uopAccBits - 1), Src: w >> uopAccBits}, nil
}
