// Package bitstreams holds the roles that can be loaded into the dynamic
// (reconfigurable) region of a chip, one folder each: the role's register
// contract and its functional model, which registers itself with the board
// simulator (shell/sim) under the role's design name.
//
// Roles may import shell; nothing in shell imports a role. Mains wire the roles
// they want into the simulator.
package bitstreams
