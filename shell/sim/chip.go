package sim

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// Sensor readings of a healthy chip, in the units of the shell registers.
const (
	idleTemp    = 42_000 // m°C with an empty region
	activeTemp  = 55_000 // m°C with a role loaded
	idlePower   = 24_000 // mW
	activePower = 61_000 // mW
	vccInt      = 850    // mV
	clock0      = 250_000
	clock1      = 500_000
	tempLimit   = 100_000

	// ddrBandwidth models the scrubber: one DDR4-2400 x72 channel.
	ddrBandwidth = 19_200_000_000
)

// Chip is one simulated FPGA of a board: shell registers, sparse DDR behind an
// XDMA-style engine, user IRQ lines, the PR controller and the loaded role.
type Chip struct {
	board *Board
	index int
	part  shell.Part
	ddr   *ddr
	irq   [shell.IRQLines]*irqLine

	prMu sync.Mutex // serialises PR commands and stream writes

	mu          sync.Mutex // guards the fields below
	scratch     uint32
	powerCycles uint32
	alarm       uint32
	irqMask     uint32
	irqStatus   uint32
	digest      [8]uint32
	tempLimit   int32
	tempForced  *int32 // injected temperature, nil when healthy
	windowCtl   uint32
	windows     [shell.Windows]struct{ base, limit uint64 }
	winFault    uint32
	winFaultAt  uint64
	scrubStatus uint32
	decoupled   bool // PR_CONTROL bit 0 as software wrote it
	pr          prController
	failProgram bool // fault: next END fails with CONFIG_ERROR
	dmaStall    bool // fault: DMA hangs until its timeout
	role        Role
	model       RoleModel
	roleCfg     RoleConfig // what model was instantiated with, for the state file
	roleGen     uint64     // generation of the loaded role's Env, the only live one
	genSeq      uint64     // last generation handed out
}

func newChip(b *Board, index int, part shell.Part) *Chip {
	c := &Chip{board: b, index: index, part: part, ddr: newDDR(b.cfg.DDRSize)}
	for i := range c.irq {
		c.irq[i] = newIRQLine()
	}
	c.powerUp()
	return c
}

// powerUp sets every register to its reset value. Callers hold mu or own c.
func (c *Chip) powerUp() {
	c.scratch = 0
	c.powerCycles++
	c.irqMask = 1<<shell.IRQLines - 1
	c.irqStatus = 0
	c.digest = [8]uint32{}
	c.tempLimit = tempLimit
	c.tempForced = nil
	c.windowCtl = 0
	c.windows = [shell.Windows]struct{ base, limit uint64 }{}
	c.winFault, c.winFaultAt = 0, 0
	c.scrubStatus = 0
	c.decoupled = false
	c.pr = prController{}
	c.failProgram = false
	c.dmaStall = false
	for _, l := range c.irq {
		l.reset()
	}
}

// Index is the chip's position on the board.
func (c *Chip) Index() int { return c.index }

// Part is the chip's FPGA part.
func (c *Chip) Part() shell.Part { return c.part }

// DDRSize is the size of the chip's DDR in bytes.
func (c *Chip) DDRSize() uint64 { return c.ddr.size }

// DDRResident is how much host memory the chip's sparse DDR holds.
func (c *Chip) DDRResident() uint64 { return c.ddr.Resident() }

func (c *Chip) fail(op string, addr uint64, errno syscall.Errno, format string, args ...any) error {
	return &Error{Chip: c.index, Op: op, Addr: addr, Errno: errno, Detail: fmt.Sprintf(format, args...)}
}

// failClosed is the error of an access refused because the board is closed.
func (c *Chip) failClosed(op string, addr uint64) error {
	return &Error{Chip: c.index, Op: op, Addr: addr, Errno: syscall.ENODEV, Detail: "board closed", closed: true}
}

