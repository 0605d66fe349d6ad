package device

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/fpga-faas/faas/shell"
)

// Error categories. Every error of this package wraps one of them; check with
// errors.Is.
var (
	// ErrMisaligned: an MMIO offset, DMA card address or length breaks the
	// alignment rules (the driver's EPROTO for MMIO, EINVAL for DMA).
	ErrMisaligned = errors.New("misaligned access")
	// ErrOutOfRange: the access falls outside the BAR or the chip's DDR.
	ErrOutOfRange = errors.New("access out of range")
	// ErrTimeout: the DMA engine or an interrupt did not complete in time.
	ErrTimeout = errors.New("device timeout")
	// ErrClosed: the device is closed or gone.
	ErrClosed = errors.New("device closed")
	// ErrIO: any other failure reported by the driver.
	ErrIO = errors.New("device I/O error")
	// ErrNotShell: the endpoint does not run a compatible FaaS shell.
	ErrNotShell = errors.New("not a compatible FaaS shell")
	// ErrProgram: the PR controller refused a bitstream; the error is a
	// *ProgramError with the cause.
	ErrProgram = errors.New("programming failed")

	// Health conditions, reported by Chip.Health.
	ErrOverTemp    = errors.New("chip over temperature")
	ErrLinkDown    = errors.New("inter-chip link down")
	ErrPowerLost   = errors.New("chip lost power: role and DDR contents are gone")
	ErrWindowFault = errors.New("role accessed DDR outside its tenant window")
)

// ProgramError is a partial reconfiguration refused by the shell. The
// previous role is still loaded.
type ProgramError struct {
	Chip  int
	Cause shell.PRCause
	Bytes int64 // bytes the PR controller had accepted
}

func (e *ProgramError) Error() string {
	return fmt.Sprintf("chip %d: programming failed after %d bytes: %s (PR cause %d)", e.Chip, e.Bytes, e.Cause, e.Cause)
}

// Unwrap lets errors.Is(err, ErrProgram) match, and ErrOverTemp for a refusal
// because of temperature.
func (e *ProgramError) Unwrap() []error {
	if e.Cause == shell.PROverTemp {
		return []error{ErrProgram, ErrOverTemp}
	}
	return []error{ErrProgram}
}

// FromErrno classifies an error from the XDMA driver (or a backend that
// mirrors it) into this package's categories, keeping the original error in
// the chain.
func FromErrno(err error) error {
	if err == nil {
		return nil
	}
	var cat error
	var errno syscall.Errno
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		cat = ErrTimeout
	case errors.Is(err, os.ErrClosed), errors.Is(err, fs.ErrClosed):
		cat = ErrClosed
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &errno):
		// Chip checks alignment and bounds before it calls the driver, so
		// these are the driver's second opinion. EINVAL is not mapped to
		// ErrMisaligned: the driver also uses it for a wrong direction or a
		// bad device state. ETIMEDOUT from a DMA may also mean a signal
		// aborted the transfer.
		switch errno {
		case syscall.EPROTO:
			cat = ErrMisaligned
		case syscall.ENXIO:
			cat = ErrOutOfRange
		case syscall.ETIMEDOUT:
			cat = ErrTimeout
		case syscall.ENODEV, syscall.EBADF, syscall.EBUSY:
			cat = ErrClosed
		default:
			cat = ErrIO
		}
	default:
		cat = ErrIO
	}
	return fmt.Errorf("%w: %w", cat, err)
}
