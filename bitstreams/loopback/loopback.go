// Package loopback is the bring-up role: it copies a DDR range to another and
// computes the CRC-32 (IEEE) of what it read, then raises an interrupt. It is
// small enough to trust, so tests and the agent's self-test use it to prove
// that programming, MMIO, DMA, tenant windows and interrupts work end to end.
//
// Registers, at byte offsets from the role window (shell.RoleBase):
//
//	0x00 MAGIC    RO  0x4c4f4f50 ("LOOP")
//	0x04 CONTROL  WO  bit 0 COPY, bit 1 CRC (checksum only): start an operation
//	0x08 STATUS   RO  bit 0 busy, bit 1 done, bit 2 error; bits 15:8 error code
//	0x0c SRC      RW  source card address, low word (0x10 high word)
//	0x14 DST      RW  destination card address, low word (0x18 high word)
//	0x1c LEN      RW  length in bytes, low word (0x20 high word)
//	0x24 WINDOW   RW  tenant window index used for every DDR access
//	0x28 CRC      RO  CRC-32 (IEEE) of the source bytes of the last operation
//	0x2c TIME_NS  RO  modeled device time of the last operation, in ns
//
// An operation ends with role interrupt 0 (user IRQ line shell.IRQRole0).
// Error codes: 1 DDR access outside the tenant window, 2 region decoupled
// during the operation, 3 operation started while busy.
//
// This package is the role's contract (registers, bitstream); its functional
// model for the simulator is in the model subpackage.
package loopback

// Role identity.
const (
	Name    = "loopback"
	ID      = 0x4c4f4f50 // "LOOP"
	Version = 1<<16 | 0  // 1.0
)

// Register offsets from the role window.
const (
	RegMagic   = 0x00
	RegControl = 0x04
	RegStatus  = 0x08
	RegSrc     = 0x0c
	RegDst     = 0x14
	RegLen     = 0x1c
	RegWindow  = 0x24
	RegCRC     = 0x28
	RegTimeNS  = 0x2c
)

// CONTROL and STATUS bits.
const (
	Copy = 1 << 0
	CRC  = 1 << 1

	StatusBusy  = 1 << 0
	StatusDone  = 1 << 1
	StatusError = 1 << 2
)

// Error codes in STATUS bits 15:8.
const (
	ErrCodeWindow    = 1
	ErrCodeDecoupled = 2
	ErrCodeBusy      = 3
)

// Write is one register write, at an offset from the role window.
type Write struct {
	Off, Value uint32
}

// Start returns the register writes that start operation op (Copy or CRC)
// over n bytes from src to dst through tenant window win, in the order the
// role needs them: operands first, CONTROL last.
func Start(op uint32, src, dst, n uint64, win int) []Write {
	return []Write{
		{RegSrc, uint32(src)}, {RegSrc + 4, uint32(src >> 32)},
		{RegDst, uint32(dst)}, {RegDst + 4, uint32(dst >> 32)},
		{RegLen, uint32(n)}, {RegLen + 4, uint32(n >> 32)},
		{RegWindow, uint32(win)}, {RegControl, op},
	}
}
