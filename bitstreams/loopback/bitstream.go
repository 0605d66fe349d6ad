package loopback

import (
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// Header is the .bit header of the loopback role's partial bitstream for part.
func Header(part shell.Part) bitfile.Header { return bitfile.RoleHeader(Name, part) }

// Bitstream returns a partial bitstream of the loopback role for part, with
// frameBytes bytes of configuration frames (see bitfile.Simulated).
func Bitstream(part shell.Part, frameBytes int) ([]byte, error) {
	return bitfile.Simulated(Name, part, frameBytes)
}
