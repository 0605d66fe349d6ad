package server

// The node's side of the registry's accelerator pool (sdk/poolapi): faasd
// long-polls its assignments and reconciles. A live attachment is loaded
// for its tenant under a load grant the registry gives the node (the node
// never holds the tenant's token), its credential is installed (the node
// is given only the hash), and it is reported ready. An ended one is let
// go: its credential and sessions end, its chips are cleared and their
// memory zeroed — or, after a detach, kept loaded for the same tenant a
// while (Config.KeepWarm), so that the tenant's next attach needs no load.
//
// Which slots the pool loaded, and until when one is kept warm, is kept in
// the slot records (slots.Pool), so that it survives a restart: a restarted
// faasd clears the slots kept warm whose time ran out while it was down,
// re-arms the others, and clears, after the registry's first answer, every
// slot of the pool that no attachment holds. An attachment that ended
// while its node was down is not kept warm: its slot is cleared and
// scrubbed when the node returns.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// DefaultKeepWarm is Config.KeepWarm's default; the registry's must match.
const DefaultKeepWarm = 2 * time.Minute

// pool is this node's part of the accelerator pool: it reconciles the
// node's assignments and keeps the slots it loaded for them (poolslots.go).
type pool struct {
	s    *Server
	mu   sync.Mutex
	runs map[string]*attachRun // by attachment id
	warm map[int]*time.Timer   // clears of slots kept warm, by slot
	// held are the slots being let go or cleared (hold), by first slot;
	// each channel is closed when that ends.
	held map[int]chan struct{}
	seq  uint64 // of the last attachRun
	// swept is set once the slots of the pool that no attachment held
	// at the registry's first answer were cleared.
	swept bool
	loads sync.WaitGroup
}

// attachRun is one attachment on this node.
type attachRun struct {
	a         poolapi.Assignment
	done      chan struct{} // closed when its attach has finished
	releasing bool
	// unseen: the attachment had ended when this faasd first heard of
	// it (it ended while the node was down); its slot is not kept warm.
	unseen bool
	seq    uint64 // order in which this faasd heard of it
}

func newPool(s *Server) *pool {
	return &pool{s: s, runs: map[string]*attachRun{}, warm: map[int]*time.Timer{}, held: map[int]chan struct{}{}}
}

