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
			// Take the stream under mu: a power loss may reset the
			// controller as soon as mu is released.
			parser, streamed, epoch := c.pr.parser, c.pr.bytes, c.powerCycles
			c.mu.Unlock()
			c.prFinish(parser, streamed, epoch)
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
		feed, rest := p, []byte(nil)
		limit, known := c.streamLimit()
		switch {
		case !known:
			// Until the header is in, the end of the file is unknown: feed
			// it byte by byte so that padding after a file whose data is
			// shorter than a chunk is never mistaken for data. The header
			// is small; this costs nothing on the frames.
			feed, rest = p[:1], p[1:]
		case int64(len(p)) > limit-c.pr.bytes:
			// Feed the parser only the file; what follows it in the last
			// chunk must be alignment padding.
			n := max(limit-c.pr.bytes, 0)
			feed, rest = p[:n], p[n:]
		}
		// The file first: a fault inside it comes before whatever follows
		// it, whatever the chunking.
		_, err := c.pr.parser.Write(feed)
		c.pr.bytes += int64(len(feed))
		if err == nil {
			err = c.checkHeader()
		}
		if err != nil {
			fire = c.prFail(fire, prCause(err), err)
			return nil
		}
		if known && len(rest) > 0 {
			// Past the end of the file (or PR_STREAM_LEN: software declared
			// how much it streams) the DMA may only round up to its
			// alignment, with zeros; the padding is dropped.
			if len(rest) > maxPadding || !allZero(rest) {
				fire = c.prFail(fire, shell.PROverflow, fmt.Errorf("%d bytes past the end of the bitstream at offset %d", len(rest), c.pr.bytes))
			}
			return nil
		}
		p = rest
	}
	return nil
}

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
// epoch is POWER_CYCLES when END was written: if power is lost meanwhile,
// the controller was reset and the result is dropped. The previous role
// stays loaded, decoupled, until the new one has started: if the new one
// fails, nothing changed.
func (c *Chip) prFinish(parser *bitfile.Parser, streamed int64, epoch uint32) {
	c.mu.Lock()
	failProgram := c.failProgram
	c.failProgram = false
	overTemp := c.alarm&shell.AlarmOverTemp != 0
	c.mu.Unlock()

	res, err := parser.Close()
	var (
		role Role
		rc   RoleConfig
		gen  uint64
	)
	cause, model, err := c.prVerdict(res, err, overTemp, failProgram)
	duration := time.Duration(float64(streamed) / float64(c.part.ConfigRate) * float64(time.Second))
	if cause == shell.PROK && c.board.cfg.RealTime {
		t := time.NewTimer(duration)
		select {
		case <-t.C:
		case <-c.board.closed:
			t.Stop()
		}
	}
	if cause == shell.PROK {
		role, rc, gen, err = c.startRole(res, model)
		if err != nil {
			cause = shell.PRRoleFailed
		}
	}

	c.mu.Lock()
	gone := c.powerCycles != epoch
	select {
	case <-c.board.closed:
		gone = true
	default:
	}
	if gone {
		// Power was lost (or the board closed) while the stream was
		// checked: the region is empty and the controller reset.
		c.mu.Unlock()
		if role != nil {
			role.Close()
		}
		return
	}
	var fire []int
	var old Role
	if cause != shell.PROK {
		fire = c.prFail(fire, cause, err)
	} else {
		old = c.role
		c.role, c.model, c.roleGen, c.roleCfg = role, model, gen, rc
		c.digest = [8]uint32{}
		c.pr.state, c.pr.cause, c.pr.err, c.pr.parser = shell.PRDone, shell.PROK, nil, nil
		c.pr.crc = res.CRC
		c.pr.duration = duration
		c.pr.count++
		fire = c.latchIRQ(fire, shell.IRQPR)
	}
	c.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if cause == shell.PROK {
		c.board.persist()
	}
	c.fire(fire)
}

// prVerdict is the outcome of a complete stream, err its parser's: a
// failure cause and why, or PROK and the model of the role it holds.
func (c *Chip) prVerdict(res bitfile.Result, err error, overTemp, failProgram bool) (shell.PRCause, RoleModel, error) {
	switch {
	case err != nil:
		return prCause(err), RoleModel{}, err
	case res.IDCode != c.part.IDCode:
		return shell.PRIDCode, RoleModel{}, fmt.Errorf("IDCODE %#08x written, chip is %#08x", res.IDCode, c.part.IDCode)
	case overTemp:
		return shell.PROverTemp, RoleModel{}, errors.New("the chip went over temperature during the stream")
	case failProgram:
		return shell.PRConfigError, RoleModel{}, errors.New("INIT_B asserted by the configuration engine (injected)")
	}
	name := res.Header.DesignName()
	model, ok := c.board.cfg.Roles.Lookup(name)
	if !ok {
		return shell.PRUnknownRole, RoleModel{}, fmt.Errorf("no role model for design %q", name)
	}
	return shell.PROK, model, nil
}

// startRole starts the role of a good stream with its model. The new role
// gets a generation of its own; its Env goes live when it replaces the old
// role.
func (c *Chip) startRole(res bitfile.Result, model RoleModel) (Role, RoleConfig, uint64, error) {
	c.mu.Lock()
	c.genSeq++
	gen := c.genSeq
	c.mu.Unlock()
	opts := map[string]string{}
	for _, o := range res.Header.Options() {
		opts[o.Key] = o.Value
	}
	rc := RoleConfig{
		Design: res.Header.Design, Options: opts, Part: c.part,
		FrameBytes: res.FrameBytes, FrameDigest: res.FrameDigest,
	}
	role, err := model.New(&Env{chip: c, gen: gen}, rc)
	if err != nil {
		return nil, rc, gen, fmt.Errorf("role %q: %w", model.Name, err)
	}
	return role, rc, gen, nil
}

// PRError returns why the last partial reconfiguration failed, in more detail
// than the PR_STATUS cause, or nil.
func (c *Chip) PRError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pr.err
}

func allZero(p []byte) bool { return len(bytes.Trim(p, "\x00")) == 0 }