// ReadUser reads the 32-bit register at off in the user BAR.
func (c *Chip) ReadUser(off uint64) (uint32, error) {
	if err := c.checkMMIO("mmio read", off, shell.UserBARSize); err != nil {
		return 0, err
	}
	if off >= shell.RoleBase {
		role := c.coupledRole()
		if role == nil {
			return 0xffffffff, nil // master abort
		}
		return role.ReadReg(uint32(off - shell.RoleBase)), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readShell(uint32(off)), nil
}

// ReadUserBlock reads len(dst) consecutive registers from off in the user
// BAR, as a burst from a mapped BAR would. A role implementing RegsReader
// serves a block inside its window in one access.
func (c *Chip) ReadUserBlock(off uint64, dst []uint32) error {
	n := uint64(len(dst)) * 4
	if n == 0 {
		return nil
	}
	if err := c.checkMMIO("mmio read", off, shell.UserBARSize); err != nil {
		return err
	}
	if err := c.checkMMIO("mmio read", off+n-4, shell.UserBARSize); err != nil {
		return err
	}
	if off >= shell.RoleBase {
		if rr, ok := c.coupledRole().(RegsReader); ok {
			rr.ReadRegs(uint32(off-shell.RoleBase), dst)
			return nil
		}
	}
	for i := range dst {
		v, err := c.ReadUser(off + uint64(4*i))
		if err != nil {
			return err
		}
		dst[i] = v
	}
	return nil
}

// WriteUser writes the 32-bit register at off in the user BAR.
func (c *Chip) WriteUser(off uint64, v uint32) error {
	if err := c.checkMMIO("mmio write", off, shell.UserBARSize); err != nil {
		return err
	}
	if off >= shell.RoleBase {
		if role := c.coupledRole(); role != nil {
			role.WriteReg(uint32(off-shell.RoleBase), v)
		}
		return nil
	}
	c.writeShell(uint32(off), v)
	if off >= shell.RegImageDigest && off < shell.RegImageDigest+32 {
		return c.board.persist()
	}
	return nil
}

func (c *Chip) checkMMIO(op string, off, size uint64) error {
	if off%4 != 0 {
		return c.fail(op, off, syscall.EPROTO, "offset not 32-bit aligned")
	}
	if off >= size {
		return c.fail(op, off, syscall.ENXIO, "offset beyond the %d-byte BAR", size)
	}
	select {
	case <-c.board.closed:
		return c.failClosed(op, off)
	default:
	}
	return nil
}

// coupledRole returns the loaded role if its region is coupled.
func (c *Chip) coupledRole() Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isDecoupled() {
		return nil
	}
	return c.role
}

// isDecoupled reports whether the region is isolated, by software or by the
// over-temperature protection. Callers hold mu.
func (c *Chip) isDecoupled() bool {
	return c.decoupled || c.alarm&shell.AlarmOverTemp != 0
}

func (c *Chip) temperature() int32 {
	switch {
	case c.tempForced != nil:
		return *c.tempForced
	case c.role != nil:
		return activeTemp
	}
	return idleTemp
}

