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
//
// What each fault of a board (injected in the simulator, or real) looks like
// to the agent; each leaves the other chip of the board working:
//
//	fault                          error
//	configuration engine failure   Program: *ProgramError, cause CONFIG_ERROR (13); old role kept
//	bad bitstream                  Program: *ProgramError with the PR cause (see shell/SPEC.md); old role kept
//	DMA engine stalled             Read/Write: ErrTimeout (driver ETIMEDOUT after its timeout)
//	inter-chip link lost           Health: ErrLinkDown; Sensors().LinkUp false, LinkErrors counts
//	over temperature               Health: ErrOverTemp; role decoupled (its registers read 0xffffffff);
//	                               Program: *ProgramError, cause OVER_TEMP, also errors.Is ErrOverTemp
//	chip power-cycled              Health: ErrPowerLost; role empty, DDR and image digest zero
//	role DMA outside its window    Health: ErrWindowFault with window and card address; nothing moved
//
// Health conditions stay reported until ClearAlarms; a cause that persists
// (still hot, link still down) latches again at once.
package device
