package main

import (
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	blankmodel "github.com/fpga-faas/faas/bitstreams/blank/model"
	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/shell/sim"
)

// simRoles registers the role models simulated boards can be programmed with.
// This is the one place the agent binary learns about role models; the agent
// packages never import them.
func simRoles() (*sim.Registry, error) {
	return sim.NewRegistry(blankmodel.Model, loopbackmodel.Model, alidnnmodel.Model)
}
