package images_test

import (
	"context"
	"testing"
	"time"

	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/bitstreams/roles"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
	"go.yaml.in/yaml/v3"
)

// manifest is the part of image.yaml this test reads (hdk/image owns the
// format; bitstreams may not import it).
type manifest struct {
	Chips []struct {
		Index     int
		Bitstream string
		Role      struct{ Name string }
	}
}

// TestSourcesProgram programs every reference image's bitstreams into the
// chips its image.yaml names, on a simulated board, and checks that the role
// the manifest promises is the one that comes up.
func TestSourcesProgram(t *testing.T) {
	reg, err := sim.NewRegistry(model.Model, alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range images.Sources {
		t.Run(src.Name, func(t *testing.T) {
			b, err := images.Manifest(src.Name)
			if err != nil {
				t.Fatal(err)
			}
			var m manifest
			if err := yaml.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			board, err := sim.NewBoard(sim.Config{Roles: reg, DDRSize: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			defer board.Close()
			if len(m.Chips) != len(src.Bitstreams) {
				t.Fatalf("image.yaml names %d chips, the source has %d bitstreams", len(m.Chips), len(src.Bitstreams))
			}
			for k, chip := range m.Chips {
				bs := src.Bitstreams[k]
				if bs.File != chip.Bitstream {
					t.Fatalf("chip %d: image.yaml names %s, the source makes %s", chip.Index, chip.Bitstream, bs.File)
				}
				role, ok := roles.Lookup(chip.Role.Name)
				if !ok {
					t.Fatalf("chip %d: unknown role %q", chip.Index, chip.Role.Name)
				}
				bit, err := bs.Make(bs.Part, 64<<10)
				if err != nil {
					t.Fatal(err)
				}
				c := board.Chip(chip.Index)
				program(t, c, bit)
				if id, _ := c.ReadUser(shell.RegRoleID); id != role.ID {
					t.Errorf("chip %d: ROLE_ID %#x after programming %s, want %s's %#x", chip.Index, id, bs.File, role.Name, role.ID)
				}
			}
		})
	}
}

func program(t *testing.T, c *sim.Chip, bit []byte) {
	t.Helper()
	if pad := len(bit) % shell.DMAAlign; pad != 0 {
		bit = append(bit, make([]byte, shell.DMAAlign-pad)...)
	}
	for _, v := range []uint32{shell.PRDecouple, shell.PRDecouple | shell.PRBegin} {
		if err := c.WriteUser(shell.RegPRControl, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.H2C(context.Background(), 0, bit, shell.PRStreamAddr); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteUser(shell.RegPRControl, shell.PRDecouple|shell.PREnd); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		v, err := c.ReadUser(shell.RegPRStatus)
		if err != nil {
			t.Fatal(err)
		}
		state, cause := shell.PRStatus(v)
		if state == shell.PRDone {
			break
		}
		if state != shell.PRBusy || time.Now().After(deadline) {
			t.Fatalf("programming failed: state %d, %v (%v)", state, cause, c.PRError())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := c.WriteUser(shell.RegPRControl, 0); err != nil {
		t.Fatal(err)
	}
}
