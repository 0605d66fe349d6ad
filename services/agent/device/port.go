package device

import "context"

// Port is a backend's access to one chip: the four paths the Xilinx XDMA
// driver offers, at the driver's level of abstraction. Chip builds the shell
// protocol on top, so both backends share it.
//
// MMIO methods take no context: one register access is a single bus
// transaction that cannot be cancelled and does not block.
type Port interface {
	// ReadUser and WriteUser access the user BAR (/dev/xdmaN_user).
	ReadUser(off uint32) (uint32, error)
	WriteUser(off uint32, v uint32) error
	// ReadControl reads the XDMA IP's registers (/dev/xdmaN_control).
	ReadControl(off uint32) (uint32, error)
	// H2C writes p to card address addr through channel ch
	// (/dev/xdmaN_h2c_ch); C2H reads (/dev/xdmaN_c2h_ch).
	H2C(ctx context.Context, ch int, p []byte, addr uint64) error
	C2H(ctx context.Context, ch int, p []byte, addr uint64) error
	// WaitIRQ blocks until user IRQ line has fired since the last wait and
	// clears the event (/dev/xdmaN_events_line).
	WaitIRQ(ctx context.Context, line int) error
	Close() error
}

// BlockReader is an optional capability of a Port: reading consecutive
// user-BAR registers in one access, as a mapped BAR allows. off is 4-byte
// aligned and the block lies inside the BAR.
type BlockReader interface {
	ReadUserBlock(off uint32, dst []uint32) error
}
