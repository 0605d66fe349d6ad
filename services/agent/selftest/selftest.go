// Package selftest brings a chip up with the loopback role and proves that
// every path the agent depends on works: partial reconfiguration, role MMIO,
// tenant windows, DMA both ways, the role's own DDR access and its interrupt,
// and the CRC the role computes over what it read.
//
// The agent runs it when validating a board and after loading the loopback
// role; faasd validate runs it on every chip it finds.
package selftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"time"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// ErrFailed is wrapped by every check that found the chip misbehaving, as
// opposed to an error reaching the chip.
var ErrFailed = errors.New("self-test failed")

// Options tune a self-test. The zero value moves 64 MiB through tenant
// window 0.
type Options struct {
	// Size is how many bytes go through DMA and the role; a multiple of
	// 4 KiB. Zero means 64 MiB.
	Size int
	// Window is the tenant window the role uses.
	Window int
	// Step, if not nil, is told about each step as it ends.
	Step func(Step)
}

// Step is one finished step of a self-test.
type Step struct {
	Chip     int
	Name     string
	Duration time.Duration
	Detail   string
	Err      error
}

// Result summarises a passed self-test.
type Result struct {
	Chip       int
	Role       device.Role
	ConfigTime time.Duration // modeled or real configuration-port time
	Bytes      int
	CRC        uint32
	WriteRate  float64 // host-to-card bytes per second
	ReadRate   float64 // card-to-host bytes per second
	Steps      []Step
}

// Run programs the loopback bitstream bit into chip and checks it end to end.
// It leaves the loopback role loaded and window opts.Window open over the
// bytes it used.
func Run(ctx context.Context, chip *device.Chip, bit []byte, opts Options) (Result, error) {
	if opts.Size == 0 {
		opts.Size = 64 << 20
	}
	if opts.Size <= 0 || opts.Size%4096 != 0 || uint64(3*opts.Size) > chip.DDRSize() {
		return Result{}, fmt.Errorf("selftest: size %d must be a positive multiple of 4096 and a third of DDR at most", opts.Size)
	}
	r := Result{Chip: chip.Index(), Bytes: opts.Size}
	step := func(name string, f func() (string, error)) error {
		start := time.Now()
		detail, err := f()
		s := Step{Chip: chip.Index(), Name: name, Duration: time.Since(start), Detail: detail, Err: err}
		r.Steps = append(r.Steps, s)
		if opts.Step != nil {
			opts.Step(s)
		}
		if err != nil {
			return fmt.Errorf("selftest: chip %d: %s: %w", chip.Index(), name, err)
		}
		return nil
	}

	src, dst := uint64(0), uint64(opts.Size)
	data := make([]byte, opts.Size)
	rand.NewChaCha8([32]byte{byte(chip.Index())}).Read(data)
	want := crc32.ChecksumIEEE(data)

	steps := []struct {
		name string
		f    func() (string, error)
	}{
		{"health", func() (string, error) {
			s, err := chip.Sensors()
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%.1f °C, %.1f W, link %s", s.TempC, s.PowerW, map[bool]string{true: "up", false: "down"}[s.LinkUp]), chip.Health()
		}},
		{"program", func() (string, error) {
			res, err := chip.Program(ctx, bytes.NewReader(bit), nil)
			if err != nil {
				return "", err
			}
			r.Role, r.ConfigTime = res.Role, res.ConfigTime
			if res.Role.ID != loopback.ID {
				return "", fmt.Errorf("%w: loaded role %v, want loopback", ErrFailed, res.Role)
			}
			return fmt.Sprintf("%s, %d bytes, config port %v", res.Role, res.Bytes, res.ConfigTime), nil
		}},
		{"role registers", func() (string, error) {
			v, err := chip.RoleRead32(loopback.RegMagic)
			if err == nil && v != loopback.ID {
				err = fmt.Errorf("%w: role magic %#08x, want %#08x", ErrFailed, v, loopback.ID)
			}
			return "", err
		}},
		{"window", func() (string, error) {
			return fmt.Sprintf("window %d = [%#x, %#x)", opts.Window, src, dst+uint64(opts.Size)),
				chip.SetWindow(opts.Window, src, dst+uint64(opts.Size))
		}},
		{"dma write", func() (string, error) {
			start := time.Now()
			err := chip.Write(ctx, src, data)
			r.WriteRate = float64(len(data)) / time.Since(start).Seconds()
			return rate(r.WriteRate), err
		}},
		{"role copy", func() (string, error) {
			status, crc, err := copyWithRole(ctx, chip, src, dst, uint64(opts.Size), opts.Window)
			r.CRC = crc
			switch {
			case err != nil:
			case status != loopback.StatusDone:
				err = fmt.Errorf("%w: loopback status %#x", ErrFailed, status)
			case crc != want:
				err = fmt.Errorf("%w: role CRC %#08x, host CRC %#08x", ErrFailed, crc, want)
			}
			return fmt.Sprintf("crc32 %08x", crc), err
		}},
		{"dma read", func() (string, error) {
			got := make([]byte, opts.Size)
			start := time.Now()
			if err := chip.Read(ctx, dst, got); err != nil {
				return "", err
			}
			r.ReadRate = float64(len(got)) / time.Since(start).Seconds()
			if i := firstDiff(got, data); i >= 0 {
				return "", fmt.Errorf("%w: copy differs from byte %d of %d", ErrFailed, i, len(got))
			}
			return rate(r.ReadRate) + ", byte-exact", nil
		}},
	}
	for _, s := range steps {
		if err := step(s.name, s.f); err != nil {
			return r, err
		}
	}
	return r, nil
}

// copyWithRole has the loopback role copy n bytes and waits for its
// interrupt.
func copyWithRole(ctx context.Context, chip *device.Chip, src, dst, n uint64, win int) (status, crc uint32, err error) {
	for _, w := range loopback.Start(loopback.Copy, src, dst, n, win) {
		if err := chip.RoleWrite32(w.Off, w.Value); err != nil {
			return 0, 0, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chip.WaitIRQ(ctx, shell.IRQRole0); err != nil {
		return 0, 0, err
	}
	if status, err = chip.RoleRead32(loopback.RegStatus); err != nil {
		return 0, 0, err
	}
	crc, err = chip.RoleRead32(loopback.RegCRC)
	return status, crc, err
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

func rate(bps float64) string { return fmt.Sprintf("%.2f GB/s", bps/1e9) }
