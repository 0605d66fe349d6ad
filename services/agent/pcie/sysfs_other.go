//go:build !linux

package pcie

import (
	"errors"
	"fmt"
)

// readIDs fails: u-root's pkg/pci builds for Linux only, and this file exists
// so that the rest of the agent still builds elsewhere.
func (c *Chip) readIDs(dir string) error {
	return fmt.Errorf("reading %s: PCIe discovery needs Linux sysfs: %w", dir, errors.ErrUnsupported)
}
