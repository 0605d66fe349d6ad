// Package pcie discovers the FaaS boards of a host from Linux sysfs.
//
// Every chip of a board is its own XDMA endpoint (shell.VendorXilinx:
// shell.DeviceID) behind the board's on-card PCIe switch, so a board is found
// as the set of such functions that share a switch upstream port:
//
//	/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0
//	                        root port    upstream     downstream   chip
//
// Functions are parsed with u-root's pkg/pci. A board that is found but cannot
// be used (a chip missing, an unknown subsystem ID) is reported as a
// *BoardError without hiding the boards that are fine.
package pcie

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/shell"
)

// Board is one FaaS card: two chips behind one PCIe switch.
type Board struct {
	ID    string // BDF of the switch upstream port, e.g. "0000:01:00.0"
	Model shell.BoardModel
	Chips []Chip // ordered by Index
}

// Chip is one XDMA endpoint of a board.
type Chip struct {
	BDF string // e.g. "0000:03:00.0"
	// Index is the chip's position on the board by the BDF order of the
	// switch downstream ports. It is topology only: the shell's ChipIndex
	// register is the authority, and the agent should check the two agree.
	Index int

	Vendor, Device                   uint16
	SubsystemVendor, SubsystemDevice uint16

	Driver   string // name of the bound driver, "" if none
	NUMANode int    // -1 if the kernel does not know

	// XDMA is the XDMA driver's instance name, e.g. "xdma0" for
	// /dev/xdma0_user; "" if the driver has created no nodes for this chip.
	XDMA string
	// H2C, C2H and Events are the channel numbers K of the
	// xdmaN_h2c_K, xdmaN_c2h_K and xdmaN_events_K nodes, ascending.
	H2C, C2H, Events []int
}

// NodePaths are the character devices of one chip's XDMA instance.
type NodePaths struct {
	User    string // MMIO of the user BAR
	Control string // MMIO of the XDMA config BAR
	// H2C, C2H and Events hold one path per channel, in the order of the
	// chip's H2C, C2H and Events numbers.
	H2C, C2H, Events []string
}

// Nodes returns the paths of the chip's XDMA device nodes under devRoot
// ("" means "/dev"). It returns the zero NodePaths if c.XDMA is empty.
func (c Chip) Nodes(devRoot string) NodePaths {
	if c.XDMA == "" {
		return NodePaths{}
	}
	if devRoot == "" {
		devRoot = "/dev"
	}
	node := func(suffix string) string { return filepath.Join(devRoot, c.XDMA+"_"+suffix) }
	channels := func(kind string, ks []int) []string {
		var paths []string
		for _, k := range ks {
			paths = append(paths, node(kind+"_"+strconv.Itoa(k)))
		}
		return paths
	}
	return NodePaths{
		User:    node("user"),
		Control: node("control"),
		H2C:     channels("h2c", c.H2C),
		C2H:     channels("c2h", c.C2H),
		Events:  channels("events", c.Events),
	}
}

// BoardError reports a board that was found but cannot be used.
type BoardError struct {
	ID   string   // BDF of the switch upstream port
	BDFs []string // the board's XDMA functions that were found
	Err  error
}

func (e *BoardError) Error() string {
	return fmt.Sprintf("pcie: board %s (%s): %v", e.ID, strings.Join(e.BDFs, ", "), e.Err)
}

func (e *BoardError) Unwrap() error { return e.Err }
