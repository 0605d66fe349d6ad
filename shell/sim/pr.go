package sim

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// prController is the state of a chip's partial-reconfiguration controller.
// It lives inside Chip and is guarded by Chip.mu.
type prController struct {
	state     uint32
	cause     shell.PRCause
	bytes     int64
	crc       uint32
	duration  time.Duration // configuration-port time of the last stream
	count     uint32
	streamLen uint32
	parser    *bitfile.Parser
	err       error // first error of the current stream, for Chip.PRError
}

func (p *prController) status() uint32 { return p.state | uint32(p.cause)<<8 }

// maxPadding is how many zero bytes may follow the .bit file in the last DMA
// chunk: the engine moves multiples of shell.DMAAlign bytes.
const maxPadding = shell.DMAAlign - 1

// prControl handles a write of PR_CONTROL.
func (c *Chip) prControl(v uint32) {
	c.prMu.Lock()
	defer c.prMu.Unlock()
	c.mu.Lock()
	c.decoupled = v&shell.PRDecouple != 0
	var fire []int
	switch {
	case v&shell.PRAbort != 0:
		if c.pr.state == shell.PRBusy {
			fire = c.prFail(fire, shell.PRAborted, errors.New("aborted by software"))
		}
	case v&shell.PRBegin != 0:
		switch {
		case !c.decoupled:
			fire = c.prFail(fire, shell.PRNotDecoupled, errors.New("BEGIN while the PR region is coupled"))
		case c.alarm&shell.AlarmOverTemp != 0:
			fire = c.prFail(fire, shell.PROverTemp, fmt.Errorf("temperature %d m°C at or above the %d m°C limit", c.temperature(), c.tempLimit))
		default:
			c.pr.state, c.pr.cause, c.pr.err = shell.PRBusy, shell.PROK, nil
			c.pr.bytes, c.pr.crc = 0, 0
			c.pr.parser = bitfile.NewParser(bitfile.Limits{})
		}
	case v&shell.PREnd != 0:
		if c.pr.state == shell.PRBusy {
			c.mu.Unlock()
			c.prFinish()
			return
		}
	}
	c.mu.Unlock()
	c.fire(fire)
}

// prFail ends the current stream with cause; the previous role stays.
// Callers hold mu.
func (c *Chip) prFail(fire []int, cause shell.PRCause, err error) []int {
	c.pr.state, c.pr.cause, c.pr.parser = shell.PRError, cause, nil
	c.pr.err = fmt.Errorf("sim: chip %d: PR %s: %w", c.index, cause, err)
	return c.latchIRQ(fire, shell.IRQPR)
}

// prStream accepts bytes DMAed to the PR stream port.
func (c *Chip) prStream(p []byte) error {
	c.prMu.Lock()
	defer c.prMu.Unlock()
	var fire []int
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.fire(fire)
	}()
	switch {
	case c.pr.state == shell.PRError:
		return nil // the FIFO drains a failed stream until software notices
	case c.pr.state != shell.PRBusy:
		return c.fail("h2c", shell.PRStreamAddr, syscall.EIO, "PR stream port written without BEGIN")
	}
	for len(p) > 0 && c.pr.state == shell.PRBusy {
		feed := p
		limit, known := c.streamLimit()
		switch {
		case !known:
			// Until the header is in, the end of the file is unknown: feed
			// small pieces so that padding after a short file is never
			// mistaken for data.
			feed = p[:min(len(p), headerStep)]
		case int64(len(p)) > limit-c.pr.bytes:
			// Feed the parser only the file; what follows it in the last
			// chunk must be alignment padding.
			feed = p[:max(limit-c.pr.bytes, 0)]
			if rest := p[len(feed):]; c.pr.streamLen == 0 && (len(rest) > maxPadding || !allZero(rest)) {
				c.pr.bytes += int64(len(feed))
				fire = c.prFail(fire, shell.PROverflow, fmt.Errorf("%d bytes past the end of the bitstream at offset %d", len(rest), c.pr.bytes))
				return nil
			}
			p = feed // the padding is dropped
		}
		_, err := c.pr.parser.Write(feed)
		c.pr.bytes += int64(len(feed))
		if err == nil {
			err = c.checkHeader()
		}
		if err != nil {
			fire = c.prFail(fire, prCause(err), err)
			return nil
		}
		p = p[len(feed):]
	}
	return nil
}

// headerStep is how many bytes the controller feeds the parser at a time
// while the header is still arriving.
const headerStep = 64

