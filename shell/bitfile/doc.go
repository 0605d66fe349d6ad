// Package bitfile reads and writes Xilinx .bit files as the shell's
// partial-reconfiguration (PR) controller consumes them: a header naming the
// design and the part, then configuration data for the chip's configuration
// engine.
//
// The PR controller receives a .bit file as a byte stream that arrives in DMA
// chunks of any size, so the central piece is [Parser], a push parser: feed it
// with Write, whatever the chunking, and Close it at the end of the stream to
// learn whether the file was complete and valid. [ReadHeader] reads just the
// header from an io.Reader; [Build] and [Encode] write partial bitstreams for
// tests and for the hdk.
//
// # Header
//
// Xilinx never documented the header; every tool reads it the same way:
//
//	00 09  0f f0 0f f0 0f f0 0f f0 00  00 01    13-byte preamble
//	'a' u16 string NUL    design name and ;key=value options
//	'b' u16 string NUL    part name, e.g. xcvu9p-flgb2104-2-i or 7a35tcpg236
//	'c' u16 string NUL    date, e.g. 2024/01/31
//	'd' u16 string NUL    time, e.g. 12:34:56
//	'e' u32               length of the configuration data that follows
//
// Lengths are big-endian and count the NUL. Fields come in exactly this order;
// any other key is an error.
//
// # Configuration data
//
// The configuration data is 7-series/UltraScale configuration-port traffic:
// dummy words and the bus-width pattern, then the sync word 0xAA995566, then
// 32-bit big-endian packets. A type 1 packet (bits 31:29 = 001) holds an
// opcode (28:27: 00 NOOP, 01 read, 10 write), a register address (17:13; bits
// 26:18 and 12:11 are zero) and a word count (10:0). A type 2 packet (bits
// 31:29 = 010) writes a 27-bit count of words (26:0) to the register of the
// last type 1 write; Vivado uses it for frame data (FDRI) too long for a type 1
// packet.
//
// # CRC
//
// The configuration engine keeps a running CRC: CRC-32C (Castagnoli,
// reflected polynomial 0x82F63B78, no inversion) over every word written to a
// register, each word extended to 37 bits with the 5-bit register address
// (address<<32 | data) and shifted in least significant bit first, as Project
// X-Ray's icap_crc computes it (its test vectors are this package's). Writes
// to LOUT are left out; the RCRC command clears the CRC to 0. A write to CRC
// is not added: it compares the written value with the running CRC, a
// mismatch being [ErrCRC], and then clears the CRC, so that each check covers
// the writes since the previous check or RCRC. This is the rule of this
// simulator's configuration engine; see the notes below for what is
// confirmed of real chips.
//
// # What the parser accepts
//
// The parser is stricter than a chip: it accepts what the shell's PR port
// should load and nothing else. Before the sync word it skips anything, as a
// chip does, but for 1 KiB at most. After it, it accepts NOOPs (exactly
// 0x20000000) and writes to the registers of the 7-series/UltraScale register
// map except the read-only FDRO, STAT and BOOTSTS; it refuses reads (the PR
// port has no readback path), the reserved opcode, other packet types,
// unknown commands, a second IDCODE that differs from the first, and
// anything but NOOPs after DESYNC. Close succeeds only when the stream held
// exactly the declared number of data bytes, passed at least one CRC check,
// had every frame word (FDRI) covered by a passing check before any RCRC and
// before DESYNC, and ended with DESYNC and nothing but NOOPs after it.
//
// # Notes on the real format
//
// The header layout, the packet format, the register and command numbers
// and the CRC-32C over 37-bit address+data words agree with Project X-Ray's
// sources and tests. Not confirmed: whether a
// passing CRC check clears the CRC on a chip (an open-source UltraScale+
// reader does so; Project X-Ray notes that replacing a CRC write with RCRC is
// harmless, which agrees) and whether LOUT writes are left out of it. Not
// modelled: multi-SLR (SSI) bitstreams, encrypted bitstreams (AES-GCM
// replaces the CRC), compressed bitstreams, and 8- and 16-bit bus widths.
package bitfile
