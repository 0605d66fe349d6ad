package device

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/fpga-faas/faas/shell"
)

// Chip is one FPGA of a board running a FaaS shell: register access,
// DMA over its DDR, interrupts, partial reconfiguration and sensors. It is
// safe for concurrent use as far as the underlying port is.
type Chip struct {
	port   Port
	index  int
	part   shell.Part
	serial string
	ddr    uint64
	// shellVersion is VERSION: major in bits 31:16, minor in 15:0.
	shellVersion uint32
	iface        [16]byte // INTERFACE_ID
	align        uint64   // DMA address alignment and length granularity
	// powerCycles is POWER_CYCLES when the chip was opened; a change means
	// the chip lost power underneath us.
	powerCycles uint32
}

// OpenChip checks that port leads to a compatible FaaS shell and reads the
// chip's identity.
func OpenChip(port Port) (*Chip, error) {
	c := &Chip{port: port}
	magic, err := c.Read32(shell.RegMagic)
	if err != nil {
		return nil, err
	}
	version, err := c.Read32(shell.RegVersion)
	if err != nil {
		return nil, err
	}
	if magic != shell.Magic || version>>16 != shell.VersionMajor {
		return nil, fmt.Errorf("%w: magic %#08x, version %d.%d (want %#08x, %d.x)",
			ErrNotShell, magic, version>>16, version&0xffff, shell.Magic, shell.VersionMajor)
	}
	c.shellVersion = version
	ids, err := c.readWords(shell.RegInterfaceID, shell.RegInterfaceID+4, shell.RegInterfaceID+8, shell.RegInterfaceID+12)
	if err != nil {
		return nil, err
	}
	for i, w := range ids {
		binary.LittleEndian.PutUint32(c.iface[4*i:], w)
	}
	regs, err := c.readWords(shell.RegChipIndex, shell.RegPartID, shell.RegPowerCycles, shell.RegDDRSize, shell.RegDDRSize+4)
	if err != nil {
		return nil, err
	}
	c.index, c.powerCycles = int(regs[0]), regs[2]
	c.ddr = uint64(regs[3]) | uint64(regs[4])<<32
	if c.index >= shell.ChipsPerBoard {
		return nil, fmt.Errorf("%w: chip index %d", ErrNotShell, c.index)
	}
	for _, p := range []shell.Part{shell.PartVU9P, shell.PartKU15P} {
		if p.IDCode == regs[1] {
			c.part = p
		}
	}
	if c.part.Name == "" {
		return nil, fmt.Errorf("%w: unknown part IDCODE %#08x", ErrNotShell, regs[1])
	}
	serial, err := c.readString(shell.RegBoardSerial, 16)
	if err != nil {
		return nil, err
	}
	c.serial = serial
	// Each engine reports its own alignment (0 meaning none); we use the
	// strictest of channel 0 in both directions for every transfer.
	c.align = 1
	for _, base := range []uint32{shell.XDMAH2CChannel, shell.XDMAC2HChannel} {
		av, err := port.ReadControl(base + shell.XDMAAlignments)
		if err != nil {
			return nil, FromErrno(err)
		}
		addrAlign, lenGran, _ := shell.ParseXDMAAlignment(av)
		c.align = max(c.align, uint64(addrAlign), uint64(lenGran))
	}
	return c, nil
}

// Index is the chip's position on its board.
func (c *Chip) Index() int { return c.index }

// Part is the chip's FPGA part.
func (c *Chip) Part() shell.Part { return c.part }

// Serial is the serial number of the chip's board.
func (c *Chip) Serial() string { return c.serial }

// DDRSize is the size of the chip's DDR in bytes.
func (c *Chip) DDRSize() uint64 { return c.ddr }

// Close releases the chip's device files.
func (c *Chip) Close() error { return c.port.Close() }

// Read32 reads the user-BAR register at off.
func (c *Chip) Read32(off uint32) (uint32, error) {
	if err := c.checkMMIO(off); err != nil {
		return 0, err
	}
	v, err := c.port.ReadUser(off)
	if err != nil {
		return 0, FromErrno(err)
	}
	return v, nil
}

// Write32 writes the user-BAR register at off.
func (c *Chip) Write32(off uint32, v uint32) error {
	if err := c.checkMMIO(off); err != nil {
		return err
	}
	return FromErrno(c.port.WriteUser(off, v))
}

func (c *Chip) checkMMIO(off uint32) error {
	if off%4 != 0 {
		return fmt.Errorf("%w: chip %d: MMIO offset %#x is not 32-bit aligned", ErrMisaligned, c.index, off)
	}
	if off >= shell.UserBARSize {
		return fmt.Errorf("%w: chip %d: MMIO offset %#x beyond the %d-byte user BAR", ErrOutOfRange, c.index, off, shell.UserBARSize)
	}
	return nil
}

