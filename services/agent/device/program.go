package device

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// streamChunk is how much of a bitstream goes to the PR port per DMA: large
// enough that per-transfer overhead vanishes, small enough that a refused
// stream is noticed early.
const streamChunk = 4 << 20

// ProgramResult reports a successful partial reconfiguration.
type ProgramResult struct {
	Role  Role
	Bytes int64 // bytes streamed
	// ConfigTime is the time the chip's configuration port needed, as
	// reported by the shell (PR_TIME_US).
	ConfigTime time.Duration
	CRC        uint32
}

// Program loads a partial bitstream in .bit format from r into the chip's PR
// region through the shell's protocol: decouple, begin, stream by DMA to the
// PR port, end, check, recouple. progress, if not nil, is called with the
// bytes streamed so far.
//
// On failure the previous role is still loaded and recoupled; a refusal by
// the shell is a *ProgramError.
func (c *Chip) Program(ctx context.Context, r io.Reader, progress func(int64)) (res ProgramResult, err error) {
	if err := c.Write32(shell.RegPRControl, shell.PRDecouple); err != nil {
		return res, err
	}
	defer func() {
		// Recouple whatever happened: on success the new role, on failure the
		// old one, which the shell kept.
		if rerr := c.Write32(shell.RegPRControl, 0); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err := c.Write32(shell.RegPRStreamLen, 0); err != nil {
		return res, err
	}
	if err := c.Write32(shell.RegPRControl, shell.PRDecouple|shell.PRBegin); err != nil {
		return res, err
	}
	if err := c.prCheck(false); err != nil {
		return res, err
	}

	n, err := c.stream(ctx, r, progress)
	res.Bytes = n
	if err != nil {
		if aerr := c.Write32(shell.RegPRControl, shell.PRDecouple|shell.PRAbort); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return res, err
	}
	if err := c.Write32(shell.RegPRControl, shell.PRDecouple|shell.PREnd); err != nil {
		return res, err
	}
	if err := c.poll(ctx, shell.RegPRStatus, func(v uint32) bool { s, _ := shell.PRStatus(v); return s != shell.PRBusy }); err != nil {
		return res, err
	}
	if err := c.prCheck(true); err != nil {
		return res, err
	}
	w, err := c.readWords(shell.RegPRTime, shell.RegPRCRC)
	if err != nil {
		return res, err
	}
	res.ConfigTime, res.CRC = time.Duration(w[0])*time.Microsecond, w[1]
	res.Role, err = c.Role()
	return res, err
}

// stream copies the bitstream to the PR port, padding the last chunk to the
// DMA granularity, and stops as soon as the shell refuses the stream.
func (c *Chip) stream(ctx context.Context, r io.Reader, progress func(int64)) (int64, error) {
	buf := make([]byte, streamChunk)
	var total int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			p := buf[:n]
			if pad := uint64(n) % c.align; pad != 0 {
				p = buf[:n+int(c.align-pad)]
				clear(p[n:])
			}
			if err := c.port.H2C(ctx, 0, p, shell.PRStreamAddr); err != nil {
				return total, fmt.Errorf("chip %d: streaming bitstream at byte %d: %w", c.index, total, FromErrno(err))
			}
			total += int64(n)
			if progress != nil {
				progress(total)
			}
			if err := c.prCheck(false); err != nil {
				return total, err
			}
		}
		switch {
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return total, nil
		case rerr != nil:
			return total, fmt.Errorf("chip %d: reading bitstream at byte %d: %w", c.index, total, rerr)
		}
	}
}

// prCheck turns an error state of the PR controller into a *ProgramError.
// With final set, anything but done is an error.
func (c *Chip) prCheck(final bool) error {
	w, err := c.readWords(shell.RegPRStatus, shell.RegPRBytes)
	if err != nil {
		return err
	}
	state, cause := shell.PRStatus(w[0])
	if state == shell.PRError || (final && state != shell.PRDone) {
		return &ProgramError{Chip: c.index, Cause: cause, Bytes: int64(w[1])}
	}
	return nil
}
