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
package loopback

import (
	"errors"
	"hash/crc32"
	"sync"

	"github.com/fpga-faas/faas/shell/sim"
)

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

// bandwidth models the role's DDR datapath: 512 bits at 250 MHz.
const bandwidth = 16_000_000_000

// chunk is how much the role moves per DDR access.
const chunk = 1 << 20

// Model registers the loopback role with a simulator registry.
var Model = sim.RoleModel{
	Name:    Name,
	ID:      ID,
	Version: Version,
	New: func(env *sim.Env, _ sim.RoleConfig) (sim.Role, error) {
		return &role{env: env, stop: make(chan struct{})}, nil
	},
}

type role struct {
	env  *sim.Env
	stop chan struct{}
	wg   sync.WaitGroup

	mu                  sync.Mutex
	src, dst, n         uint64
	window              uint32
	status, crc, timeNS uint32
}

func (r *role) ReadReg(off uint32) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch off {
	case RegMagic:
		return ID
	case RegStatus:
		return r.status
	case RegSrc:
		return uint32(r.src)
	case RegSrc + 4:
		return uint32(r.src >> 32)
	case RegDst:
		return uint32(r.dst)
	case RegDst + 4:
		return uint32(r.dst >> 32)
	case RegLen:
		return uint32(r.n)
	case RegLen + 4:
		return uint32(r.n >> 32)
	case RegWindow:
		return r.window
	case RegCRC:
		return r.crc
	case RegTimeNS:
		return r.timeNS
	}
	return 0
}

func (r *role) WriteReg(off uint32, v uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	setLow := func(x *uint64) { *x = *x&^0xffffffff | uint64(v) }
	setHigh := func(x *uint64) { *x = *x&0xffffffff | uint64(v)<<32 }
	switch off {
	case RegSrc:
		setLow(&r.src)
	case RegSrc + 4:
		setHigh(&r.src)
	case RegDst:
		setLow(&r.dst)
	case RegDst + 4:
		setHigh(&r.dst)
	case RegLen:
		setLow(&r.n)
	case RegLen + 4:
		setHigh(&r.n)
	case RegWindow:
		r.window = v
	case RegControl:
		if v&(Copy|CRC) == 0 {
			return
		}
		if r.status&StatusBusy != 0 {
			r.status |= StatusError | ErrCodeBusy<<8
			return
		}
		r.status = StatusBusy
		r.wg.Add(1)
		go r.run(v&Copy != 0, r.src, r.dst, r.n, int(r.window))
	}
}

// run performs one operation in the background, as the hardware would.
func (r *role) run(copying bool, src, dst, n uint64, win int) {
	defer r.wg.Done()
	buf := make([]byte, min(n, chunk))
	var crc uint32
	var err error
	for done := uint64(0); done < n && err == nil; {
		select {
		case <-r.stop:
			return
		default:
		}
		p := buf[:min(n-done, chunk)]
		if err = r.env.ReadAt(win, p, src+done); err != nil {
			break
		}
		crc = crc32.Update(crc, crc32.IEEETable, p)
		if copying {
			err = r.env.WriteAt(win, p, dst+done)
		}
		done += uint64(len(p))
	}
	moved := n
	if copying {
		moved *= 2
	}
	r.mu.Lock()
	r.crc = crc
	r.timeNS = uint32(min(moved*1_000_000_000/bandwidth, 1<<32-1))
	switch {
	case errors.Is(err, sim.ErrWindow):
		r.status = StatusDone | StatusError | ErrCodeWindow<<8
	case err != nil:
		r.status = StatusDone | StatusError | ErrCodeDecoupled<<8
	default:
		r.status = StatusDone
	}
	r.mu.Unlock()
	r.env.Raise(0)
}

func (r *role) Close() {
	close(r.stop)
	r.wg.Wait()
}
