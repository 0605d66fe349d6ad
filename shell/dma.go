package shell

// DMA channels and the card address map seen by them.
//
// Each chip's XDMA engine has DMAChannels host-to-card (H2C) and card-to-host
// (C2H) channels in AXI memory-mapped mode. A channel addresses the chip's
// card address space: DDR from 0 to the DDR size, and the PR stream port.
const (
	DMAChannels = 2

	// PRStreamAddr is the card address of the PR controller's stream port, a
	// write-only FIFO outside DDR: every H2C write to exactly this address
	// appends its bytes to the bitstream being configured.
	PRStreamAddr = 0x1000_0000_0000
	// PRRegions is the number of reconfigurable regions per chip.
	PRRegions = 1

	// DMAAlign is the card address alignment and length granularity of the
	// shell's DMA engines, as reported by the engines' alignment registers.
	DMAAlign = 4
	// DMAAddressBits is the width of card addresses the engines generate.
	DMAAddressBits = 64
)

// XDMA IP register layout in the control BAR (/dev/xdmaN_control), after
// Xilinx PG195. Only the registers the agent reads are listed.
const (
	XDMAH2CChannel    = 0x0000 // channel n at XDMAH2CChannel + n*XDMAChannelStride
	XDMAC2HChannel    = 0x1000
	XDMAChannelStride = 0x100

	XDMAIdentifier = 0x00 // within a channel block
	XDMAStatus     = 0x40
	XDMAAlignments = 0x4c

	// XDMA identifier values: bits 31:20 0x1fc, 19:16 target (0 H2C, 1 C2H),
	// bit 15 stream (0 memory mapped), 11:8 channel, 7:0 version.
	XDMAIDH2C = 0x1fc00006
	XDMAIDC2H = 0x1fc10006
)

// XDMAAlignment packs the value of an engine's alignment register:
// address alignment in bits 23:16, length granularity 15:8, address bits 7:0.
func XDMAAlignment(addrAlign, lenGranularity, addrBits uint32) uint32 {
	return addrAlign<<16 | lenGranularity<<8 | addrBits
}

// ParseXDMAAlignment unpacks an engine's alignment register.
func ParseXDMAAlignment(v uint32) (addrAlign, lenGranularity, addrBits uint32) {
	return v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff
}