// readShell reads a shell register. Callers hold mu.
func (c *Chip) readShell(off uint32) uint32 {
	if v, ok := c.readShellBlock(off); ok {
		return v
	}
	linkUp, linkErrs := c.board.link()
	switch off {
	case shell.RegMagic:
		return shell.Magic
	case shell.RegVersion:
		return shell.Version + uint32(c.board.cfg.ShellMinor)
	case shell.RegBoardID:
		return c.board.cfg.Model.ID
	case shell.RegChipIndex:
		return uint32(c.index)
	case shell.RegPartID:
		return c.part.IDCode
	case shell.RegCaps:
		return shell.CapPR | shell.CapLink | shell.CapWindow | shell.CapScrub
	case shell.RegScratch:
		return c.scratch
	case shell.RegPowerCycles:
		return c.powerCycles
	case shell.RegAlarm:
		return c.alarm
	case shell.RegPRControl:
		if c.decoupled {
			return shell.PRDecouple
		}
		return 0
	case shell.RegPRStatus:
		return c.pr.status()
	case shell.RegPRBytes:
		return uint32(c.pr.bytes)
	case shell.RegPRCRC:
		return c.pr.crc
	case shell.RegPRTime:
		return uint32(c.pr.duration / time.Microsecond)
	case shell.RegPRCount:
		return c.pr.count
	case shell.RegPRStreamLen:
		return c.pr.streamLen
	case shell.RegRoleID:
		return c.model.ID
	case shell.RegRoleVersion:
		return c.model.Version
	case shell.RegTemperature:
		return uint32(c.temperature())
	case shell.RegVCCInt:
		return vccInt
	case shell.RegPower:
		if c.role != nil {
			return activePower
		}
		return idlePower
	case shell.RegClock0:
		return clock0
	case shell.RegClock1:
		return clock1
	case shell.RegTempLimit:
		return uint32(c.tempLimit)
	case shell.RegLinkStatus:
		if linkUp {
			return shell.LinkUp | 16<<8
		}
		return 0
	case shell.RegLinkErrors:
		return linkErrs
	case shell.RegIRQMask:
		return c.irqMask
	case shell.RegIRQStatus:
		return c.irqStatus
	case shell.RegWindowControl:
		return c.windowCtl
	case shell.RegWindowFault:
		return c.winFault
	case shell.RegScrubStatus:
		return c.scrubStatus
	}
	return 0
}

// readShellBlock reads off if it is in one of the shell's multi-word
// registers: texts, the image digest, 64-bit values and the windows.
func (c *Chip) readShellBlock(off uint32) (uint32, bool) {
	word := func(base uint32, vals []uint32) (uint32, bool) {
		if off >= base && off < base+4*uint32(len(vals)) {
			return vals[(off-base)/4], true
		}
		return 0, false
	}
	text := func(base uint32, n int, s string) (uint32, bool) {
		if off >= base && off < base+uint32(n) {
			return textWord(s, int(off-base)), true
		}
		return 0, false
	}
	if v, ok := text(shell.RegInterfaceID, 16, string(shell.InterfaceUUID[:])); ok {
		return v, true
	}
	if v, ok := text(shell.RegBoardSerial, 16, c.board.cfg.Serial); ok {
		return v, true
	}
	if v, ok := text(shell.RegRoleName, roleNameBytes, c.model.Name); ok {
		return v, true
	}
	if v, ok := word(shell.RegImageDigest, c.digest[:]); ok {
		return v, true
	}
	if v, ok := word(shell.RegDDRSize, []uint32{uint32(c.ddr.size), uint32(c.ddr.size >> 32)}); ok {
		return v, true
	}
	if v, ok := word(shell.RegWindowFaultAt, []uint32{uint32(c.winFaultAt), uint32(c.winFaultAt >> 32)}); ok {
		return v, true
	}
	if off >= shell.RegWindowBase && off < shell.WindowBase(shell.Windows) {
		n, r := (off-shell.RegWindowBase)/shell.WindowStride, (off-shell.RegWindowBase)%shell.WindowStride
		w := c.windows[n]
		return [4]uint32{uint32(w.base), uint32(w.base >> 32), uint32(w.limit), uint32(w.limit >> 32)}[r/4], true
	}
	return 0, false
}

