// Package boards opens the real FPGA boards of a host: it discovers them in
// sysfs (package pcie) and opens each chip through the XDMA driver's device
// nodes (package device/xdma).
package boards

import (
	"context"
	"errors"
	"fmt"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/services/agent/device/xdma"
	"github.com/fpga-faas/faas/services/agent/pcie"
	"github.com/fpga-faas/faas/shell"
)

// Host says where to look for boards. The zero value looks at /sys and /dev.
type Host struct {
	SysfsRoot string // "" means /sys
	DevRoot   string // "" means /dev
	// Opener opens device nodes; nil means the operating system's files.
	Opener xdma.Opener
}

// Open opens every usable board of the host. Boards that are found but cannot
// be used (a chip missing, no driver bound, not a FaaS shell) are reported in
// the joined error next to the boards that opened.
func (h Host) Open(ctx context.Context) ([]*device.Board, error) {
	found, scanErr := pcie.Scanner{SysfsRoot: h.SysfsRoot}.Boards(ctx)
	errs := []error{scanErr}
	var out []*device.Board
	for _, fb := range found {
		nodes := make([]xdma.Nodes, 0, len(fb.Chips))
		for _, c := range fb.Chips {
			if c.XDMA == "" {
				errs = append(errs, fmt.Errorf("boards: %s: chip %s has no XDMA device nodes (driver %q bound)", fb.ID, c.BDF, c.Driver))
				nodes = nil
				break
			}
			nodes = append(nodes, xdmaNodes(c, c.Nodes(h.DevRoot)))
		}
		if nodes == nil {
			continue
		}
		b, err := xdma.OpenBoard(fb.ID, fb.Model, h.Opener, nodes)
		if err != nil {
			errs = append(errs, fmt.Errorf("boards: %s: %w", fb.ID, err))
			continue
		}
		out = append(out, b)
	}
	return out, errors.Join(errs...)
}

// xdmaNodes indexes a chip's event nodes by IRQ line, as the backend wants
// them.
func xdmaNodes(c pcie.Chip, p pcie.NodePaths) xdma.Nodes {
	n := xdma.Nodes{User: p.User, Control: p.Control, H2C: p.H2C, C2H: p.C2H, Events: make([]string, shell.IRQLines)}
	for i, line := range c.Events {
		if line >= 0 && line < shell.IRQLines {
			n.Events[line] = p.Events[i]
		}
	}
	return n
}
