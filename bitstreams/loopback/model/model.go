// Package model is the functional model of the loopback role for the board
// simulator. Register Model with a sim.Registry to make loopback bitstreams
// programmable on simulated boards.
package model

import (
	"errors"
	"hash/crc32"
	"sync"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/shell/sim"
)

// bandwidth models the role's DDR datapath: 512 bits at 250 MHz.
const bandwidth = 16_000_000_000

// chunk is how much the role moves per DDR access.
const chunk = 1 << 20

// Model registers the loopback role with a simulator registry.
var Model = sim.RoleModel{
	Name:    loopback.Name,
	ID:      loopback.ID,
	Version: loopback.Version,
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
	case loopback.RegMagic:
		return loopback.ID
	case loopback.RegStatus:
		return r.status
	case loopback.RegSrc:
		return uint32(r.src)
	case loopback.RegSrc + 4:
		return uint32(r.src >> 32)
	case loopback.RegDst:
		return uint32(r.dst)
	case loopback.RegDst + 4:
		return uint32(r.dst >> 32)
	case loopback.RegLen:
		return uint32(r.n)
	case loopback.RegLen + 4:
		return uint32(r.n >> 32)
	case loopback.RegWindow:
		return r.window
	case loopback.RegCRC:
		return r.crc
	case loopback.RegTimeNS:
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
	case loopback.RegSrc:
		setLow(&r.src)
	case loopback.RegSrc + 4:
		setHigh(&r.src)
	case loopback.RegDst:
		setLow(&r.dst)
	case loopback.RegDst + 4:
		setHigh(&r.dst)
	case loopback.RegLen:
		setLow(&r.n)
	case loopback.RegLen + 4:
		setHigh(&r.n)
	case loopback.RegWindow:
		r.window = v
	case loopback.RegControl:
		if v&(loopback.Copy|loopback.CRC) == 0 {
			return
		}
		if r.status&loopback.StatusBusy != 0 {
			r.status |= loopback.StatusError | loopback.ErrCodeBusy<<8
			return
		}
		r.status = loopback.StatusBusy
		r.wg.Add(1)
		go r.run(v&loopback.Copy != 0, r.src, r.dst, r.n, int(r.window))
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
		r.status = loopback.StatusDone | loopback.StatusError | loopback.ErrCodeWindow<<8
	case err != nil:
		r.status = loopback.StatusDone | loopback.StatusError | loopback.ErrCodeDecoupled<<8
	default:
		r.status = loopback.StatusDone
	}
	r.mu.Unlock()
	r.env.Raise(0)
}

func (r *role) Close() {
	close(r.stop)
	r.wg.Wait()
}
