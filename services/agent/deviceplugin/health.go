package deviceplugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/shell"
)

// checkSlot reads one slot's health. It acknowledges the link-down and
// over-temperature alarms whose cause has gone, since nothing else in
// faasd does and the over-temperature one keeps the role decoupled.
func (p *Plugin) checkSlot(i int) chipState {
	sl, _ := p.cfg.Slots.Slot(i)
	rec := p.cfg.Slots.Record(i)
	st := chipState{alidnn: rec.State == agentapi.Loaded && rec.Role != nil && rec.Role.ID == alidnn.ID,
		onDemand: p.cfg.Engines != nil && (rec.State == agentapi.Cleared || p.loading(i))}
	se, err := sl.Chip.Sensors()
	if err != nil {
		st.reason = "board does not answer: " + err.Error()
		return st
	}
	var why []string
	if rec.State == agentapi.Failed {
		why = append(why, "slot failed: "+rec.Reason)
	}
	var ack uint32
	switch {
	case !se.LinkUp:
		why = append(why, "inter-chip link down")
	case se.Alarms&shell.AlarmLinkDown != 0:
		ack |= shell.AlarmLinkDown
	}
	cool := se.TempLimitC - p.cfg.CoolDown
	switch {
	case se.TempC >= se.TempLimitC:
		why = append(why, fmt.Sprintf("over temperature: %.1f °C, limit %.1f °C", se.TempC, se.TempLimitC))
	case se.Alarms&shell.AlarmOverTemp != 0 && se.TempC >= cool:
		why = append(why, fmt.Sprintf("cooling down: %.1f °C, healthy below %.1f °C", se.TempC, cool))
	case se.Alarms&shell.AlarmOverTemp != 0:
		ack |= shell.AlarmOverTemp
	}
	if ack != 0 {
		// ALARM is write-one-to-clear: only these bits change.
		if err := sl.Chip.Write32(shell.RegAlarm, ack); err != nil {
			why = append(why, "acknowledging alarms: "+err.Error())
		}
	}
	st.healthy = len(why) == 0
	st.reason = strings.Join(why, "; ")
	return st
}

// checkAll reads every slot and records the result in the inventory.
func (p *Plugin) checkAll() {
	states := make([]chipState, p.cfg.Slots.Len())
	for i := range states {
		states[i] = p.checkSlot(i)
	}
	for _, i := range p.inv.setHealth(states) {
		if states[i].healthy {
			p.log.Info("chip healthy", "slot", i)
		} else {
			p.log.Warn("chip unhealthy", "slot", i, "reason", states[i].reason)
		}
	}
}

// monitor polls the chips every Config.Poll until ctx ends.
func (p *Plugin) monitor(ctx context.Context) {
	t := time.NewTicker(p.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.checkAll()
		}
	}
}
