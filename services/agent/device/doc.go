// Package device is the node agent's view of an FPGA board: a Board of two
// Chips, each with MMIO to the shell and role registers, DMA over its DDR,
// user interrupts, partial reconfiguration through the shell's PR protocol,
// sensors and health.
//
// The shell protocol is written once, in Chip, over a Port: the four access
// paths of the Xilinx XDMA driver (user BAR, control BAR, H2C/C2H DMA by card
// address, event files). Two backends provide Ports: xdma, which opens the
// driver's /dev/xdmaN_* files, and sim, which wraps the board simulator of
// shell/sim. devicetest holds the conformance suite both pass.
//
// Errors wrap a few categories (ErrMisaligned, ErrOutOfRange, ErrTimeout,
// ErrProgram, ErrOverTemp, …) checked with errors.Is; FromErrno maps the
// driver's errno values onto them.
package device
