package bitfile

import "encoding/binary"

// castagnoli is the CRC-32C polynomial, bit-reflected.
const castagnoli = 0x82F63B78

// crcWord returns the running CRC after data is written to register r: the
// 37-bit value r<<32 | data shifted in least significant bit first. This is
// the reference the table-driven code is tested against.
func crcWord(crc uint32, r register, data uint32) uint32 {
	v := uint64(r&0x1f)<<32 | uint64(data)
	for range 37 {
		if (crc^uint32(v))&1 != 0 {
			crc = crc>>1 ^ castagnoli
		} else {
			crc >>= 1
		}
		v >>= 1
	}
	return crc
}

// nextCRC returns the running CRC after the configuration engine sees data
// written to r, for every register but CRC, whose writes check the CRC
// instead of extending it.
func nextCRC(crc uint32, r register, data uint32) uint32 {
	switch {
	case r == regLOUT:
		return crc
	case r == regCMD && Command(data) == CmdRCRC:
		return 0
	}
	return crcWord(crc, r, data)
}

// Frame data is most of a bitstream, so its CRC is table-driven. The CRC is
// linear: shifting in 32 data bits d and then the 5 address bits a turns the
// state c into T37(c^d) ^ T5(a), where Tn shifts n zero bits through the
// register. Four words at a time,
//
//	c' = T148(c^d0) ^ T111(d1) ^ T74(d2) ^ T37(d3) ^ k4
//
// with k4 the contribution of the four FDRI addresses. Each Tn of a 32-bit
// value is the XOR of four byte-table lookups, and only the first term depends
// on c, so the lookups of a block proceed in parallel.
var (
	// fdriTables[i][j][b] is T37·(i+1) of byte b at byte position j.
	fdriTables [4][4][256]uint32
	// fdriK1 and fdriK4 are what the FDRI address adds to one and to four
	// words.
	fdriK1, fdriK4 uint32
)

func init() {
	shift37 := func(c uint32) uint32 { return crcWord(c, 0, 0) }
	for i := range fdriTables {
		for j := range fdriTables[i] {
			t := &fdriTables[i][j]
			// Tn is linear: fill in the single bits, then XOR them
			// together for the other bytes.
			for bit := range 8 {
				c := uint32(1) << (8*j + bit)
				for range i + 1 {
					c = shift37(c)
				}
				t[1<<bit] = c
			}
			for b := 3; b < 256; b++ {
				if low := b & -b; low != b {
					t[b] = t[low] ^ t[b^low]
				}
			}
		}
	}
	fdriK1 = crcWord(0, regFDRI, 0) // T5(FDRI): the 37 shifts of T37(0) add nothing
	for range 4 {
		fdriK4 = shift37(fdriK4) ^ fdriK1
	}
}

func lookup(t *[4][256]uint32, x uint32) uint32 {
	return t[0][x&0xff] ^ t[1][x>>8&0xff] ^ t[2][x>>16&0xff] ^ t[3][x>>24]
}

// crcFDRI returns the running CRC after the big-endian words of b, whose
// length is a multiple of 4, are written to FDRI.
func crcFDRI(crc uint32, b []byte) uint32 {
	for len(b) >= 16 {
		d0 := binary.BigEndian.Uint32(b)
		d1 := binary.BigEndian.Uint32(b[4:])
		d2 := binary.BigEndian.Uint32(b[8:])
		d3 := binary.BigEndian.Uint32(b[12:])
		crc = lookup(&fdriTables[3], crc^d0) ^ lookup(&fdriTables[2], d1) ^
			lookup(&fdriTables[1], d2) ^ lookup(&fdriTables[0], d3) ^ fdriK4
		b = b[16:]
	}
	for len(b) >= 4 {
		crc = lookup(&fdriTables[0], crc^binary.BigEndian.Uint32(b)) ^ fdriK1
		b = b[4:]
	}
	return crc
}
