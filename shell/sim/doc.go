// Package sim simulates a FaaS board: two chips running shell v1, each with
// its user and control BARs, sparse DDR behind an XDMA-style DMA engine, 16
// user interrupt lines, the partial-reconfiguration controller, sensors, tenant
// DDR windows, a DDR scrubber, and the inter-chip link between them.
//
// It follows the Xilinx XDMA driver's semantics so that the agent's code runs
// unchanged against it: 32-bit aligned MMIO (EPROTO otherwise), DMA by card
// address with no file position, alignment (EINVAL) and bounds (EIO) errors,
// timeouts (ETIMEDOUT), and event lines whose interrupts coalesce until read.
// Chip exposes this as Go calls; Chip.Node exposes it as the driver's device
// files, for the xdma backend.
//
// The PR controller takes a partial bitstream in Xilinx .bit format streamed
// to shell.PRStreamAddr, checks it as the configuration engine would
// (header, part, sync word, packets, IDCODE, CRC, length) and on success
// instantiates the role model named by the bitstream's design name from a
// Registry; roles live in bitstreams/ and the simulator imports none of them.
// On failure the previous role stays. Programming time is modeled at the
// part's configuration-port rate and reported in PR_TIME_US; the simulator
// sleeps only when Config.RealTime is set.
//
// Faults for tests: Chip.FailNextProgram, Chip.StallDMA, Board.DropLink,
// Chip.SetTemperature and Chip.PowerCycle. Each surfaces as a distinct,
// documented condition in the shell registers (see shell/SPEC.md).
package sim
