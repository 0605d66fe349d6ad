package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// The pool across restarts of faasd: what the pool holds is kept in the
// slot records, so a restarted faasd clears what it must and keeps what
// attachments still hold.

// restart stops the agent's server and starts another over the same
// boards, cache and state files, on the same socket and address: faasd
// restarted, with what it held in memory (its attachments, the
// credentials installed) gone and its slot table read back from its
// state file, as faasd serve does.
func (a *agent) restart(t *testing.T) {
	t.Helper()
	a.down(t)
	a.up(t)
}

// down stops the agent's server: faasd killed.
func (a *agent) down(t *testing.T) {
	t.Helper()
	a.stop()
}

// up starts the agent again after down.
func (a *agent) up(t *testing.T) {
	t.Helper()
	cfg := a.cfg
	table, err := slots.Open([]*device.Board{a.board}, a.state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Reconcile(context.Background(), a.cache.Has); err != nil {
		t.Fatal(err)
	}
	lcfg := a.lcfg
	lcfg.Slots = table
	l, err := loader.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Slots, cfg.Loader = table, l
	a.table, a.lcfg = table, lcfg
	if cfg.TCPListener != nil {
		ln, err := net.Listen("tcp", a.tcp)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TCPListener = ln
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.srv, a.cfg = srv, cfg
	a.stop = serve(t, srv, a.socket)
}

// TestPoolRestart: a faasd restarted takes its ready attachment back
// without a reload, the attachment's credential opens sessions again, and
// the detach then clears the slot as one the pool loaded.
func TestPoolRestart(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, -1)
	ctx := context.Background()

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	loadedAt := a.table.Record(ready.Slot).LoadedAt
	a.restart(t)
	tc, err := faas.PinnedTLS(ready)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, ready.Endpoint, faas.WithTLSConfig(tc), faas.WithToken(att.Credential))
	poll(t, "the restarted agent to take the credential back", func() bool {
		_, err := c.Slots(ctx)
		return err == nil
	})
	d, err := c.Open(ctx, ready.Slot)
	if err != nil {
		t.Fatalf("session after the restart: %v", err)
	}
	defer d.Close()
	roundTrip(t, d)
	if rec := a.table.Record(ready.Slot); !rec.LoadedAt.Equal(loadedAt) {
		t.Errorf("the restarted agent loaded slot %d again (at %v, first at %v)", ready.Slot, rec.LoadedAt, loadedAt)
	}
	var now poolapi.Attachment
	reg.api(t, "alice", "GET", "/attachments/"+att.ID, nil, &now)
	if now.State != poolapi.Ready {
		t.Errorf("the attachment after the restart: %s %s", now.State, now.Error)
	}

	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	if !released(t, reg, att.ID) {
		t.Error("the release after a restart was reported unscrubbed")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared {
		t.Errorf("slot %d released after a restart: %+v, want cleared", ready.Slot, rec)
	}
}

// TestPoolEndedWhileDown: an attachment detached while its node's faasd
// was down is not kept warm when the node returns: its slot is cleared and
// scrubbed, the release says so only then, and the node reports the slot
// free again.
func TestPoolEndedWhileDown(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, time.Hour)

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	a.down(t)
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	a.up(t)
	if !released(t, reg, att.ID) {
		t.Error("an attachment detached while its node was down was released unscrubbed")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared {
		t.Errorf("slot %d after the node's return: %+v, want cleared", ready.Slot, rec)
	}
	poll(t, "the node to report the slot cleared", func() bool {
		return strings.HasPrefix(reported(t, reg, a, ready.Slot), string(agentapi.Cleared))
	})
}

// TestPoolWarmAcrossRestart: a slot kept warm when faasd restarts is
// cleared when its keep-warm time runs out, by the restarted faasd.
func TestPoolWarmAcrossRestart(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, 2*time.Second)

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	if released(t, reg, att.ID) {
		t.Error("a detach kept warm was reported scrubbed")
	}
	a.restart(t)
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Loaded || rec.Pool == nil || rec.Pool.WarmUntil.IsZero() {
		t.Fatalf("slot %d kept warm, after the restart: %+v", ready.Slot, rec)
	}
	poll(t, "the slot kept warm to be cleared after the restart", func() bool {
		return a.table.Record(ready.Slot).State == agentapi.Cleared
	})
}

// TestPoolWarmExpiredWhileDown: a slot whose keep-warm time ran out while
// faasd was down is cleared once the restarted faasd has heard from the
// registry that no attachment holds it.
func TestPoolWarmExpiredWhileDown(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, time.Second)

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	released(t, reg, att.ID)
	a.down(t)
	until := a.table.Record(ready.Slot).Pool
	if until == nil || until.WarmUntil.IsZero() {
		t.Fatalf("slot %d kept warm: %+v", ready.Slot, a.table.Record(ready.Slot))
	}
	for time.Now().Before(until.WarmUntil) {
		time.Sleep(time.Until(until.WarmUntil))
	}
	a.up(t)
	poll(t, "the slot whose keep-warm ran out while faasd was down to be cleared", func() bool {
		return a.table.Record(ready.Slot).State == agentapi.Cleared
	})
}
