package device

import (
	"errors"
	"fmt"

	"github.com/fpga-faas/faas/shell"
)

// Board is one FPGA board: both chips of a card, opened through one backend.
type Board struct {
	ID     string // where the board was found: PCIe BDF of its switch, or "sim:<serial>"
	Model  shell.BoardModel
	Serial string
	Chips  [shell.ChipsPerBoard]*Chip
}

// OpenBoard opens a board's chips from their ports, checks that they are the
// two chips of one board of a known model, and orders them by chip index.
// ports may come in any order; on error every port is closed.
func OpenBoard(id string, model shell.BoardModel, ports []Port) (b *Board, err error) {
	defer func() {
		if err != nil {
			for _, p := range ports {
				p.Close()
			}
		}
	}()
	if len(ports) != shell.ChipsPerBoard {
		return nil, fmt.Errorf("board %s: %d chips, want %d", id, len(ports), shell.ChipsPerBoard)
	}
	b = &Board{ID: id, Model: model}
	for _, p := range ports {
		c, err := OpenChip(p)
		if err != nil {
			return nil, fmt.Errorf("board %s: %w", id, err)
		}
		if b.Chips[c.index] != nil {
			return nil, fmt.Errorf("board %s: %w: two chips claim index %d", id, ErrNotShell, c.index)
		}
		if c.part != model.Parts[c.index] {
			return nil, fmt.Errorf("board %s: %w: chip %d is a %s, a %s has a %s there", id, ErrNotShell, c.index, c.part.Name, model.Name, model.Parts[c.index].Name)
		}
		b.Chips[c.index] = c
	}
	if b.Chips[0].serial != b.Chips[1].serial {
		return nil, fmt.Errorf("board %s: %w: chips report serials %q and %q", id, ErrNotShell, b.Chips[0].serial, b.Chips[1].serial)
	}
	b.Serial = b.Chips[0].serial
	return b, nil
}

// Close releases both chips.
func (b *Board) Close() error {
	var errs []error
	for _, c := range b.Chips {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
