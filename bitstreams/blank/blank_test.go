package blank_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/bitstreams/blank/model"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

func TestProgramBlank(t *testing.T) {
	reg, err := sim.NewRegistry(model.Model)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.NewBoard(sim.Config{Roles: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range shell.ChipsPerBoard {
		c := b.Chip(i)
		bit, err := blank.Bitstream(c.Part())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bit, must(blank.Bitstream(c.Part()))) {
			t.Fatal("blank bitstream is not deterministic")
		}
		if err := program(c, bit); err != nil {
			t.Fatalf("chip %d: %v", i, err)
		}
		id, _ := c.ReadUser(shell.RegRoleID)
		magic, _ := c.ReadUser(shell.RoleBase + blank.RegMagic)
		other, _ := c.ReadUser(shell.RoleBase + 4)
		if id != blank.ID || magic != blank.ID || other != 0 {
			t.Errorf("chip %d: ROLE_ID %#x MAGIC %#x reg 4 %#x", i, id, magic, other)
		}
	}
}

// program runs the shell's PR protocol directly, as the agent's device
// layer does.
func program(c *sim.Chip, bit []byte) error {
	if pad := len(bit) % shell.DMAAlign; pad != 0 {
		bit = append(bit, make([]byte, shell.DMAAlign-pad)...)
	}
	for _, v := range []uint32{shell.PRDecouple, shell.PRDecouple | shell.PRBegin} {
		if err := c.WriteUser(shell.RegPRControl, v); err != nil {
			return err
		}
	}
	if err := c.H2C(context.Background(), 0, bit, shell.PRStreamAddr); err != nil {
		return err
	}
	if err := c.WriteUser(shell.RegPRControl, shell.PRDecouple|shell.PREnd); err != nil {
		return err
	}
	for {
		v, err := c.ReadUser(shell.RegPRStatus)
		if err != nil {
			return err
		}
		state, cause := shell.PRStatus(v)
		if state == shell.PRDone {
			return c.WriteUser(shell.RegPRControl, 0)
		}
		if state != shell.PRBusy {
			return fmt.Errorf("PR state %d cause %v: %v", state, cause, c.PRError())
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
