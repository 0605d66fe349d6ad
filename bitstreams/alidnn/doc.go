// Package alidnn is the AliDNN role: a VTA-style int8 deep-learning
// accelerator for the dynamic region. The folder holds the role's instruction
// set now (subpackage isa: encoding, decoding, assembler and disassembler,
// specified in isa/ISA.md); the role's register contract and its functional
// model for the simulator come later.
package alidnn
