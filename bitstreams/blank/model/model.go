// Package model is the simulator's functional model of the blank role.
package model

import (
	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/shell/sim"
)

// Model is the blank role, for a sim.Registry.
var Model = sim.RoleModel{
	Name:    blank.Name,
	ID:      blank.ID,
	Version: blank.Version,
	New:     func(*sim.Env, sim.RoleConfig) (sim.Role, error) { return role{}, nil },
}

type role struct{}

func (role) ReadReg(off uint32) uint32 {
	if off == blank.RegMagic {
		return blank.ID
	}
	return 0
}

func (role) WriteReg(uint32, uint32) {}
func (role) Close()                  {}
