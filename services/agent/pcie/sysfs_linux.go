package pcie

import (
	"fmt"

	"github.com/u-root/u-root/pkg/pci"
)

// readIDs sets c's vendor and device IDs from u-root's parse of the function's
// sysfs directory, which also checks its class, IRQ and resource attributes.
func (c *Chip) readIDs(dir string) error {
	p, err := pci.OnePCI(dir)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", dir, err)
	}
	c.Vendor, c.Device = p.Vendor, p.Device
	return nil
}
