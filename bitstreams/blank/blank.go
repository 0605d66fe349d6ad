// Package blank is the blank role: a dynamic region with no logic, which the
// agent loads when it clears a slot (AWS's "clear" loads a blank image the
// same way). Its registers read 0 apart from MAGIC, and it never touches DDR,
// so a cleared chip cannot act on anything a previous tenant left behind.
//
// Registers, at byte offsets from the role window (shell.RoleBase):
//
//	0x00 MAGIC  RO  0x424c4e4b ("BLNK")
//
// The functional model for the simulator is in the model subpackage.
package blank

import (
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

const (
	// Name is the design name of the role's bitstreams.
	Name = "blank"
	// ID is the value of the shell's ROLE_ID register, and of MAGIC, once
	// the blank role is loaded.
	ID = 0x424c4e4b
	// Version is 1.0.
	Version = 1 << 16
	// RegMagic is the offset of MAGIC.
	RegMagic = 0x00
)

// frameBytes is the size of the blank role's configuration frames: a blank
// region still has every frame written, but with the smallest design the
// tools emit.
const frameBytes = 256 << 10

// Bitstream returns the blank role's partial bitstream for part.
func Bitstream(part shell.Part) ([]byte, error) {
	return bitfile.Simulated(Name, part, frameBytes)
}
