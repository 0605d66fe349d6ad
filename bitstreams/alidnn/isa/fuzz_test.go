package isa

import (
	"bytes"
	"testing"
)

// FuzzDecode: any 16 bytes either fail to decode or decode to an instruction
// whose encoding is exactly those bytes (the encoding is canonical), and
// whose text form assembles back to it.
func FuzzDecode(f *testing.F) {
	for _, i := range samples() {
		b, err := Encode(i)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:])
	}
	f.Add(make([]byte, 16))
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) != InsnBytes {
			if _, err := DecodeProgram(data); err == nil && len(data)%InsnBytes != 0 {
				t.Fatalf("DecodeProgram accepted %d bytes", len(data))
			}
			return
		}
		i, err := Decode([InsnBytes]byte(data))
		if err != nil {
			return
		}
		b, err := Encode(i)
		if err != nil {
			t.Fatalf("Encode(Decode(%x)) = %v", data, err)
		}
		if !bytes.Equal(b[:], data) {
			t.Fatalf("not canonical: %x decodes to %+v, encodes to %x", data, i, b)
		}
		p, err := Assemble(DisassembleInsn(i))
		if err != nil || len(p) != 1 || p[0] != i {
			t.Fatalf("asm(disasm(%+v)) = %+v, %v", i, p, err)
		}
	})
}

// FuzzAssemble: Assemble never panics, and whatever it accepts survives
// disassembly and re-assembly unchanged.
func FuzzAssemble(f *testing.F) {
	f.Add(example)
	f.Add(Disassemble(samples()))
	f.Add("nop.load ; push_next")
	f.Add("load.inp int8 sram=0 dram=0x0 y=1 x=1 stride=1 pad=0,0,0,1 padval=min")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Assemble(src)
		if err != nil {
			return
		}
		text := Disassemble(p)
		q, err := Assemble(text)
		if err != nil {
			t.Fatalf("re-assembling %q: %v", text, err)
		}
		if !equal(p, q) {
			t.Fatalf("round trip changed %q to %q", text, Disassemble(q))
		}
		if _, err := EncodeProgram(p); err != nil {
			t.Fatalf("assembled program does not encode: %v", err)
		}
	})
}