// writeShell writes a shell register.
func (c *Chip) writeShell(off uint32, v uint32) {
	c.mu.Lock()
	var fire []int
	switch {
	case off == shell.RegScratch:
		c.scratch = v
	case off == shell.RegAlarm:
		c.alarm &^= v
		c.relatchAlarms()
	case off == shell.RegTempLimit:
		c.tempLimit = int32(v)
		if c.temperature() >= c.tempLimit && c.alarm&shell.AlarmOverTemp == 0 {
			c.alarm |= shell.AlarmOverTemp
			fire = c.latchIRQ(fire, shell.IRQAlarm)
		}
	case off == shell.RegIRQMask:
		c.irqMask = v & (1<<shell.IRQLines - 1)
	case off == shell.RegIRQStatus:
		c.irqStatus &^= v
	case off >= shell.RegImageDigest && off < shell.RegImageDigest+32:
		c.digest[(off-shell.RegImageDigest)/4] = v
	case off == shell.RegWindowControl:
		c.windowCtl = v & (1<<shell.Windows - 1)
	case off == shell.RegWindowFault:
		if v&shell.WindowFaultValid != 0 {
			c.winFault, c.winFaultAt = 0, 0
		}
	case off >= shell.RegWindowBase && off < shell.WindowBase(shell.Windows):
		n, r := (off-shell.RegWindowBase)/shell.WindowStride, (off-shell.RegWindowBase)%shell.WindowStride
		w := &c.windows[n]
		switch r {
		case 0:
			w.base = w.base&^0xffffffff | uint64(v)
		case 4:
			w.base = w.base&0xffffffff | uint64(v)<<32
		case 8:
			w.limit = w.limit&^0xffffffff | uint64(v)
		case 12:
			w.limit = w.limit&0xffffffff | uint64(v)<<32
		}
	case off == shell.RegScrubControl && v&shell.ScrubStart != 0:
		c.mu.Unlock()
		c.scrub()
		return
	case off == shell.RegPRStreamLen:
		c.pr.streamLen = v
	case off == shell.RegPRControl:
		c.mu.Unlock()
		c.prControl(v)
		return
	}
	c.mu.Unlock()
	c.fire(fire)
}

// relatchAlarms sets again the alarms whose cause persists. Callers hold mu.
func (c *Chip) relatchAlarms() {
	if c.temperature() >= c.tempLimit {
		c.alarm |= shell.AlarmOverTemp
	}
	if up, _ := c.board.link(); !up {
		c.alarm |= shell.AlarmLinkDown
	}
}

// latchIRQ records that line fires if it is enabled, appending it to fire
// for the caller to deliver once mu is released. Callers hold mu.
func (c *Chip) latchIRQ(fire []int, line int) []int {
	if c.irqMask&(1<<line) == 0 {
		return fire
	}
	c.irqStatus |= 1 << line
	return append(fire, line)
}

func (c *Chip) fire(lines []int) {
	for _, l := range lines {
		c.irq[l].fire()
	}
}

func (c *Chip) raise(line int) {
	c.mu.Lock()
	fire := c.latchIRQ(nil, line)
	c.mu.Unlock()
	c.fire(fire)
}

func (c *Chip) raiseFromRole(gen uint64, line int) {
	c.mu.Lock()
	var fire []int
	if gen == c.roleGen && !c.isDecoupled() {
		fire = c.latchIRQ(nil, line)
	}
	c.mu.Unlock()
	c.fire(fire)
}

func (c *Chip) setAlarm(bit uint32) {
	c.mu.Lock()
	c.alarm |= bit
	fire := c.latchIRQ(nil, shell.IRQAlarm)
	c.mu.Unlock()
	c.fire(fire)
}

// roleAccess checks a role's DMA against the tenant windows and latches a
// fault when it falls outside.
func (c *Chip) roleAccess(gen uint64, win int, addr, n uint64, write bool) error {
	c.mu.Lock()
	if gen != c.roleGen || c.isDecoupled() {
		c.mu.Unlock()
		return ErrDecoupled
	}
	if win >= 0 && win < shell.Windows && c.windowCtl&(1<<win) != 0 {
		w := c.windows[win]
		if addr >= w.base && n <= w.limit-addr && addr <= w.limit && w.limit <= c.ddr.size {
			c.mu.Unlock()
			return nil
		}
	}
	var fire []int
	if c.winFault&shell.WindowFaultValid == 0 {
		c.winFault = shell.WindowFaultValid | uint32(win)&7
		if write {
			c.winFault |= shell.WindowFaultWrite
		}
		c.winFaultAt = addr
	}
	if c.alarm&shell.AlarmWindow == 0 {
		c.alarm |= shell.AlarmWindow
		fire = c.latchIRQ(fire, shell.IRQAlarm)
	}
	c.mu.Unlock()
	c.fire(fire)
	return fmt.Errorf("sim: chip %d: role access of %d bytes at %#x through window %d: %w", c.index, n, addr, win, ErrWindow)
}

