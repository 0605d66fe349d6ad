package sim

import (
	"errors"
	"fmt"
	"syscall"
)

// Error is a failed host access to a simulated chip. It unwraps to the errno
// the Xilinx XDMA driver returns in the same situation, so that code written
// against the driver (and its error mapping) behaves the same on the
// simulator.
type Error struct {
	Chip   int
	Op     string // "mmio read", "h2c", "events", …
	Addr   uint64 // BAR offset or card address
	Detail string
	Errno  syscall.Errno

	closed bool // refused because the board is closed: also ErrClosed
}

func (e *Error) Error() string {
	return fmt.Sprintf("sim: chip %d: %s at %#x: %s (%v)", e.Chip, e.Op, e.Addr, e.Detail, e.Errno)
}

func (e *Error) Unwrap() error { return e.Errno }

// Is reports a refusal because the board is closed as ErrClosed too (its
// errno is ENODEV, as the driver's once the device is gone).
func (e *Error) Is(target error) bool { return target == ErrClosed && e.closed }

var (
	errDeadline = errors.New("deadline exceeded")
	// ErrClosed is returned by calls on a closed board.
	ErrClosed = errors.New("sim: board closed")
	errClosed = ErrClosed
)