// streamLimit is the number of bytes of the stream that belong to the file:
// PR_STREAM_LEN if software set it, else the header's size plus its data
// length once the header is known. Callers hold mu.
func (c *Chip) streamLimit() (int64, bool) {
	if c.pr.streamLen != 0 {
		return int64(c.pr.streamLen), true
	}
	return c.pr.parser.FileSize()
}

// checkHeader rejects a bitstream for another part or a full bitstream as soon
// as its header has arrived, before any frame reaches the region.
func (c *Chip) checkHeader() error {
	h, ok := c.pr.parser.Header()
	if !ok {
		return nil
	}
	if !h.ForPart(c.part) {
		return fmt.Errorf("%w: bitstream part %q, chip part %q", errPartMismatch, h.Part, c.part.Name)
	}
	if !h.Partial() {
		return fmt.Errorf("%w: design %q lacks PARTIAL=TRUE", errNotPartial, h.Design)
	}
	return nil
}

var (
	errPartMismatch = errors.New("part mismatch")
	errNotPartial   = errors.New("not a partial bitstream")
)

func prCause(err error) shell.PRCause {
	for _, m := range []struct {
		err   error
		cause shell.PRCause
	}{
		{errPartMismatch, shell.PRPartMismatch},
		{errNotPartial, shell.PRNotPartial},
		{bitfile.ErrHeader, shell.PRBadHeader},
		{bitfile.ErrNoSync, shell.PRNoSync},
		{bitfile.ErrTruncated, shell.PRTruncated},
		{bitfile.ErrOverflow, shell.PROverflow},
		{bitfile.ErrCRC, shell.PRBadCRC},
		{bitfile.ErrNoCRC, shell.PRNoCRC},
		{bitfile.ErrPacket, shell.PRBadPacket},
	} {
		if errors.Is(err, m.err) {
			return m.cause
		}
	}
	return shell.PRBadPacket
}

// prFinish checks a complete stream and, if it is good, replaces the role.
func (c *Chip) prFinish() {
	c.mu.Lock()
	parser, streamed := c.pr.parser, c.pr.bytes
	failProgram := c.failProgram
	c.failProgram = false
	c.mu.Unlock()

	res, err := parser.Close()
	var (
		cause = shell.PROK
		model RoleModel
		role  Role
		gen   uint64
	)
	switch {
	case err != nil:
		cause = prCause(err)
	case res.IDCode != c.part.IDCode:
		cause, err = shell.PRIDCode, fmt.Errorf("IDCODE %#08x written, chip is %#08x", res.IDCode, c.part.IDCode)
	case failProgram:
		cause, err = shell.PRConfigError, errors.New("INIT_B asserted by the configuration engine (injected)")
	}
	if cause == shell.PROK {
		var ok bool
		name := res.Header.DesignName()
		if model, ok = c.board.cfg.Roles.Lookup(name); !ok {
			cause, err = shell.PRUnknownRole, fmt.Errorf("no role model for design %q", name)
		}
	}
	duration := time.Duration(float64(streamed) / float64(c.part.ConfigRate) * float64(time.Second))
	if cause == shell.PROK && c.board.cfg.RealTime {
		time.Sleep(duration)
	}
	if cause == shell.PROK {
		// The old role goes first: on hardware the region is overwritten.
		c.unloadRole()
		c.mu.Lock()
		gen = c.roleGen
		c.mu.Unlock()
		opts := map[string]string{}
		for _, o := range res.Header.Options() {
			opts[o.Key] = o.Value
		}
		role, err = model.New(&Env{chip: c, gen: gen}, RoleConfig{
			Design: res.Header.Design, Options: opts, Part: c.part,
			FrameBytes: res.FrameBytes, FrameDigest: res.FrameDigest,
		})
		if err != nil {
			cause = shell.PRRoleFailed
		}
	}

	c.mu.Lock()
	var fire []int
	if cause != shell.PROK {
		fire = c.prFail(fire, cause, err)
	} else if gen != c.roleGen {
		// Power was lost while the role started.
		c.mu.Unlock()
		c.fire(fire)
		role.Close()
		return
	} else {
		c.role, c.model = role, model
		c.digest = [8]uint32{}
		c.pr.state, c.pr.cause, c.pr.err, c.pr.parser = shell.PRDone, shell.PROK, nil, nil
		c.pr.crc = res.CRC
		c.pr.duration = duration
		c.pr.count++
		fire = c.latchIRQ(fire, shell.IRQPR)
	}
	c.mu.Unlock()
	c.fire(fire)
}

// PRError returns why the last partial reconfiguration failed, in more detail
// than the PR_STATUS cause, or nil.
func (c *Chip) PRError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pr.err
}

func allZero(p []byte) bool { return len(bytes.Trim(p, "\x00")) == 0 }