func (c *Chip) scrub() {
	c.mu.Lock()
	c.scrubStatus = shell.ScrubBusy
	c.mu.Unlock()
	c.ddr.Zero()
	if c.board.cfg.RealTime {
		time.Sleep(time.Duration(float64(c.ddr.size) / ddrBandwidth * float64(time.Second)))
	}
	c.mu.Lock()
	c.scrubStatus = shell.ScrubDone
	fire := c.latchIRQ(nil, shell.IRQScrub)
	c.mu.Unlock()
	c.fire(fire)
}

// ReadControl reads the 32-bit register at off in the XDMA control BAR.
func (c *Chip) ReadControl(off uint64) (uint32, error) {
	if err := c.checkMMIO("control read", off, shell.ControlBARSize); err != nil {
		return 0, err
	}
	for ch := range shell.DMAChannels {
		for _, dir := range []struct {
			base uint64
			id   uint32
		}{{shell.XDMAH2CChannel, shell.XDMAIDH2C}, {shell.XDMAC2HChannel, shell.XDMAIDC2H}} {
			blk := dir.base + uint64(ch)*shell.XDMAChannelStride
			switch off {
			case blk + shell.XDMAIdentifier:
				return dir.id | uint32(ch)<<8, nil
			case blk + shell.XDMAAlignments:
				return shell.XDMAAlignment(shell.DMAAlign, shell.DMAAlign, shell.DMAAddressBits), nil
			}
		}
	}
	return 0, nil
}

// WriteControl writes the XDMA control BAR. The simulated engine has no
// settable registers; writes are accepted and ignored.
func (c *Chip) WriteControl(off uint64, v uint32) error {
	return c.checkMMIO("control write", off, shell.ControlBARSize)
}

// H2C writes p to card address addr through host-to-card channel ch.
func (c *Chip) H2C(ctx context.Context, ch int, p []byte, addr uint64) error {
	if err := c.checkDMA(ctx, "h2c", ch, p, addr); err != nil {
		return err
	}
	if addr == shell.PRStreamAddr {
		return c.prStream(p)
	}
	c.ddr.WriteAt(p, addr)
	return nil
}

// C2H reads card address addr into p through card-to-host channel ch.
func (c *Chip) C2H(ctx context.Context, ch int, p []byte, addr uint64) error {
	if addr == shell.PRStreamAddr {
		return c.fail("c2h", addr, syscall.EIO, "PR stream port is write-only")
	}
	if err := c.checkDMA(ctx, "c2h", ch, p, addr); err != nil {
		return err
	}
	c.ddr.ReadAt(p, addr)
	return nil
}

// checkDMA applies the engine's rules before a transfer moves any byte, and
// models a stalled engine.
func (c *Chip) checkDMA(ctx context.Context, op string, ch int, p []byte, addr uint64) error {
	if ch < 0 || ch >= shell.DMAChannels {
		return c.fail(op, addr, syscall.ENODEV, "no DMA channel %d", ch)
	}
	if addr%shell.DMAAlign != 0 || len(p)%shell.DMAAlign != 0 {
		return c.fail(op, addr, syscall.EINVAL, "card address and length %d must be multiples of %d", len(p), shell.DMAAlign)
	}
	n := uint64(len(p))
	if addr != shell.PRStreamAddr && (addr > c.ddr.size || n > c.ddr.size-addr) {
		return c.fail(op, addr, syscall.EIO, "%d bytes past the end of the %d-byte DDR (AXI decode error)", n, c.ddr.size)
	}
	c.mu.Lock()
	stalled := c.dmaStall
	c.mu.Unlock()
	select {
	case <-c.board.closed:
		return c.failClosed(op, addr)
	default:
	}
	if !stalled {
		return nil
	}
	t := time.NewTimer(c.board.cfg.DMATimeout)
	defer t.Stop()
	select {
	case <-t.C:
		return c.fail(op, addr, syscall.ETIMEDOUT, "engine did not complete within %v", c.board.cfg.DMATimeout)
	case <-ctx.Done():
		return fmt.Errorf("sim: chip %d: %s at %#x: %w", c.index, op, addr, ctx.Err())
	case <-c.board.closed:
		return c.failClosed(op, addr)
	}
}

