package selftest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/selftest"
	"github.com/fpga-faas/faas/shell/sim"
)

func board(t *testing.T, model sim.RoleModel) *device.Board {
	t.Helper()
	roles, err := sim.NewRegistry(model)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	b, err := devsim.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bitstream(t *testing.T, b *device.Board, chip int) []byte {
	bit, err := loopback.Bitstream(b.Chips[chip].Part(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return bit
}

func TestRunPasses(t *testing.T) {
	b := board(t, loopbackmodel.Model)
	for i, c := range b.Chips {
		var steps []string
		res, err := selftest.Run(context.Background(), c, bitstream(t, b, i), selftest.Options{
			Size: 8 << 20, Step: func(s selftest.Step) { steps = append(steps, s.Name) },
		})
		if err != nil {
			t.Fatalf("chip %d: %v", i, err)
		}
		if res.Role.ID != loopback.ID || res.Bytes != 8<<20 || res.WriteRate <= 0 || res.ReadRate <= 0 || res.ConfigTime <= 0 {
			t.Errorf("chip %d: result %+v", i, res)
		}
		if len(steps) != 7 || len(res.Steps) != 7 {
			t.Errorf("chip %d: steps %v", i, steps)
		}
	}
}

// liar is a loopback look-alike whose copy reports success without copying.
type liar struct {
	env  *sim.Env
	regs map[uint32]uint32
}

func (l *liar) ReadReg(off uint32) uint32 {
	if off == loopback.RegMagic {
		return loopback.ID
	}
	return l.regs[off]
}

func (l *liar) WriteReg(off, v uint32) {
	l.regs[off] = v
	if off == loopback.RegControl {
		l.regs[loopback.RegStatus] = loopback.StatusDone
		l.env.Raise(0)
	}
}

func (l *liar) Close() {}

func TestRunCatchesABrokenRole(t *testing.T) {
	model := sim.RoleModel{Name: loopback.Name, ID: loopback.ID, Version: loopback.Version,
		New: func(env *sim.Env, _ sim.RoleConfig) (sim.Role, error) {
			return &liar{env: env, regs: map[uint32]uint32{}}, nil
		}}
	b := board(t, model)
	_, err := selftest.Run(context.Background(), b.Chips[0], bitstream(t, b, 0), selftest.Options{Size: 1 << 20})
	if !errors.Is(err, selftest.ErrFailed) {
		t.Fatalf("self-test of a role that does not copy = %v, want ErrFailed", err)
	}
}

func TestRunRefusesBadSize(t *testing.T) {
	b := board(t, loopbackmodel.Model)
	if _, err := selftest.Run(context.Background(), b.Chips[0], nil, selftest.Options{Size: 1000}); err == nil {
		t.Fatal("size 1000 accepted")
	}
}
