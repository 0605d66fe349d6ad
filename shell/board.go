package shell

import "fmt"

// Shell identity. Version v1.0 of this layout is frozen.
const (
	Name         = "faas-shell"
	VersionMajor = 1
	VersionMinor = 0
	// Magic is the value of the Magic register: ASCII "FAAS".
	Magic uint32 = 0x46414153
)

// Version is the shell version as read from the Version register
// (major in bits 31:16, minor in bits 15:0).
const Version uint32 = VersionMajor<<16 | VersionMinor

// InterfaceUUID identifies the PR interface of shell v1: roles built against
// this UUID fit every board running shell v1, whatever its serial number.
var InterfaceUUID = [16]byte{
	0x6f, 0x1e, 0x3c, 0x52, 0x8a, 0x47, 0x4e, 0x0b,
	0x9d, 0x21, 0xf4, 0xa8, 0x51, 0x0c, 0x7e, 0x33,
}

// PCIe identity. Each chip is its own PCIe endpoint behind the board's on-card
// switch; both chips of a board carry the same IDs, the chip index is read from
// the ChipIndex register.
const (
	VendorXilinx = 0x10ee
	// DeviceID is the XDMA endpoint of a shell v1 chip (Gen3 x16).
	DeviceID = 0x903f
	// SubsystemVendor is the subsystem vendor of every FaaS board.
	SubsystemVendor = 0x10ee
	// ClassCode is "processing accelerator" (0x12), as reported in sysfs.
	ClassCode = 0x120000
)

// BoardModel describes one model of dual-chip board.
type BoardModel struct {
	Name        string // e.g. "faas-vu9p-dual"
	SubsystemID uint16 // PCIe subsystem device ID naming the model
	ID          uint32 // value of the BoardID register
	Parts       [ChipsPerBoard]Part
	DDRSize     uint64 // bytes of DDR attached to each chip
}

// ChipsPerBoard is fixed by shell v1: every board has two chips.
const ChipsPerBoard = 2

// Part is an FPGA part as named by Xilinx tools.
type Part struct {
	Name   string // full part name, e.g. "xcvu9p-flgb2104-2-i"
	IDCode uint32 // JTAG IDCODE, also checked by the configuration engine
	// ConfigRate is the configuration-port rate in bytes per second used to
	// model programming time (ICAP, 32 bits wide, at the part's clock).
	ConfigRate uint64
	SLRs       int // super logic regions (dies)
}

// Parts known to shell v1.
var (
	PartVU9P  = Part{Name: "xcvu9p-flgb2104-2-i", IDCode: 0x14b31093, ConfigRate: 500_000_000, SLRs: 3}
	PartKU15P = Part{Name: "xcku15p-ffve1517-2-e", IDCode: 0x04a56093, ConfigRate: 400_000_000, SLRs: 1}
)

// Board models known to shell v1.
var (
	ModelVU9PDual = BoardModel{
		Name: "faas-vu9p-dual", SubsystemID: 0x0f01, ID: 0x0000f001,
		Parts: [ChipsPerBoard]Part{PartVU9P, PartVU9P}, DDRSize: 16 << 30,
	}
	ModelKU15PDual = BoardModel{
		Name: "faas-ku15p-dual", SubsystemID: 0x0f02, ID: 0x0000f002,
		Parts: [ChipsPerBoard]Part{PartKU15P, PartKU15P}, DDRSize: 8 << 30,
	}
)

// Models lists every board model of shell v1.
var Models = []BoardModel{ModelVU9PDual, ModelKU15PDual}

// ModelBySubsystem returns the board model with the given PCIe subsystem ID.
func ModelBySubsystem(id uint16) (BoardModel, error) {
	for _, m := range Models {
		if m.SubsystemID == id {
			return m, nil
		}
	}
	return BoardModel{}, fmt.Errorf("shell: unknown board subsystem id %#04x", id)
}

// ModelByName returns the board model with the given name.
func ModelByName(name string) (BoardModel, error) {
	for _, m := range Models {
		if m.Name == name {
			return m, nil
		}
	}
	return BoardModel{}, fmt.Errorf("shell: unknown board model %q", name)
}

// PartByName returns the part with the given full name.
func PartByName(name string) (Part, error) {
	for _, p := range []Part{PartVU9P, PartKU15P} {
		if p.Name == name {
			return p, nil
		}
	}
	return Part{}, fmt.Errorf("shell: unknown part %q", name)
}