// RoleRead32 and RoleWrite32 access the loaded role's registers at off
// within the role window.
func (c *Chip) RoleRead32(off uint32) (uint32, error) {
	if off >= shell.RoleSize {
		return 0, fmt.Errorf("%w: chip %d: role register %#x beyond the role window", ErrOutOfRange, c.index, off)
	}
	return c.Read32(shell.RoleBase + off)
}

// RoleWrite32 writes the role register at off within the role window.
func (c *Chip) RoleWrite32(off uint32, v uint32) error {
	if off >= shell.RoleSize {
		return fmt.Errorf("%w: chip %d: role register %#x beyond the role window", ErrOutOfRange, c.index, off)
	}
	return c.Write32(shell.RoleBase+off, v)
}

// RoleReadBlock reads len(dst) consecutive role registers from off. A
// port with the BlockReader capability reads them in one access; others
// one register at a time.
func (c *Chip) RoleReadBlock(off uint32, dst []uint32) error {
	n := uint64(len(dst)) * 4
	if off%4 != 0 || uint64(off)+n > shell.RoleSize {
		return fmt.Errorf("%w: chip %d: %d role registers at %#x beyond the role window", ErrOutOfRange, c.index, len(dst), off)
	}
	if br, ok := c.port.(BlockReader); ok {
		return FromErrno(br.ReadUserBlock(shell.RoleBase+off, dst))
	}
	for i := range dst {
		v, err := c.Read32(shell.RoleBase + off + uint32(4*i))
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}

// ShellVersion is the chip's shell version, major in bits 31:16 and minor
// in bits 15:0.
func (c *Chip) ShellVersion() uint32 { return c.shellVersion }

// InterfaceUUID is the PR interface UUID roles must be built against.
func (c *Chip) InterfaceUUID() [16]byte { return c.iface }

func (c *Chip) readWords(offs ...uint32) ([]uint32, error) {
	out := make([]uint32, len(offs))
	for i, off := range offs {
		v, err := c.Read32(off)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (c *Chip) readBytes(off uint32, n int) ([]byte, error) {
	b := make([]byte, n)
	for i := 0; i < n; i += 4 {
		v, err := c.Read32(off + uint32(i))
		if err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint32(b[i:], v)
	}
	return b, nil
}

func (c *Chip) readString(off uint32, n int) (string, error) {
	b, err := c.readBytes(off, n)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\x00")
	return s, nil
}

// Write copies p to card address addr of the chip's DDR.
func (c *Chip) Write(ctx context.Context, addr uint64, p []byte) error {
	if err := c.checkDMA(addr, p); err != nil {
		return err
	}
	if err := c.port.H2C(ctx, 0, p, addr); err != nil {
		return fmt.Errorf("chip %d: DMA write of %d bytes at %#x: %w", c.index, len(p), addr, FromErrno(err))
	}
	return nil
}

// Read copies card address addr of the chip's DDR into p.
func (c *Chip) Read(ctx context.Context, addr uint64, p []byte) error {
	if err := c.checkDMA(addr, p); err != nil {
		return err
	}
	if err := c.port.C2H(ctx, 0, p, addr); err != nil {
		return fmt.Errorf("chip %d: DMA read of %d bytes at %#x: %w", c.index, len(p), addr, FromErrno(err))
	}
	return nil
}

// checkDMA applies the engine's rules before a transfer. The XDMA driver
// wants the host buffer and the card address to agree modulo the engine's
// address alignment (EINVAL otherwise); the shell's engines also move whole
// words, so lengths are multiples of the granularity too.
func (c *Chip) checkDMA(addr uint64, p []byte) error {
	n := len(p)
	if addr%c.align != 0 || uint64(n)%c.align != 0 {
		return fmt.Errorf("%w: chip %d: DMA of %d bytes at %#x: address and length must be multiples of %d",
			ErrMisaligned, c.index, n, addr, c.align)
	}
	if n > 0 && uint64(uintptr(unsafe.Pointer(&p[0])))%c.align != 0 {
		return fmt.Errorf("%w: chip %d: DMA of %d bytes at %#x: host buffer at %p is not %d-byte aligned",
			ErrMisaligned, c.index, n, addr, &p[0], c.align)
	}
	if addr > c.ddr || uint64(n) > c.ddr-addr {
		return fmt.Errorf("%w: chip %d: DMA of %d bytes at %#x: DDR is %d bytes", ErrOutOfRange, c.index, n, addr, c.ddr)
	}
	return nil
}

// WaitIRQ blocks until user IRQ line has fired since the last wait. Interrupts
// that fired before coalesce into one.
func (c *Chip) WaitIRQ(ctx context.Context, line int) error {
	if line < 0 || line >= shell.IRQLines {
		return fmt.Errorf("%w: chip %d: no IRQ line %d", ErrOutOfRange, c.index, line)
	}
	if err := c.port.WaitIRQ(ctx, line); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // the backend's own error only says it was interrupted
		}
		return fmt.Errorf("chip %d: waiting for IRQ %d: %w", c.index, line, FromErrno(err))
	}
	return nil
}
