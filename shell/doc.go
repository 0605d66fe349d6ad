// Package shell is the contract of the FPGA shell, the static region of every
// chip on a FaaS board: PCIe identities, the BAR map, every shell register with
// its offset, width, access and meaning, the partial-reconfiguration (PR)
// region, DMA channels, IRQ lines and the parts of the two chips.
//
// A released shell version is frozen; a new layout is a new version. SPEC.md
// beside this file is the same contract for hardware engineers and is kept in
// sync with these definitions by a test.
//
// This package imports no other package of the module.
package shell
