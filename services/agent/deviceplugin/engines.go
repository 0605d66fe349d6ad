package deviceplugin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
)

// Engines loads the AliDNN engine onto a chip for its shares and clears it
// again (Config.Engines); faasd's server.Engines is one.
type Engines interface {
	// LoadEngine loads the engine onto slot and returns when it is
	// loaded, or why not.
	LoadEngine(ctx context.Context, slot int) error
	// Loaded reports whether slot holds an engine LoadEngine loaded (by
	// this faasd or an earlier one).
	Loaded(ctx context.Context, slot int) bool
	// ClearEngine clears slot if LoadEngine loaded it.
	ClearEngine(ctx context.Context, slot int) error
}

// engineLoad is one LoadEngine under way or ended.
type engineLoad struct {
	done chan struct{}
	err  error
}

// engines is the plugin's record of its on-demand loads.
type engines struct {
	mu    sync.Mutex
	loads map[int]*engineLoad // by slot, until PreStartContainer has seen it end
	idle  map[int]time.Time   // slots holding our engine and no share, since
}

// loading reports whether the plugin is loading an engine onto slot.
func (p *Plugin) loading(slot int) bool {
	p.eng.mu.Lock()
	defer p.eng.mu.Unlock()
	l := p.eng.loads[slot]
	if l == nil {
		return false
	}
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// startEngine starts loading the engine onto slot unless a load is under
// way or has ended unseen. The load runs under the plugin's context, not
// a request's: the kubelet's PreStartContainer gives up after 30 s and
// asks again, and finds the same load.
func (p *Plugin) startEngine(slot int) *engineLoad {
	p.eng.mu.Lock()
	defer p.eng.mu.Unlock()
	if l := p.eng.loads[slot]; l != nil {
		return l
	}
	l := &engineLoad{done: make(chan struct{})}
	p.eng.loads[slot] = l
	p.log.Info("loading the AliDNN engine for shares", "slot", slot)
	go func() {
		defer close(l.done)
		l.err = p.cfg.Engines.LoadEngine(p.ctx, slot)
		if l.err != nil {
			p.log.Warn("loading the AliDNN engine for shares failed", "slot", slot, "err", l.err)
		} else {
			p.log.Info("loaded the AliDNN engine for shares", "slot", slot)
		}
		p.checkAll()
	}()
	return l
}

// awaitEngine returns when slot holds an AliDNN engine, loading one if
// the chip is empty: what a container of shares needs before it starts.
// A failed load is forgotten once reported, so that the kubelet's next
// try loads again.
func (p *Plugin) awaitEngine(ctx context.Context, slot int) error {
	for {
		rec := p.cfg.Slots.Record(slot)
		p.eng.mu.Lock()
		l := p.eng.loads[slot]
		p.eng.mu.Unlock()
		switch {
		case l != nil:
			select {
			case <-ctx.Done():
				return fmt.Errorf("slot %d: the AliDNN engine is still loading: %w", slot, ctx.Err())
			case <-l.done:
			}
			p.eng.mu.Lock()
			delete(p.eng.loads, slot)
			p.eng.mu.Unlock()
			if l.err != nil {
				return fmt.Errorf("slot %d: faasd could not load the AliDNN engine for %s (its --share-image, as the account of --share-token-file, which must be subscribed to the image's listing): %w", slot, ResourceShare, l.err)
			}
			continue
		case (rec.State == agentapi.Loaded || rec.State == agentapi.Busy) && rec.Role != nil && rec.Role.ID == alidnn.ID:
			return nil
		case rec.State == agentapi.Cleared:
			p.startEngine(slot)
			continue
		case rec.State == agentapi.Loading:
			// Another load or a clear (an idle engine's) is under way.
			select {
			case <-ctx.Done():
				return fmt.Errorf("slot %d: busy loading or clearing: %w", slot, ctx.Err())
			case <-time.After(p.cfg.Poll):
			}
			continue
		}
		img := "no image"
		if rec.Image != nil {
			img = rec.Image.Ref
		}
		return fmt.Errorf("slot %d holds %s (%s), not an AliDNN engine: its %s devices are not usable; the kubelet allocates others once the monitor has seen it", slot, img, rec.State, ResourceShare)
	}
}

// freeEngines clears the engines loaded for shares from slots about to be
// handed out whole, so that a pod holding a chip never acts as the
// account that loaded engines for shares.
func (p *Plugin) freeEngines(ctx context.Context, slots []int) error {
	cleared := false
	for _, s := range slots {
		if !p.cfg.Engines.Loaded(ctx, s) {
			continue
		}
		if err := p.cfg.Engines.ClearEngine(ctx, s); err != nil {
			return fmt.Errorf("slot %d: clearing the AliDNN engine loaded for shares: %w", s, err)
		}
		cleared = true
		p.log.Info("cleared the engine loaded for shares from a chip allocated whole", "slot", s)
	}
	if cleared {
		p.checkAll() // the chip's shares are offered again at once, not at the next poll
	}
	return nil
}

// sweepEngines clears the engines loaded for shares that have had no
// share allocated for Config.EngineIdle.
func (p *Plugin) sweepEngines(ctx context.Context) {
	whole, shares := p.inv.usage()
	ours := make([]bool, len(whole))
	for s := range whole {
		ours[s] = p.cfg.Engines.Loaded(ctx, s)
	}
	now := time.Now()
	var clear []int
	p.eng.mu.Lock()
	for s := range whole {
		if shares[s] > 0 || whole[s] >= 0 || p.eng.loads[s] != nil || !ours[s] {
			delete(p.eng.idle, s)
			continue
		}
		since, ok := p.eng.idle[s]
		if !ok {
			p.eng.idle[s] = now
			continue
		}
		if now.Sub(since) >= p.cfg.EngineIdle {
			clear = append(clear, s)
			delete(p.eng.idle, s)
		}
	}
	p.eng.mu.Unlock()
	for _, s := range clear {
		// A share allocated meanwhile waits for the clear, then loads
		// again (awaitEngine).
		if err := p.cfg.Engines.ClearEngine(ctx, s); err != nil {
			p.log.Warn("clearing an idle engine loaded for shares", "slot", s, "err", err)
			continue
		}
		p.log.Info("cleared an idle engine loaded for shares", "slot", s, "idle", p.cfg.EngineIdle)
	}
	if len(clear) > 0 {
		p.checkAll()
	}
}

// preStart readies a container's devices: engines loaded on its shares'
// chips, and none of ours left on its whole chips.
func (p *Plugin) preStart(ctx context.Context, k kind, ids []string) error {
	var slots []int
	for _, d := range ids {
		ref, err := p.inv.parse(k, d)
		if err != nil {
			return err
		}
		if k == kindShare {
			slots = append(slots, ref.slot)
		} else {
			slots = append(slots, ref.slots...)
		}
	}
	slices.Sort(slots)
	slots = slices.Compact(slots)
	if k != kindShare {
		return p.freeEngines(ctx, slots)
	}
	for _, s := range slots {
		if err := p.awaitEngine(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
