package selftest

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/bitstreams/roles"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// loadedBytes is what the loopback check of Loaded moves: enough to cross
// several DMA descriptors, small enough to cost well under a millisecond.
const loadedBytes = 64 << 10

// Loaded checks a role that a load has just programmed, before the slot is
// handed to a tenant: the shell reports the role the image promised (its
// catalog id and major version) and the role answers on its registers. The
// loopback role also copies and checksums a buffer through a tenant window;
// the check zeroes what it wrote and closes the window again.
func Loaded(ctx context.Context, chip *device.Chip, name, version string) error {
	want, ok := roles.Lookup(name)
	if !ok {
		return fmt.Errorf("%w: chip %d: role %q is not in the catalog", ErrFailed, chip.Index(), name)
	}
	got, err := chip.Role()
	if err != nil {
		return fmt.Errorf("selftest: chip %d: %w", chip.Index(), err)
	}
	if got.ID != want.ID {
		return fmt.Errorf("%w: chip %d: shell reports role %v, the image promised %s", ErrFailed, chip.Index(), got, name)
	}
	if major, err := strconv.Atoi(strings.SplitN(version, ".", 2)[0]); err == nil && uint32(major) != got.Version>>16 {
		return fmt.Errorf("%w: chip %d: role version %d.%d, the image promised %s", ErrFailed, chip.Index(), got.Version>>16, got.Version&0xffff, version)
	}
	switch got.ID {
	case loopback.ID:
		return loopbackCheck(ctx, chip)
	case alidnn.ID:
		magic, err := chip.RoleRead32(alidnn.RegMagic)
		if err == nil && magic != alidnn.ID {
			err = fmt.Errorf("%w: chip %d: AliDNN MAGIC %#08x", ErrFailed, chip.Index(), magic)
		}
		if cfg, e := chip.RoleRead32(alidnn.RegConfig); err == nil && (e != nil || cfg == 0) {
			err = fmt.Errorf("%w: chip %d: AliDNN CONFIG %#08x %v", ErrFailed, chip.Index(), cfg, e)
		}
		return err
	}
	return nil
}

func loopbackCheck(ctx context.Context, chip *device.Chip) error {
	const win = shell.Windows - 1
	top := chip.DDRSize()
	src, dst := top-2*loadedBytes, top-loadedBytes
	data := make([]byte, loadedBytes)
	rand.NewChaCha8([32]byte{'l', 'o', 'a', 'd'}).Read(data)
	if err := chip.SetWindow(win, src, top); err != nil {
		return err
	}
	defer chip.SetWindow(win, 0, 0)
	if err := chip.Write(ctx, src, data); err != nil {
		return err
	}
	status, crc, err := copyWithRole(ctx, chip, src, dst, loadedBytes, win)
	switch {
	case err != nil:
		return err
	case status != loopback.StatusDone:
		return fmt.Errorf("%w: chip %d: loopback status %#x", ErrFailed, chip.Index(), status)
	case crc != crc32.ChecksumIEEE(data):
		return fmt.Errorf("%w: chip %d: role CRC %#08x, host CRC %#08x", ErrFailed, chip.Index(), crc, crc32.ChecksumIEEE(data))
	}
	return chip.Write(ctx, src, make([]byte, 2*loadedBytes))
}
