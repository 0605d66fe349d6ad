package server

// The pool's slots: which it holds (kept in the slot records, so that a
// restart does not forget them), which it keeps warm and until when, and
// the hold that keeps an attachment from taking a slot warm while the
// slot is being let go or cleared.

import (
	"context"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// hold reserves slot i (the first of its group) for letting go or
// clearing, unless a live attachment other than except holds it; free
// reports which. While held, an attachment's place waits (waitFree), so
// that it never takes a slot warm that is being cleared under it; a
// second hold waits for the first. unhold ends the hold.
func (p *pool) hold(ctx context.Context, i int, except string) (unhold func(), free bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		busy := p.held[i]
		if busy == nil {
			break
		}
		p.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			p.mu.Lock()
			return nil, false
		}
		p.mu.Lock()
	}
	for id, r := range p.runs {
		if id != except && !r.releasing && r.covers(i) {
			return nil, false
		}
	}
	done := make(chan struct{})
	p.held[i] = done
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.held, i)
		close(done)
	}, true
}

// waitFree waits until no hold is on slot i.
func (p *pool) waitFree(ctx context.Context, i int) error {
	for {
		p.mu.Lock()
		busy := p.held[i]
		p.mu.Unlock()
		if busy == nil {
			return nil
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitEarlierShares waits until the shares of a's slot this faasd heard of
// before a have finished attaching: loaded, or failed.
func (p *pool) waitEarlierShares(ctx context.Context, a poolapi.Assignment) error {
	p.mu.Lock()
	me := p.runs[a.ID]
	var wait []chan struct{}
	for id, r := range p.runs {
		if id != a.ID && r.a.Share && r.a.Slot == a.Slot && me != nil && r.seq < me.seq {
			wait = append(wait, r.done)
		}
	}
	p.mu.Unlock()
	for _, done := range wait {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// covers reports whether r's attachment, whole or a share, is on slot i.
func (r *attachRun) covers(i int) bool {
	n := max(r.a.Chips, 1)
	if r.a.Share {
		n = 1
	}
	return i >= r.a.Slot && i < r.a.Slot+n
}

// coolAfter keeps a's slots (group) loaded for a's tenant for keep, then
// clears them unless an attachment has taken them warm meanwhile. The
// deadline is kept in the slot records, for a restart.
func (p *pool) coolAfter(a poolapi.Assignment, group []int, keep time.Duration) {
	until := time.Now().Add(keep)
	if err := p.s.cfg.Slots.SetPool(group, &slots.Pool{Attachment: a.ID, WarmUntil: until}); err != nil {
		p.s.log.Warn("pool: recording a slot kept warm", "slot", a.Slot, "err", err)
	}
	p.coolAt(a, until)
}

// coolAt clears a's slot at until unless an attachment has taken it warm
// (keep) by then.
func (p *pool) coolAt(a poolapi.Assignment, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.warm[a.Slot]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(until), func() { p.cool(a, t) })
	p.warm[a.Slot] = t
}

// cool clears a's slot kept warm, its time up, if t is still its timer and
// no live attachment holds the slot. One that does takes the image warm,
// or loads its own over it, or fails and leaves it to its release (stray).
func (p *pool) cool(a poolapi.Assignment, t *time.Timer) {
	p.mu.Lock()
	current := p.warm[a.Slot] == t
	if current {
		delete(p.warm, a.Slot)
	}
	p.mu.Unlock()
	if !current || p.s.base.Err() != nil {
		return
	}
	if unhold, free := p.hold(p.s.base, a.Slot, a.ID); free {
		p.clearLogged(p.s.base, a, "pool: clearing a slot kept warm")
		unhold()
	}
}

// keep stops the clear of slot i, which an attachment takes warm.
func (p *pool) keep(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.warm[i]; t != nil {
		t.Stop()
		delete(p.warm, i)
	}
}

// rewarm re-arms, at start, the clears of the slots kept warm before a
// restart whose time has not run out; the others are swept.
func (p *pool) rewarm() {
	now := time.Now()
	for i, rec := range p.s.cfg.Slots.Snapshot() {
		if rec.Pool == nil || !rec.Pool.WarmUntil.After(now) || rec.Image == nil || !leads(i, rec) {
			continue
		}
		p.coolAt(poolAssignment(i, rec), rec.Pool.WarmUntil)
	}
}

// sweep clears, once, after the registry's first answer, every slot of
// the pool that no attachment holds and none keeps warm: one kept warm
// whose time ran out while this faasd was down, or one whose attachment
// the registry let go meanwhile. Nothing else would ever clear them.
func (p *pool) sweep(ctx context.Context) {
	p.mu.Lock()
	if p.swept {
		p.mu.Unlock()
		return
	}
	p.swept = true
	p.mu.Unlock()
	now := time.Now()
	for i, rec := range p.s.cfg.Slots.Snapshot() {
		if rec.Pool == nil || rec.Pool.WarmUntil.After(now) || rec.Image == nil || !leads(i, rec) || p.covered(i) {
			continue
		}
		a := poolAssignment(i, rec)
		p.loads.Add(1)
		go func() {
			defer p.loads.Done()
			if unhold, free := p.hold(ctx, i, a.ID); free {
				p.s.log.Info("pool: clearing a slot no attachment holds", "slot", i, "attachment", a.ID)
				p.clearLogged(ctx, a, "pool: clearing a slot no attachment holds")
				unhold()
			}
		}()
	}
}

// poolAssignment is the attachment that last held slot i of the pool,
// as far as the slot's record tells: enough to clear it (clear checks
// the slot still holds that image for that tenant).
func poolAssignment(i int, rec slots.Record) poolapi.Assignment {
	return poolapi.Assignment{ID: rec.Pool.Attachment, Slot: i, Digest: rec.Image.Digest, Tenant: rec.Tenant, TenantID: rec.TenantID}
}

// leads reports whether slot i is the first of its load group: the pool
// keeps and clears a group through its first slot.
func leads(i int, rec slots.Record) bool { return len(rec.Group) == 0 || rec.Group[0] == i }

// claims reports whether a live attachment holds slot i. Whoever loaded
// the slot, only the attachment's release (or the operator) clears or
// reloads it: a share's chip is loaded as the first share's tenant, who
// must not wipe it under the others.
func (p *pool) claims(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.runs {
		if !r.releasing && r.covers(i) {
			return true
		}
	}
	return false
}

// covered reports whether an attachment this faasd knows of, live or
// being released, is on slot i.
func (p *pool) covered(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.runs {
		if r.covers(i) {
			return true
		}
	}
	return false
}

// owns reports whether the pool loaded slot i.
func (p *pool) owns(i int) bool {
	return p.s.cfg.Slots.Record(i).Pool != nil
}
