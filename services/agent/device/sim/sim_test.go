package sim_test

import (
	"testing"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/services/agent/device/devicetest"
	"github.com/fpga-faas/faas/services/agent/device/sim"
	shellsim "github.com/fpga-faas/faas/shell/sim"
)

func TestConformance(t *testing.T) {
	devicetest.Run(t, &devicetest.SimHarness{OpenBoard: func(t *testing.T, sb *shellsim.Board) *device.Board {
		b, err := sim.Open(sb)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}})
}