// WaitIRQ blocks until user IRQ line has fired since the last wait, then
// clears its event flag, like a read of /dev/xdmaN_events_K.
func (c *Chip) WaitIRQ(ctx context.Context, line int) error {
	return c.waitIRQ(ctx, line, time.Time{})
}

func (c *Chip) waitIRQ(ctx context.Context, line int, deadline time.Time) error {
	if line < 0 || line >= shell.IRQLines {
		return c.fail("events", uint64(line), syscall.ENODEV, "no IRQ line %d", line)
	}
	return c.irq[line].wait(ctx, deadline, c.board.closed)
}

// Interrupt fires user IRQ line as an interrupt source on the chip would,
// honouring IRQ_MASK. Tests use it to stand for hardware events.
func (c *Chip) Interrupt(line int) {
	if line >= 0 && line < shell.IRQLines {
		c.raise(line)
	}
}

// Fault injection.

// FailNextProgram makes the next partial reconfiguration fail in the
// configuration engine (PR cause CONFIG_ERROR), leaving the old role.
func (c *Chip) FailNextProgram() {
	c.mu.Lock()
	c.failProgram = true
	c.mu.Unlock()
}

// StallDMA makes every DMA transfer hang until the DMA timeout (stall true) or
// restores the engine (stall false).
func (c *Chip) StallDMA(stall bool) {
	c.mu.Lock()
	c.dmaStall = stall
	c.mu.Unlock()
}

// SetTemperature forces the die temperature, in milli-degrees Celsius. At or
// above TEMP_LIMIT the shell raises the over-temperature alarm and decouples
// the role. Heal restores normal readings.
func (c *Chip) SetTemperature(milliC int32) {
	c.mu.Lock()
	c.tempForced = &milliC
	var fire []int
	if milliC >= c.tempLimit && c.alarm&shell.AlarmOverTemp == 0 {
		c.alarm |= shell.AlarmOverTemp
		fire = c.latchIRQ(fire, shell.IRQAlarm)
	}
	c.mu.Unlock()
	c.fire(fire)
}

// Heal clears injected temperature and DMA faults. Latched alarms stay until
// software clears them.
func (c *Chip) Heal() {
	c.mu.Lock()
	c.tempForced = nil
	c.dmaStall = false
	c.failProgram = false
	c.mu.Unlock()
}

// PowerCycle injects a power loss of this chip: the role and DDR content are
// lost and every register returns to its reset value; POWER_CYCLES increments
// and ALARM reports the power loss.
func (c *Chip) PowerCycle() {
	c.unloadRole()
	c.ddr.Zero()
	c.mu.Lock()
	c.powerUp()
	c.alarm = shell.AlarmPowerLoss
	c.relatchAlarms()
	fire := c.latchIRQ(nil, shell.IRQAlarm)
	c.mu.Unlock()
	c.board.persist()
	c.fire(fire)
}

// unloadRole stops the loaded role, if any, and empties the region.
func (c *Chip) unloadRole() {
	c.mu.Lock()
	role := c.role
	c.role, c.model = nil, RoleModel{}
	c.genSeq++
	c.roleGen = c.genSeq // a generation no Env holds
	c.mu.Unlock()
	if role != nil {
		role.Close()
	}
	select {
	case <-c.board.closed: // closing is not the chip losing its role
	default:
		c.board.persist()
	}
}

// textWord is the little-endian word at byte offset i of s padded with NULs.
func textWord(s string, i int) uint32 {
	var w uint32
	for k := 3; k >= 0; k-- {
		w <<= 8
		if i+k < len(s) {
			w |= uint32(s[i+k])
		}
	}
	return w
}
