package sessions

import (
	"context"
	"unsafe"

	"github.com/fpga-faas/faas/shell"
)

// The shell's DMA engines move whole words: card address, length and host
// buffer must be multiples of shell.DMAAlign (device.Chip refuses others).
// Buffers start on 64-byte boundaries and their sizes are multiples of 64,
// so a misaligned transfer is widened to whole words inside the same buffer
// and goes through an aligned bounce buffer.

const dmaAlign = shell.DMAAlign

func alignedTransfer(addr uint64, p []byte) bool {
	return addr%dmaAlign == 0 && len(p)%dmaAlign == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%dmaAlign == 0
}

// bounce returns n bytes at a dmaAlign-aligned host address.
func bounce(n uint64) []byte {
	w := make([]uint32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// write copies p to card address addr, read-modify-writing the partial
// words at either end.
func (e *Engine) write(ctx context.Context, addr uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if alignedTransfer(addr, p) {
		return e.chip.Write(ctx, addr, p)
	}
	lo, hi := addr&^(dmaAlign-1), roundUp(addr+uint64(len(p)), dmaAlign)
	tmp := bounce(hi - lo)
	if lo != addr || hi != addr+uint64(len(p)) {
		if err := e.chip.Read(ctx, lo, tmp); err != nil {
			return err
		}
	}
	copy(tmp[addr-lo:], p)
	return e.chip.Write(ctx, lo, tmp)
}

// read copies card address addr into p.
func (e *Engine) read(ctx context.Context, addr uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if alignedTransfer(addr, p) {
		return e.chip.Read(ctx, addr, p)
	}
	lo, hi := addr&^(dmaAlign-1), roundUp(addr+uint64(len(p)), dmaAlign)
	tmp := bounce(hi - lo)
	if err := e.chip.Read(ctx, lo, tmp); err != nil {
		return err
	}
	copy(p, tmp[addr-lo:])
	return nil
}
