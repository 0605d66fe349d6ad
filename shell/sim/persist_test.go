package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

// TestStateFileSurvivesTheProcess: a board opened again on the same state
// file finds each chip's role and IMAGE_DIGEST as they were, as a real board
// does after the host process died; a power cycle empties them.
func TestStateFileSurvivesTheProcess(t *testing.T) {
	state := filepath.Join(t.TempDir(), "board", "state.json")
	log := &roleLog{}
	roles := testRegistry(t, log)
	cfg := sim.Config{Roles: roles, DDRSize: smallDDR, StateFile: state}
	b, err := sim.NewBoard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c0 := b.Chip(0)
	mustProgram(t, c0, bitstream(t, alphaName, c0.Part(), 4096, "lanes=4"))
	wr(t, c0, shell.RegImageDigest, 0xdeadbeef)
	wr(t, c0, shell.RegImageDigest+28, 0x01020304)
	crc := rd(t, c0, shell.RegPRCRC)
	b.Close() // the process dies; the board does not

	again, err := sim.NewBoard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	c0, c1 := again.Chip(0), again.Chip(1)
	if got := rd(t, c0, shell.RoleBase); got != alphaID {
		t.Errorf("chip 0 role magic after reopening = %#x, want %#x", got, alphaID)
	}
	if got := log.last(t).cfg.Options["lanes"]; got != "4" {
		t.Errorf("restored role's options: lanes = %q, want 4", got)
	}
	if rd(t, c0, shell.RegImageDigest) != 0xdeadbeef || rd(t, c0, shell.RegImageDigest+28) != 0x01020304 {
		t.Errorf("IMAGE_DIGEST not kept: % x", words(t, c0, shell.RegImageDigest, 8))
	}
	if got := rd(t, c0, shell.RegPRCRC); got != crc {
		t.Errorf("PR_CRC = %#x, want %#x", got, crc)
	}
	if got := rd(t, c1, shell.RoleBase); got == alphaID {
		t.Errorf("chip 1, never programmed, has a role (magic %#x)", got)
	}

	c0.PowerCycle()
	again.Close()
	third, err := sim.NewBoard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if rd(t, third.Chip(0), shell.RoleBase) == alphaID || rd(t, third.Chip(0), shell.RegImageDigest) != 0 {
		t.Error("a power cycle did not empty the kept state")
	}
}

func TestStateFileRefusesAnotherBoard(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	roles := testRegistry(t, &roleLog{})
	b, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: smallDDR, StateFile: state, Serial: "A1"})
	if err != nil {
		t.Fatal(err)
	}
	mustProgram(t, b.Chip(0), bitstream(t, alphaName, b.Chip(0).Part(), 4096))
	b.Close()
	if _, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: smallDDR, StateFile: state, Serial: "B2"}); err == nil || !strings.Contains(err.Error(), `"A1"`) {
		t.Errorf("opening A1's state as board B2 = %v", err)
	}
	empty, _ := sim.NewRegistry()
	if _, err := sim.NewBoard(sim.Config{Roles: empty, DDRSize: smallDDR, StateFile: state, Serial: "A1"}); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Errorf("opening with no model for the kept role = %v", err)
	}
	os.WriteFile(state, []byte("{not json"), 0o600)
	if _, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: smallDDR, StateFile: state, Serial: "A1"}); err == nil || !strings.Contains(err.Error(), state) {
		t.Errorf("opening a corrupt state file = %v", err)
	}
}
