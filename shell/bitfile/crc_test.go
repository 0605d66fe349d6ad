package bitfile

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The vectors of Project X-Ray's icap_crc test (lib/xilinx/tests/xc7series/crc_test.cc).
func TestCRCWordPrjxrayVectors(t *testing.T) {
	for _, tc := range []struct {
		crc  uint32
		reg  register
		data uint32
		want uint32
	}{
		{0, 0, 0, 0},
		{0, 1 << 4, 0, 0x82F63B78},        // one bit: the polynomial
		{0, 0x1f, 0xFFFFFFFF, 0xBF86D4DF}, // all address and data bits
		{0xFFFFFFFF, 0, 0, 0xC631E365},    // all CRC bits
	} {
		if got := crcWord(tc.crc, tc.reg, tc.data); got != tc.want {
			t.Errorf("crcWord(%#x, %#x, %#x) = %#08x, want %#08x", tc.crc, tc.reg, tc.data, got, tc.want)
		}
	}
}

// The 32 data bits of a word are plain CRC-32C, least significant byte
// first: the 37-bit rule only appends the address.
func TestCRCWordIsCastagnoli(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		crc, data := rng.Uint32(), rng.Uint32()
		var le [4]byte
		binary.LittleEndian.PutUint32(le[:], data)
		// hash/crc32 inverts the register before and after.
		want := ^crc32.Update(^crc, tab, le[:])
		// Five address bits of zero after the data: undo them by
		// comparing with the data shifted through 32 bits only.
		got := crcWord(crc, 0, data)
		if shift5(want) != got {
			t.Fatalf("crc %#x data %#x: crcWord %#x, CRC-32C then 5 zero bits %#x", crc, data, got, shift5(want))
		}
	}
}

func shift5(c uint32) uint32 {
	for range 5 {
		if c&1 != 0 {
			c = c>>1 ^ castagnoli
		} else {
			c >>= 1
		}
	}
	return c
}

func TestCRCFDRIMatchesWordByWord(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for words := range 70 {
		b := make([]byte, 4*words)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		start := rng.Uint32()
		want := start
		for i := 0; i < len(b); i += 4 {
			want = crcWord(want, regFDRI, binary.BigEndian.Uint32(b[i:]))
		}
		if got := crcFDRI(start, b); got != want {
			t.Errorf("%d words: crcFDRI %#08x, word by word %#08x", words, got, want)
		}
	}
}

func TestNextCRC(t *testing.T) {
	if got := nextCRC(0x1234, regLOUT, 0xdead); got != 0x1234 {
		t.Errorf("LOUT write changed the CRC to %#x", got)
	}
	if got := nextCRC(0x1234, regCMD, uint32(CmdRCRC)); got != 0 {
		t.Errorf("RCRC left the CRC at %#x", got)
	}
	if got, want := nextCRC(0x1234, regCMD, uint32(CmdWCFG)), crcWord(0x1234, regCMD, 1); got != want {
		t.Errorf("CMD WCFG: CRC %#x, want %#x", got, want)
	}
}

func BenchmarkCRCFDRI(b *testing.B) {
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	var crc uint32
	for b.Loop() {
		crc = crcFDRI(crc, buf)
	}
}