// run long-polls the assignments until ctx ends.
func (p *pool) run(ctx context.Context) {
	p.rewarm()
	var since int64
	backoff := time.Second
	for ctx.Err() == nil {
		as, err := p.s.cfg.Registry.Assignments(ctx, p.s.cfg.NodeID, since, regclient.MaxAssignmentsWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			p.s.log.Warn("pool assignments", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		since = as.Revision
		p.reconcile(ctx, as.Assignments)
		p.sweep(ctx)
	}
	p.loads.Wait()
	p.mu.Lock()
	for _, t := range p.warm {
		t.Stop()
	}
	p.mu.Unlock()
}

// reconcile starts what the desired state asks for; it is idempotent.
func (p *pool) reconcile(ctx context.Context, as []poolapi.Assignment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range as {
		r := p.runs[a.ID]
		switch {
		case a.State.Live() && r == nil:
			p.seq++
			r = &attachRun{a: a, done: make(chan struct{}), seq: p.seq}
			p.runs[a.ID] = r
			p.loads.Add(1)
			go func() {
				defer p.loads.Done()
				defer close(r.done)
				p.attach(ctx, a)
			}()
		case !a.State.Live() && (r == nil || !r.releasing):
			if r == nil { // ended before this faasd saw it (a restart)
				r = &attachRun{a: a, done: make(chan struct{}), unseen: true}
				close(r.done)
				p.runs[a.ID] = r
			}
			r.releasing = true
			p.loads.Add(1)
			go func() {
				defer p.loads.Done()
				<-r.done
				p.release(ctx, a, r.unseen)
				p.mu.Lock()
				delete(p.runs, a.ID)
				p.mu.Unlock()
			}()
		}
	}
}

func (p *pool) report(ctx context.Context, a poolapi.Assignment, r poolapi.StateReport) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := p.s.cfg.Registry.ReportAttachment(rctx, p.s.cfg.NodeID, a.ID, r)
	if err != nil && ctx.Err() == nil {
		p.s.log.Warn("pool report", "attachment", a.ID, "state", r.State, "err", err)
	}
	return err
}

// holds reports whether slot i holds a's image loaded for a's tenant.
func holds(rec slots.Record, a poolapi.Assignment) bool {
	return (rec.State == agentapi.Loaded || rec.State == agentapi.Busy) && rec.Image != nil &&
		rec.Image.Digest == a.Digest && (rec.Tenant == a.Tenant || a.Share)
}

// attach makes live attachment a ready: loaded (unless its slot already
// holds the image for the tenant), its credential installed.
func (p *pool) attach(ctx context.Context, a poolapi.Assignment) {
	s := p.s
	sum, err := hex.DecodeString(a.CredentialSHA256)
	if err != nil || len(sum) != 32 {
		p.report(ctx, a, poolapi.StateReport{State: poolapi.Failed, Error: "the node got a malformed credential hash"})
		return
	}
	loaded, err := p.place(ctx, a)
	if err != nil {
		if ctx.Err() == nil {
			p.report(ctx, a, poolapi.StateReport{State: poolapi.Failed, Error: err.Error()})
		}
		return
	}
	g := Grant{ID: a.ID, Slots: loaded}
	if a.Share {
		g = Grant{ID: a.ID, Shares: map[int]int{a.Slot: 1}}
		loaded = []int{a.Slot}
	}
	if err := s.cfg.Grants.Install(g, [32]byte(sum)); err != nil {
		p.report(ctx, a, poolapi.StateReport{State: poolapi.Failed, Error: err.Error()})
		// A failed attachment is released at once: nobody else will
		// clear what the pool loaded for it.
		if !a.Share && p.owns(a.Slot) {
			if unhold, free := p.hold(ctx, a.Slot, a.ID); free {
				p.clearLogged(ctx, a, "pool: clearing the slot of a failed attachment")
				unhold()
			}
		}
		return
	}
	if err := p.report(ctx, a, poolapi.StateReport{State: poolapi.Ready, Slots: loaded}); err != nil {
		// Ended meanwhile, or the registry is away: the next answer
		// to the long poll says which; until then nobody has the
		// credential's secret but the tenant.
		return
	}
	s.log.Info("pool attachment ready", "attachment", a.ID, "tenant", a.Tenant, "slots", loaded)
}

// place returns the slots a's image is loaded in for it, loading it when
// the slot does not hold it already.
func (p *pool) place(ctx context.Context, a poolapi.Assignment) ([]int, error) {
	s := p.s
	if _, err := s.cfg.Slots.Slot(a.Slot); err != nil {
		return nil, fmt.Errorf("this node has no slot %d", a.Slot)
	}
	if err := p.waitFree(ctx, a.Slot); err != nil {
		return nil, err
	}
	if a.Share {
		// The registry places a share on a chip it gave the first share
		// of the image before that one is loaded: wait for it.
		if err := p.waitEarlierShares(ctx, a); err != nil {
			return nil, err
		}
	}
	if rec := s.cfg.Slots.Record(a.Slot); holds(rec, a) {
		p.keep(a.Slot)
		group := []int{a.Slot}
		if len(rec.Group) > 0 {
			group = rec.Group
		}
		// Taken warm, or adopted again after a restart: the record's
		// hold stands as it is. A keep-warm deadline it still names is
		// harmless, since every clear first makes sure no live
		// attachment holds the slot (hold), and writing the state file
		// here would put a disk flush on every warm attach.
		return group, nil
	}
	if a.State != poolapi.Ready {
		if err := p.report(ctx, a, poolapi.StateReport{State: poolapi.Loading}); err != nil {
			return nil, err
		}
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	grant, err := s.cfg.Registry.AttachmentGrant(gctx, s.cfg.NodeID, a.ID)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("the registry gave no load grant: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	slot := a.Slot
	res, err := s.cfg.Loader.Load(lctx, loader.Request{ID: newID(), Image: s.cfg.Registry.Host() + "/" + a.Repository + "@" + a.Digest,
		Slot: &slot, Tenant: loader.Tenant{Name: a.Tenant, ID: a.TenantID, Grant: &grant},
		// The pool's hold goes in the load's own records (loading,
		// then loaded): faasd killed at any point of the load still
		// knows after a restart that the slots are the pool's to clear.
		Pool: &slots.Pool{Attachment: a.ID}})
	s.poke()
	if err != nil {
		return nil, errors.New(loaderWireError(err).Message)
	}
	s.hub.closeSlots(res.Slots)
	return res.Slots, nil
}

// release lets ended attachment a go and reports it released. An
// attachment unseen while live (it ended while the node was down) is not
// kept warm: its slot is cleared now.
func (p *pool) release(ctx context.Context, a poolapi.Assignment, unseen bool) {
	s := p.s
	s.cfg.Grants.End(a.ID) // its sessions end; their memory is zeroed
	scrubbed := p.letGo(ctx, a, unseen)
	backoff := time.Second
	for ctx.Err() == nil {
		err := p.report(ctx, a, poolapi.StateReport{State: poolapi.Released, Scrubbed: scrubbed})
		if err == nil || errors.Is(err, registryclient.ErrNotFound) || errors.Is(err, registryclient.ErrConflict) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	s.log.Info("pool attachment released", "attachment", a.ID, "state", a.State, "scrubbed", scrubbed)
}

// letGo clears a's slot, or keeps it warm, or leaves it to whoever holds
// it now, and reports whether nothing of a's is left on the chip.
func (p *pool) letGo(ctx context.Context, a poolapi.Assignment, unseen bool) bool {
	s := p.s
	unhold, free := p.hold(ctx, a.Slot, a.ID)
	if !free {
		// Another live attachment holds the chip: the tenant attached
		// again and took the image warm, or shares run on it. It is
		// theirs now. (A share's own sessions ended with its credential,
		// their memory zeroed.)
		return a.Share
	}
	defer unhold()
	if _, err := s.cfg.Slots.Slot(a.Slot); err != nil {
		return true
	}
	rec := s.cfg.Slots.Record(a.Slot)
	switch {
	case a.Share && !p.owns(a.Slot):
		// The last share on a chip someone else loaded: its sessions
		// ended, their memory zeroed; the chip stays its loader's.
		return true
	case !p.owns(a.Slot):
		// The tenant's own load, which the attachment used as it was:
		// the attachment's sessions ended, the load stays the tenant's.
		return false
	case !holds(rec, a):
		// Cleared or reloaded since, or another attachment's image is
		// still there: nothing of a's is left.
		p.stray(ctx, a.Slot, rec)
		return true
	case a.Share:
		// The last share on a chip the pool loaded for shares.
		return p.clearLogged(ctx, a, "pool release: clearing")
	}
	group := []int{a.Slot}
	if len(rec.Group) > 0 {
		group = rec.Group
	}
	s.hub.closeSlots(group)
	keep := s.cfg.KeepWarm
	if keep == 0 {
		keep = DefaultKeepWarm
	}
	if a.KeepWarm && keep > 0 && !unseen {
		p.coolAfter(a, group, keep)
		return false
	}
	return p.clearLogged(ctx, a, "pool release: clearing")
}

// stray takes care of slot i, which the pool loaded for another attachment
// and no live attachment holds (the caller holds it), as a ends there. Its
// attachment left the image to a: it ended, or its keep-warm ran out,
// while a was placed on the slot, and a's own load then failed before
// replacing the image (the soak found a chip left so, loaded for nobody).
// Nothing else would clear it: a slot still kept warm gets its clear armed
// again, any other is cleared now.
func (p *pool) stray(ctx context.Context, i int, rec slots.Record) {
	if rec.State != agentapi.Loaded || rec.Image == nil || !leads(i, rec) {
		return
	}
	b := poolAssignment(i, rec)
	if rec.Pool.WarmUntil.After(time.Now()) {
		p.coolAt(b, rec.Pool.WarmUntil)
		return
	}
	p.clearLogged(ctx, b, "pool release: clearing an image left to an attachment that failed")
}

// clearLogged clears a's slot and reports whether it was cleared, logging
// a failure as what.
func (p *pool) clearLogged(ctx context.Context, a poolapi.Assignment, what string) bool {
	if err := p.clear(ctx, a); err != nil {
		p.s.log.Error(what, "attachment", a.ID, "slot", a.Slot, "err", err)
		return false
	}
	return true
}

// clear clears a's slot if it still holds a's image for a's tenant.
func (p *pool) clear(ctx context.Context, a poolapi.Assignment) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	// The clear replaces the records: the pool's hold on them ends.
	return p.s.clear(cctx, a.Slot, func(i int, r slots.Record) error {
		if !holds(r, a) && r.State != agentapi.Cleared && r.State != "" {
			return fmt.Errorf("slot %d changed hands", i)
		}
		return nil
	})
}
