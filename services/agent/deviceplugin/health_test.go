package deviceplugin_test

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/services/agent/deviceplugin"
)

// TestHealthFaults injects the faults of the simulated boards and watches
// ListAndWatch as the kubelet does: each turns the chips it hits (and
// their board) Unhealthy, and Healthy again when it is repaired.
func TestHealthFaults(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{2}})
	eps := r.kubelet.accept(3)
	chip, board, share := eps[deviceplugin.ResourceChip], eps[deviceplugin.ResourceBoard], eps[deviceplugin.ResourceShare]
	chip.await("all healthy", healthAll(chips, H))
	board.await("all healthy", healthAll(boards, H))
	share.await("slot-2's shares", healthAll(shares("slot-2"), H))

	t.Run("link", func(t *testing.T) {
		r.boards[0].DropLink()
		chip.await("link down", map[string]string{"slot-0": U, "slot-1": U, "slot-2": H})
		board.await("link down", map[string]string{"board-0": U, "board-1": H})
		r.boards[0].RestoreLink()
		chip.await("link restored", healthAll(chips, H))
		board.await("link restored", healthAll(boards, H))
	})

	t.Run("temperature", func(t *testing.T) {
		c := r.boards[1].Chip(0) // slot 2, running AliDNN
		c.SetTemperature(101_000)
		chip.await("slot-2 overheated", map[string]string{"slot-2": U, "slot-3": H})
		board.await("slot-2 overheated", map[string]string{"board-1": U})
		share.await("slot-2 overheated", healthAll(shares("slot-2"), U))
		c.Heal()
		chip.await("slot-2 cooled", healthAll(chips, H))
		share.await("slot-2 cooled", healthAll(shares("slot-2"), H))
		// The plugin acknowledged the alarm, so the engine is coupled again.
		sl, _ := r.table.Slot(2)
		if v, err := sl.Chip.RoleRead32(0); err != nil || v == 0xffffffff {
			t.Errorf("slot 2's role after cooling: %#x, %v: still decoupled", v, err)
		}
	})

	t.Run("failed slot", func(t *testing.T) {
		// The blank role fails to program: the clear fails and the slot
		// is recorded failed, as after a failed self-test's clear.
		r.boards[0].Chip(1).FailNextProgram()
		if err := r.table.ClearSlots(context.Background(), []int{1}); err == nil {
			t.Fatal("the clear did not fail")
		}
		chip.await("slot-1 failed", map[string]string{"slot-1": U, "slot-0": H})
		board.await("slot-1 failed", map[string]string{"board-0": U})
		if err := r.table.ClearSlots(context.Background(), []int{1}); err != nil {
			t.Fatal(err)
		}
		chip.await("slot-1 cleared", healthAll(chips, H))
		board.await("slot-1 cleared", healthAll(boards, H))
	})

	t.Run("board removed", func(t *testing.T) {
		r.boards[1].Close()
		chip.await("board 1 gone", map[string]string{"slot-2": U, "slot-3": U, "slot-0": H, "slot-1": H})
		board.await("board 1 gone", map[string]string{"board-1": U, "board-0": H})
		share.await("board 1 gone", healthAll(shares("slot-2"), U))
	})
}
