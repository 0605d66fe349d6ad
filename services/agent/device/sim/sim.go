// Package sim is the device backend for simulated boards: it opens a
// shell/sim board as a device.Board. It is the only package of the agent that
// knows the simulator.
package sim

import (
	"context"

	"github.com/fpga-faas/faas/services/agent/device"
	shellsim "github.com/fpga-faas/faas/shell/sim"
)

// Open opens both chips of a simulated board. Closing the returned board does
// not close the simulated one: the simulator outlives the agent's handles, as
// hardware does.
func Open(b *shellsim.Board) (*device.Board, error) {
	ports := make([]device.Port, 0, 2)
	for i := range 2 {
		ports = append(ports, port{b.Chip(i)})
	}
	return device.OpenBoard("sim:"+b.Serial(), b.Model(), ports)
}

// port adapts a simulated chip to device.Port.
type port struct{ c *shellsim.Chip }

func (p port) ReadUser(off uint32) (uint32, error) { return p.c.ReadUser(uint64(off)) }
func (p port) ReadUserBlock(off uint32, dst []uint32) error {
	return p.c.ReadUserBlock(uint64(off), dst)
}
func (p port) WriteUser(off uint32, v uint32) error   { return p.c.WriteUser(uint64(off), v) }
func (p port) ReadControl(off uint32) (uint32, error) { return p.c.ReadControl(uint64(off)) }
func (p port) WaitIRQ(ctx context.Context, line int) error {
	return p.c.WaitIRQ(ctx, line)
}
func (p port) H2C(ctx context.Context, ch int, b []byte, addr uint64) error {
	return p.c.H2C(ctx, ch, b, addr)
}
func (p port) C2H(ctx context.Context, ch int, b []byte, addr uint64) error {
	return p.c.C2H(ctx, ch, b, addr)
}
func (p port) Close() error { return nil }
