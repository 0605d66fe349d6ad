package device

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// Role describes the role loaded in a chip's PR region.
type Role struct {
	ID      uint32 // 0 when the region is empty
	Version uint32 // major in bits 31:16, minor in bits 15:0
	Name    string // design name
}

// Empty reports whether no role is loaded.
func (r Role) Empty() bool { return r.ID == 0 }

func (r Role) String() string {
	if r.Empty() {
		return "(empty)"
	}
	return fmt.Sprintf("%s %d.%d (id %#08x)", r.Name, r.Version>>16, r.Version&0xffff, r.ID)
}

// Role reads which role is loaded.
func (c *Chip) Role() (Role, error) {
	w, err := c.readWords(shell.RegRoleID, shell.RegRoleVersion)
	if err != nil {
		return Role{}, err
	}
	name, err := c.readString(shell.RegRoleName, 24)
	if err != nil {
		return Role{}, err
	}
	return Role{ID: w[0], Version: w[1], Name: name}, nil
}

// ImageDigest reads the 32-byte image digest scratch register.
func (c *Chip) ImageDigest() ([32]byte, error) {
	var d [32]byte
	b, err := c.readBytes(shell.RegImageDigest, 32)
	copy(d[:], b)
	return d, err
}

// SetImageDigest writes the image digest scratch register.
func (c *Chip) SetImageDigest(d [32]byte) error {
	for i := 0; i < 32; i += 4 {
		if err := c.Write32(shell.RegImageDigest+uint32(i), leWord(d[i:])); err != nil {
			return err
		}
	}
	return nil
}

func leWord(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// Sensors are a chip's health readings.
type Sensors struct {
	TempC      float64
	VCCIntV    float64
	PowerW     float64
	Clock0MHz  float64
	Clock1MHz  float64
	TempLimitC float64
	LinkUp     bool
	LinkLanes  int
	LinkErrors uint32
	Alarms     uint32 // shell.Alarm* bits
}

// Sensors reads the chip's sensors and alarms.
func (c *Chip) Sensors() (Sensors, error) {
	w, err := c.readWords(shell.RegTemperature, shell.RegVCCInt, shell.RegPower, shell.RegClock0, shell.RegClock1,
		shell.RegTempLimit, shell.RegLinkStatus, shell.RegLinkErrors, shell.RegAlarm)
	if err != nil {
		return Sensors{}, err
	}
	return Sensors{
		TempC: float64(int32(w[0])) / 1000, VCCIntV: float64(w[1]) / 1000, PowerW: float64(w[2]) / 1000,
		Clock0MHz: float64(w[3]) / 1000, Clock1MHz: float64(w[4]) / 1000, TempLimitC: float64(int32(w[5])) / 1000,
		LinkUp: w[6]&shell.LinkUp != 0, LinkLanes: int(w[6]&shell.LinkLanesMask) >> 8, LinkErrors: w[7], Alarms: w[8],
	}, nil
}

// Health reports every abnormal condition of the chip, joined: ErrOverTemp,
// ErrLinkDown, ErrPowerLost, ErrWindowFault. Nil means healthy.
func (c *Chip) Health() error {
	w, err := c.readWords(shell.RegAlarm, shell.RegPowerCycles, shell.RegLinkStatus, shell.RegTemperature,
		shell.RegWindowFault, shell.RegWindowFaultAt, shell.RegWindowFaultAt+4)
	if err != nil {
		return err
	}
	alarm, cycles, link := w[0], w[1], w[2]
	var errs []error
	if alarm&shell.AlarmOverTemp != 0 {
		errs = append(errs, fmt.Errorf("chip %d: %w: %.1f °C", c.index, ErrOverTemp, float64(int32(w[3]))/1000))
	}
	if link&shell.LinkUp == 0 || alarm&shell.AlarmLinkDown != 0 {
		errs = append(errs, fmt.Errorf("chip %d: %w", c.index, ErrLinkDown))
	}
	if cycles != c.powerCycles || alarm&shell.AlarmPowerLoss != 0 {
		errs = append(errs, fmt.Errorf("chip %d: %w (power-ups: %d at open, %d now)", c.index, ErrPowerLost, c.powerCycles, cycles))
	}
	if w[4]&shell.WindowFaultValid != 0 {
		errs = append(errs, fmt.Errorf("chip %d: %w: %s through window %d at %#x", c.index, ErrWindowFault,
			map[bool]string{true: "write", false: "read"}[w[4]&shell.WindowFaultWrite != 0], w[4]&7, uint64(w[5])|uint64(w[6])<<32))
	}
	return errors.Join(errs...)
}

// ClearAlarms acknowledges the latched alarms and window fault, and accepts
// the chip's current power-up count as known. Alarms whose cause persists
// latch again at once.
func (c *Chip) ClearAlarms() error {
	if err := c.Write32(shell.RegAlarm, 0xffffffff); err != nil {
		return err
	}
	if err := c.Write32(shell.RegWindowFault, shell.WindowFaultValid); err != nil {
		return err
	}
	cycles, err := c.Read32(shell.RegPowerCycles)
	if err != nil {
		return err
	}
	c.powerCycles = cycles
	return nil
}

// SetWindow grants the role DMA access to DDR [base, limit) through tenant
// window n; limit == base disables the window.
func (c *Chip) SetWindow(n int, base, limit uint64) error {
	if n < 0 || n >= shell.Windows {
		return fmt.Errorf("%w: chip %d: no tenant window %d", ErrOutOfRange, c.index, n)
	}
	if base > limit || limit > c.ddr {
		return fmt.Errorf("%w: chip %d: window [%#x, %#x) outside the %d-byte DDR", ErrOutOfRange, c.index, base, limit, c.ddr)
	}
	ctl, err := c.Read32(shell.RegWindowControl)
	if err != nil {
		return err
	}
	// Disable first so the role never sees a half-written window.
	if err := c.Write32(shell.RegWindowControl, ctl&^(1<<n)); err != nil {
		return err
	}
	if limit == base {
		return nil
	}
	for _, w := range []struct {
		off uint32
		v   uint64
	}{{shell.WindowBase(n), base}, {shell.WindowLimit(n), limit}} {
		if err := c.Write32(w.off, uint32(w.v)); err != nil {
			return err
		}
		if err := c.Write32(w.off+4, uint32(w.v>>32)); err != nil {
			return err
		}
	}
	return c.Write32(shell.RegWindowControl, ctl|1<<n)
}

// Scrub zeroes the chip's whole DDR with the shell's scrubber and waits for it.
func (c *Chip) Scrub(ctx context.Context) error {
	if err := c.Write32(shell.RegScrubControl, shell.ScrubStart); err != nil {
		return err
	}
	return c.poll(ctx, shell.RegScrubStatus, func(v uint32) bool { return v&shell.ScrubBusy == 0 })
}

// poll reads off until done says so, backing off from 10 µs to 5 ms: the
// shell's operations take from microseconds (simulated) to a second (a
// real DDR scrub).
func (c *Chip) poll(ctx context.Context, off uint32, done func(uint32) bool) error {
	wait := 10 * time.Microsecond
	for {
		v, err := c.Read32(off)
		if err != nil {
			return err
		}
		if done(v) {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("chip %d: waiting for register %#x: %w", c.index, off, FromErrno(ctx.Err()))
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
}
